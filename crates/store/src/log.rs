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

    /// The stored events, for an append of events alone (stored whole or,
    /// on an error, reported as not stored).
    pub fn into_events(self) -> Result<Vec<EventEnvelope>, StoreError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        Ok(self
            .stored
            .into_iter()
            .filter_map(|logged| match logged {
                Logged::Event(envelope) => Some(envelope),
                Logged::Message(_) => None,
            })
            .collect())
    }
}

/// Whose appends these are, when a turn runs under a cluster lease
/// (PostgreSQL, several nodes): they are stored only while `node_id` still
/// holds the lease of `turn_id`, so a node that lost the lease (paused past
/// the lease timeout, then taken over) cannot add to the turn after the node
/// that took it recorded its end. See [`crate::EventLog::append_log_fenced`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub node_id: String,
    pub turn_id: String,
}

impl Fence {
    /// The refusal of an append this fence no longer admits.
    pub fn lost(&self, session_id: &str) -> StoreError {
        StoreError::LeaseLost(format!(
            "node {} no longer holds the lease of turn {} (session {session_id}); \
             another node took it over",
            self.node_id, self.turn_id
        ))
    }
}
