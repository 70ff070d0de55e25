//! [`EventLog`](crate::EventLog): reading the log. Appending is each
//! backend's own (`append_events_impl`, `append_log_impl`,
//! `append_fenced_log_impl`; one event is a
//! batch of one): SQLite's group-commit writer, PostgreSQL's row lock on the
//! session with NOTIFY in cluster mode.

pub(crate) const EVENTS_AFTER: &str = "SELECT seq, data, created_at FROM events \
     WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3";

macro_rules! event_log {
    ($store:ty) => {
        const _: () = {
            use agentd_protocol::{Event, EventEnvelope};

            use $crate::queries::events as q;
            use $crate::records::{envelope, fetch_all};
            use $crate::{LogAppend, LogEntry, StoreError, StoreResult};

            #[async_trait::async_trait]
            impl $crate::EventLog for $store {
                async fn append_event(
                    &self,
                    session_id: &str,
                    event: &Event,
                ) -> StoreResult<EventEnvelope> {
                    let mut stored = self
                        .append_events_impl(session_id, std::slice::from_ref(event))
                        .await?;
                    stored
                        .pop()
                        .ok_or_else(|| StoreError::Database("appending event: no result".into()))
                }

                async fn append_events(
                    &self,
                    session_id: &str,
                    events: &[Event],
                ) -> StoreResult<Vec<EventEnvelope>> {
                    self.append_events_impl(session_id, events).await
                }

                async fn append_log(
                    &self,
                    session_id: &str,
                    entries: &[LogEntry<'_>],
                ) -> LogAppend {
                    self.append_log_impl(session_id, entries).await
                }

                async fn append_log_fenced(
                    &self,
                    session_id: &str,
                    fence: &$crate::Fence,
                    entries: &[LogEntry<'_>],
                ) -> LogAppend {
                    self.append_fenced_log_impl(session_id, fence, entries)
                        .await
                }

                /// Events with `seq > after`, in order; empty for an unknown
                /// session.
                async fn events_after(
                    &self,
                    session_id: &str,
                    after: u64,
                    limit: u32,
                ) -> StoreResult<Vec<EventEnvelope>> {
                    let query = sqlx::query(q::EVENTS_AFTER)
                        .bind(session_id)
                        .bind(i64::try_from(after).unwrap_or(i64::MAX))
                        .bind(i64::from(limit));
                    let envelope = |row: &_| envelope(session_id, row);
                    fetch_all(&self.pool, query, "reading events", envelope).await
                }
            }
        };
    };
}
pub(crate) use event_log;
