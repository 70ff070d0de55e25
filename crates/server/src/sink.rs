use std::sync::Arc;

use agentd_engine::{SinkError, TurnSink};
use agentd_protocol::{Event, EventEnvelope, Message};
use agentd_store::Store;
use async_trait::async_trait;
use tokio::sync::mpsc;

/// Stores a turn's events and messages; each event, once stored (and so given
/// its `seq`), also goes to the observer, if any.
pub struct StoreSink {
    store: Arc<dyn Store>,
    session_id: String,
    observer: Option<mpsc::UnboundedSender<EventEnvelope>>,
}

impl StoreSink {
    pub fn new(
        store: Arc<dyn Store>,
        session_id: String,
        observer: Option<mpsc::UnboundedSender<EventEnvelope>>,
    ) -> Self {
        Self {
            store,
            session_id,
            observer,
        }
    }
}

#[async_trait]
impl TurnSink for StoreSink {
    async fn emit(&self, event: Event) -> Result<(), SinkError> {
        let envelope = self
            .store
            .append_event(&self.session_id, &event)
            .await
            .map_err(|err| SinkError(err.to_string()))?;
        if let Some(observer) = &self.observer {
            // An observer that went away must not stop the turn.
            let _ = observer.send(envelope);
        }
        Ok(())
    }

    async fn append_message(&self, turn_id: &str, message: &Message) -> Result<(), SinkError> {
        self.store
            .append_message(&self.session_id, Some(turn_id), message)
            .await
            .map(|_| ())
            .map_err(|err| SinkError(err.to_string()))
    }
}
