//! SQLite runs the queries written once (see `crate::sql`): reads on the
//! read pool, writes on the write connections under the store's write lock.

use async_trait::async_trait;

use super::SqliteStore;
use crate::sql::{Backend, Query, Row, bind_args};

#[async_trait]
impl Backend for SqliteStore {
    async fn raw_fetch_optional(&self, q: Query) -> Result<Option<Row>, sqlx::Error> {
        let sql = q.for_sqlite();
        let query = bind_args!(sqlx::query(&sql), q.args);
        Ok(query.fetch_optional(&self.pool).await?.map(Row::Sqlite))
    }

    async fn raw_fetch_all(&self, q: Query) -> Result<Vec<Row>, sqlx::Error> {
        let sql = q.for_sqlite();
        let query = bind_args!(sqlx::query(&sql), q.args);
        let rows = query.fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(Row::Sqlite).collect())
    }

    async fn raw_execute(&self, q: Query) -> Result<u64, sqlx::Error> {
        let _write = self.write_guard().await;
        let sql = q.for_sqlite();
        let query = bind_args!(sqlx::query(&sql), q.args);
        Ok(query.execute(self.writer()).await?.rows_affected())
    }

    async fn raw_write_fetch_all(&self, q: Query) -> Result<Vec<Row>, sqlx::Error> {
        let _write = self.write_guard().await;
        let sql = q.for_sqlite();
        let query = bind_args!(sqlx::query(&sql), q.args);
        let rows = query.fetch_all(self.writer()).await?;
        Ok(rows.into_iter().map(Row::Sqlite).collect())
    }

    async fn raw_transaction(&self, queries: Vec<Query>) -> Result<Vec<u64>, (usize, sqlx::Error)> {
        let _write = self.write_guard().await;
        let mut tx = self.begin_write().await.map_err(|e| (0, e))?;
        let mut changed = Vec::with_capacity(queries.len());
        for (i, q) in queries.into_iter().enumerate() {
            let sql = q.for_sqlite();
            let query = bind_args!(sqlx::query(&sql), q.args);
            changed.push(
                query
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| (i, e))?
                    .rows_affected(),
            );
        }
        tx.commit().await.map_err(|e| (changed.len(), e))?;
        Ok(changed)
    }

    async fn raw_read_snapshot(&self, queries: Vec<Query>) -> Result<Vec<Vec<Row>>, sqlx::Error> {
        // A read transaction sees one snapshot (WAL) from its first read on.
        let mut tx = self.pool.begin().await?;
        let mut read = Vec::with_capacity(queries.len());
        for q in queries {
            let sql = q.for_sqlite();
            let query = bind_args!(sqlx::query(&sql), q.args);
            let rows = query.fetch_all(&mut *tx).await?;
            read.push(rows.into_iter().map(Row::Sqlite).collect());
        }
        tx.commit().await?;
        Ok(read)
    }

    async fn allocate_agent_uid(
        &self,
        user: &str,
        first: u32,
        last: u32,
    ) -> crate::StoreResult<u32> {
        self.agent_uid_impl(user, first, last).await
    }
}
