//! A session's log as one stream: its events and its transcript messages in
//! the order a turn produced them, so a backend can commit both together.

use agentd_protocol::{Event, EventEnvelope, Message};

use crate::{StoreError, StoredMessage};

/// One thing to append to a session: an event or a transcript message.
#[derive(Debug, Clone, Copy)]
pub enum LogEntry<'a> {
    Event(&'a Event),
    Message {
        turn_id: Option<&'a str>,
        message: &'a Message,
    },
}

/// One entry as stored.
#[derive(Debug, Clone, PartialEq)]
pub enum Logged {
    Event(EventEnvelope),
    Message(StoredMessage),
}

/// What [`Store::append_log`] did: the entries stored, in order, and the
/// error that stopped it at the entry after them, if one did.
#[derive(Debug)]
pub struct LogAppend {
    pub stored: Vec<Logged>,
    pub error: Option<StoreError>,
}

impl LogAppend {
    pub fn new(stored: Vec<Logged>, error: Option<StoreError>) -> Self {
        Self { stored, error }
    }
}

/// Appends `entries` with the store's one-kind methods, in order: each run of
/// events in one call (committed whole or not at all), each message alone.
pub async fn append_one_kind_at_a_time<S: crate::EventLog + ?Sized>(
    store: &S,
    session_id: &str,
    entries: &[LogEntry<'_>],
) -> LogAppend {
    let mut stored = Vec::with_capacity(entries.len());
    let mut rest = entries;
    while let Some(first) = rest.first() {
        let outcome = match first {
            LogEntry::Message { turn_id, message } => {
                rest = &rest[1..];
                store
                    .append_message(session_id, *turn_id, message)
                    .await
                    .map(|message| stored.push(Logged::Message(message)))
            }
            LogEntry::Event(_) => {
                let run = rest
                    .iter()
                    .take_while(|entry| matches!(entry, LogEntry::Event(_)))
                    .count();
                let events: Vec<Event> = rest[..run]
                    .iter()
                    .filter_map(|entry| match entry {
                        LogEntry::Event(event) => Some((*event).clone()),
                        LogEntry::Message { .. } => None,
                    })
                    .collect();
                rest = &rest[run..];
                store
                    .append_events(session_id, &events)
                    .await
                    .map(|events| stored.extend(events.into_iter().map(Logged::Event)))
            }
        };
        if let Err(error) = outcome {
            return LogAppend::new(stored, Some(error));
        }
    }
    LogAppend::new(stored, None)
}
