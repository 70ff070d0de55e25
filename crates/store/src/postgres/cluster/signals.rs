//! Signals to the node that owns a turn (cancel, answers), woken by NOTIFY.

use sqlx::Row;

use super::{ClusterStore, SIGNALS_CHANNEL, Signal, notify};
use crate::StoreResult;
use crate::records::{db, execute};

impl ClusterStore {
    /// Leave a signal for `node_id` and wake it.
    pub async fn send_signal(&self, node_id: &str, signal: &Signal) -> StoreResult<()> {
        let mut tx = self.pool.begin().await.map_err(db("sending a signal"))?;
        let query = sqlx::query(
            "INSERT INTO cluster_signals (node_id, kind, target, data) VALUES ($1, $2, $3, $4)",
        )
        .bind(node_id)
        .bind(&signal.kind)
        .bind(&signal.target)
        .bind(&signal.data);
        execute(&mut *tx, query, "sending a signal").await?;
        notify(&mut tx, SIGNALS_CHANNEL, node_id).await?;
        tx.commit().await.map_err(db("sending a signal"))?;
        Ok(())
    }

    /// The signals waiting for `node_id`, oldest first; they are deleted.
    pub async fn take_signals(&self, node_id: &str) -> StoreResult<Vec<Signal>> {
        let rows = sqlx::query(
            "DELETE FROM cluster_signals WHERE node_id = $1 RETURNING id, kind, target, data",
        )
        .bind(node_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db("reading signals"))?;
        let mut signals = rows
            .iter()
            .map(|row| {
                let id: i64 = row.try_get("id")?;
                Ok((
                    id,
                    Signal {
                        kind: row.try_get("kind")?,
                        target: row.try_get("target")?,
                        data: row.try_get("data")?,
                    },
                ))
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(db("reading signals"))?;
        signals.sort_by_key(|(id, _)| *id);
        Ok(signals.into_iter().map(|(_, signal)| signal).collect())
    }
}
