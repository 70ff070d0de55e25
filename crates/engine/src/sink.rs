use agentd_protocol::{CompactionTrigger, Event, Message, TurnFinished};
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
    /// Record the turn's `turn.finished` and return once it is recorded, with
    /// everything before it. A sink that records messages behind the turn
    /// must refuse it, recording nothing of it, when one of them was refused:
    /// the engine then reports the turn failed instead.
    async fn finish_turn(&self, finished: &TurnFinished) -> Result<(), SinkError> {
        self.emit(Event::TurnFinished(finished.clone())).await?;
        self.flush().await
    }
    /// Append a message to the session's transcript. It may be recorded
    /// later, in order with the events around it; `flush` waits for it.
    async fn append_message(&self, turn_id: &str, message: &Message) -> Result<(), SinkError>;
    /// The model's context was compacted: from now on it is `compaction.context`
    /// followed by the messages appended after this call. The transcript itself
    /// stays whole. Sinks that do not resume sessions need not override it.
    async fn compacted(&self, _turn_id: &str, _compaction: &Compaction) -> Result<(), SinkError> {
        Ok(())
    }
}

/// Records the workspace before a turn first changes it, so the session can
/// be rewound to before that turn.
#[async_trait]
pub trait Checkpointer: Send + Sync {
    /// Called once per turn, before the first tool that may change files
    /// runs (after the turn's sink was flushed, if [`Self::needs_flush`]).
    /// Returns the checkpoint's id and the paths that changed since
    /// the previous checkpoint, or `None` when none was needed.
    async fn checkpoint(&self, turn_id: &str) -> Result<Option<(String, Vec<String>)>, String>;

    /// Whether the turn's sink must be flushed before [`Self::checkpoint`]:
    /// true for a checkpointer that reads the turn's messages back from
    /// where the sink stores them.
    fn needs_flush(&self) -> bool {
        true
    }
}

/// A compaction as the sink records it.
#[derive(Debug, Clone, PartialEq)]
pub struct Compaction {
    pub trigger: CompactionTrigger,
    pub summary: String,
    /// The context that replaces everything before: the summary as a user
    /// message, then the recent messages kept verbatim.
    pub context: Vec<Message>,
    pub tokens_before: u64,
    pub tokens_after: u64,
}

/// The sink could not record something; the turn cannot go on without losing it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("could not record the turn's progress: {0}")]
pub struct SinkError(pub String);
