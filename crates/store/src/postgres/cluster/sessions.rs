//! What the cluster reads and saves of sessions: where each workspace was
//! last saved, and events of many sessions in one round trip.

use agentd_protocol::EventEnvelope;
use sqlx::Row;

use super::ClusterStore;
use crate::StoreResult;
use crate::records::{db, envelope, execute};

/// What [`ClusterStore::events_in_ranges`] runs: `$1` sessions, `$2` afters,
/// `$3` uptos, `$4` the limit. Each range is its own index scan (the
/// `LATERAL`): written as a plain join, the generic plan PostgreSQL switches a
/// prepared statement to after five runs merge-joined the whole events table,
/// 12 ms at 17 000 events and growing with the table. Public for the test that
/// reads its plan.
pub const EVENTS_IN_RANGES: &str = "SELECT e.session_id, e.seq, e.data, e.created_at \
     FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS w(session_id, after, upto) \
     CROSS JOIN LATERAL (SELECT session_id, seq, data, created_at FROM events \
       WHERE session_id = w.session_id AND seq > w.after AND seq <= w.upto \
       ORDER BY seq LIMIT $4) AS e \
     ORDER BY e.session_id, e.seq LIMIT $4";

impl ClusterStore {
    /// The manifest hash of the session's workspace as last saved.
    pub async fn workspace(&self, session_id: &str) -> StoreResult<Option<String>> {
        let row = sqlx::query("SELECT manifest_hash FROM session_workspaces WHERE session_id = $1")
            .bind(session_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("reading the saved workspace"))?;
        row.map(|row| row.try_get(0))
            .transpose()
            .map_err(db("reading the saved workspace"))
    }

    /// Point the session's shared workspace at `manifest_hash`. With
    /// `lease_turn`, only while `node_id` still holds that turn's lease (a
    /// node that lost it must not overwrite newer work); `false` if not saved.
    pub async fn save_workspace(
        &self,
        session_id: &str,
        manifest_hash: &str,
        node_id: &str,
        lease_turn: Option<&str>,
    ) -> StoreResult<bool> {
        let query = sqlx::query(
            "INSERT INTO session_workspaces (session_id, manifest_hash, saved_by) \
             SELECT $1, $2, $3 WHERE $4::text IS NULL OR EXISTS (SELECT 1 FROM turn_leases \
               WHERE session_id = $1 AND turn_id = $4 AND node_id = $3) \
             ON CONFLICT (session_id) DO UPDATE \
             SET manifest_hash = $2, saved_by = $3, saved_at = now()",
        )
        .bind(session_id)
        .bind(manifest_hash)
        .bind(node_id)
        .bind(lease_turn);
        let saved = execute(&self.pool, query, "saving the workspace").await?;
        Ok(saved.rows_affected() == 1)
    }

    /// The events of several sessions in one round trip: for each `(session,
    /// after, upto)`, those with `after < seq <= upto`, ordered by session and
    /// `seq`. At most `limit` in all (a stream past the cut reads the rest from
    /// the store when it sees the gap).
    pub async fn events_in_ranges(
        &self,
        ranges: &[(String, u64, u64)],
        limit: u32,
    ) -> StoreResult<Vec<EventEnvelope>> {
        let sessions: Vec<&str> = ranges.iter().map(|(s, _, _)| s.as_str()).collect();
        let seq = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let after: Vec<i64> = ranges.iter().map(|(_, a, _)| seq(*a)).collect();
        let upto: Vec<i64> = ranges.iter().map(|(_, _, u)| seq(*u)).collect();
        let rows = sqlx::query(EVENTS_IN_RANGES)
            .bind(&sessions)
            .bind(&after)
            .bind(&upto)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(db("reading events"))?;
        rows.iter()
            .map(|row| {
                let session: String = row.try_get("session_id").map_err(db("reading events"))?;
                envelope(&session, row)
            })
            .collect()
    }

    /// `(session, last_seq)` of the given sessions, for streams that may have
    /// missed a notification.
    pub async fn last_seqs(&self, session_ids: &[String]) -> StoreResult<Vec<(String, u64)>> {
        let rows = sqlx::query("SELECT id, last_seq FROM sessions WHERE id = ANY($1)")
            .bind(session_ids)
            .fetch_all(&self.pool)
            .await
            .map_err(db("reading sessions"))?;
        rows.iter()
            .map(|row| {
                let seq: i64 = row.try_get("last_seq")?;
                Ok((row.try_get("id")?, u64::try_from(seq).unwrap_or_default()))
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(db("reading sessions"))
    }
}
