use agentd_protocol::{Event, Message};
use async_trait::async_trait;

/// Where a turn's output goes. The server's implementation stores events and
/// messages and fans events out to live clients; tests collect them in memory.
#[async_trait]
pub trait TurnSink: Send + Sync {
    /// Record and publish one event.
    async fn emit(&self, event: Event) -> Result<(), SinkError>;
    /// Return once every event emitted so far is recorded and published. Sinks
    /// that record `emit`s as they come need not override it.
    async fn flush(&self) -> Result<(), SinkError> {
        Ok(())
    }
    /// Append a message to the session's transcript.
    async fn append_message(&self, turn_id: &str, message: &Message) -> Result<(), SinkError>;
}

/// The sink could not record something; the turn cannot go on without losing it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("could not record the turn's progress: {0}")]
pub struct SinkError(pub String);
