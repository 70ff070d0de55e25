//! PostgreSQL runs the queries written once (see `crate::sql`) on its pool,
//! with the placeholders numbered.

use async_trait::async_trait;

use super::PostgresStore;
use crate::sql::{Backend, Query, Row, bind_args};

#[async_trait]
impl Backend for PostgresStore {
    async fn raw_fetch_optional(&self, q: Query) -> Result<Option<Row>, sqlx::Error> {
        let query = bind_args!(sqlx::query(&q.sql), q.args);
        Ok(query.fetch_optional(&self.pool).await?.map(Row::Postgres))
    }

    async fn raw_fetch_all(&self, q: Query) -> Result<Vec<Row>, sqlx::Error> {
        let query = bind_args!(sqlx::query(&q.sql), q.args);
        let rows = query.fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(Row::Postgres).collect())
    }

    async fn raw_execute(&self, q: Query) -> Result<u64, sqlx::Error> {
        let query = bind_args!(sqlx::query(&q.sql), q.args);
        Ok(query.execute(&self.pool).await?.rows_affected())
    }

    async fn raw_write_fetch_all(&self, q: Query) -> Result<Vec<Row>, sqlx::Error> {
        self.raw_fetch_all(q).await
    }

    async fn raw_transaction(&self, queries: Vec<Query>) -> Result<Vec<u64>, (usize, sqlx::Error)> {
        let mut tx = self.pool.begin().await.map_err(|e| (0, e))?;
        let mut changed = Vec::with_capacity(queries.len());
        for (i, q) in queries.into_iter().enumerate() {
            let query = bind_args!(sqlx::query(&q.sql), q.args);
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
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        let mut read = Vec::with_capacity(queries.len());
        for q in queries {
            let query = bind_args!(sqlx::query(&q.sql), q.args);
            let rows = query.fetch_all(&mut *tx).await?;
            read.push(rows.into_iter().map(Row::Postgres).collect());
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
