//! The event log: per-session `seq` 1, 2, 3, … assigned in the append
//! transaction (see `writer`), so it has no gaps and no duplicates under
//! concurrency. Messages go through the same writer, a turn's
//! ([`crate::Store::append_log`]) committed with the events around them.

use agentd_protocol::{Event, EventEnvelope, Message};

use super::SqliteStore;
use tokio::sync::oneshot;

use super::writer::{AppendJob, Entry, MAX_BATCH};
use crate::records::{role_str, to_json};
use crate::{LogAppend, LogEntry, Logged, StoreError, StoreResult, StoredMessage};

impl SqliteStore {
    /// Through the writer, as a log of one message (its insert is written
    /// once, there): the session's next position, its `updated_at` touched.
    pub(super) async fn append_message_impl(
        &self,
        session_id: &str,
        turn_id: Option<&str>,
        message: &Message,
    ) -> StoreResult<StoredMessage> {
        let appended = self
            .append_log_impl(session_id, &[LogEntry::Message { turn_id, message }])
            .await;
        if let Some(error) = appended.error {
            return Err(error);
        }
        match appended.stored.into_iter().next() {
            Some(Logged::Message(stored)) => Ok(stored),
            _ => Err(StoreError::Database("appending message: no result".into())),
        }
    }

    pub(super) async fn append_events_impl(
        &self,
        session_id: &str,
        events: &[Event],
    ) -> StoreResult<Vec<EventEnvelope>> {
        let entries: Vec<LogEntry> = events.iter().map(LogEntry::Event).collect();
        self.append_log_impl(session_id, &entries)
            .await
            .into_events()
    }

    /// Up to [`MAX_BATCH`] entries a job, committed by the writer with what
    /// else is queued. When a job fails, its entries are tried one by one so
    /// that exactly those before the one refused are stored.
    pub(super) async fn append_log_impl(
        &self,
        session_id: &str,
        entries: &[LogEntry<'_>],
    ) -> LogAppend {
        let mut stored = Vec::with_capacity(entries.len());
        for chunk in entries.chunks(MAX_BATCH) {
            let error = match self.append_job(session_id, chunk).await {
                Ok(logged) => {
                    stored.extend(logged);
                    continue;
                }
                // `Corrupt`: stored, but the answer could not be read; a
                // retry would store the entries twice.
                Err(error) if chunk.len() == 1 || matches!(error, StoreError::Corrupt(_)) => error,
                Err(_) => {
                    let mut failed = None;
                    for one in chunk.chunks(1) {
                        match self.append_job(session_id, one).await {
                            Ok(logged) => stored.extend(logged),
                            Err(error) => {
                                failed = Some(error);
                                break;
                            }
                        }
                    }
                    match failed {
                        Some(error) => error,
                        None => continue,
                    }
                }
            };
            return LogAppend::new(stored, Some(error));
        }
        LogAppend::new(stored, None)
    }

    /// A single node has no leases to fence by (see [`crate::Fence`]).
    pub(super) async fn append_fenced_log_impl(
        &self,
        session_id: &str,
        _fence: &crate::Fence,
        entries: &[LogEntry<'_>],
    ) -> LogAppend {
        self.append_log_impl(session_id, entries).await
    }

    /// No leases here either: `add_compaction`.
    pub(super) async fn add_compaction_fenced_impl(
        &self,
        record: &crate::CompactionRecord,
        _fence: &crate::Fence,
    ) -> StoreResult<()> {
        crate::TranscriptStore::add_compaction(self, record).await
    }

    /// Commit `entries` (at most [`MAX_BATCH`]) together through the writer.
    async fn append_job(
        &self,
        session_id: &str,
        entries: &[LogEntry<'_>],
    ) -> StoreResult<Vec<Logged>> {
        let stopped = || StoreError::Database("appending: the event writer has stopped".into());
        let mut serialised = Vec::with_capacity(entries.len());
        for entry in entries {
            serialised.push(match entry {
                LogEntry::Event(event) => Entry::Event {
                    type_name: event.type_name(),
                    data: to_json(event, "event")?,
                },
                LogEntry::Message { turn_id, message } => Entry::Message {
                    id: uuid::Uuid::now_v7().to_string(),
                    turn_id: turn_id.map(str::to_owned),
                    role: role_str(message.role),
                    content: to_json(message, "message")?,
                },
            });
        }
        let ids: Vec<Option<String>> = serialised
            .iter()
            .map(|entry| match entry {
                Entry::Message { id, .. } => Some(id.clone()),
                Entry::Event { .. } => None,
            })
            .collect();
        let (reply, result) = oneshot::channel();
        let job = AppendJob {
            session_id: session_id.to_owned(),
            entries: serialised,
            reply,
        };
        self.appends.send(job).await.map_err(|_| stopped())?;
        let (stamps, at) = result.await.map_err(|_| stopped())??;
        Ok(entries
            .iter()
            .zip(stamps)
            .zip(ids)
            .map(|((entry, stamp), id)| match entry {
                LogEntry::Event(event) => Logged::Event(EventEnvelope {
                    seq: stamp,
                    session_id: session_id.to_owned(),
                    at,
                    event: (*event).clone(),
                }),
                LogEntry::Message { turn_id, message } => Logged::Message(StoredMessage {
                    id: id.unwrap_or_default(),
                    session_id: session_id.to_owned(),
                    turn_id: turn_id.map(str::to_owned),
                    position: stamp,
                    message: (*message).clone(),
                    created_at: at,
                }),
            })
            .collect())
    }
}
