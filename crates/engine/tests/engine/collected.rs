//! A turn sink that keeps what a turn emitted, for the tests to look at.
#![allow(clippy::unwrap_used)]

use std::sync::Mutex;

use agentd_engine::{SinkError, TurnSink};
use agentd_protocol::{Event, Message};
use async_trait::async_trait;

#[derive(Default)]
pub struct Collected {
    pub events: Mutex<Vec<Event>>,
    pub messages: Mutex<Vec<Message>>,
}

#[async_trait]
impl TurnSink for Collected {
    async fn emit(&self, event: Event) -> Result<(), SinkError> {
        self.events.lock().unwrap().push(event);
        Ok(())
    }
    async fn append_message(&self, _turn_id: &str, message: &Message) -> Result<(), SinkError> {
        self.messages.lock().unwrap().push(message.clone());
        Ok(())
    }
}
