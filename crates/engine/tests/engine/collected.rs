//! A turn sink that keeps what a turn emitted, for the tests to look at,
//! and the input of a first turn.
#![allow(clippy::unwrap_used)]

use std::sync::Mutex;

use agentd_engine::{Compaction, SinkError, TurnInput, TurnSink};
use agentd_protocol::{Event, Message};
use async_trait::async_trait;

#[derive(Default)]
pub struct Collected {
    pub events: Mutex<Vec<Event>>,
    pub messages: Mutex<Vec<Message>>,
    pub compactions: Mutex<Vec<Compaction>>,
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
    async fn compacted(&self, _turn_id: &str, compaction: &Compaction) -> Result<(), SinkError> {
        self.compactions.lock().unwrap().push(compaction.clone());
        Ok(())
    }
}

/// The input of turn `t1` of a fresh session: the user's `text`.
pub fn user_turn(text: &str) -> TurnInput {
    TurnInput {
        turn_id: "t1".into(),
        history: Vec::new(),
        message: Message::user_text(text),
    }
}
