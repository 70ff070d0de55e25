//! The frame every engine's turn runs in: `turn.started`, the message, the
//! body's events, the turn's `error` and exactly one `turn.finished`.
#![allow(clippy::unwrap_used)]

use agentd_engine::{TurnBody, TurnEngine, TurnOutcome, run_framed};
use agentd_protocol::{Event, Message, TurnStatus};
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::collected::{Collected, user_turn};

/// An engine whose body emits one delta and ends as told.
struct Fixed {
    outcome: TurnOutcome,
    refuse: bool,
}

#[async_trait]
impl TurnEngine for Fixed {
    async fn accept(&self, message: Message) -> Result<Option<Message>, TurnOutcome> {
        if self.refuse {
            return Err(TurnOutcome::failed("prompt_blocked", "no".into(), false));
        }
        Ok(Some(message))
    }

    async fn run(&self, body: TurnBody<'_>) -> TurnOutcome {
        assert_eq!(body.message.unwrap().text(), "hi");
        body.sink
            .emit(Event::Compaction {
                trigger: agentd_protocol::CompactionTrigger::Manual,
                tokens_before: 2,
                tokens_after: 1,
                summary: None,
            })
            .await
            .unwrap();
        self.outcome.clone()
    }
}

fn kinds(sink: &Collected) -> Vec<&'static str> {
    sink.events
        .lock()
        .unwrap()
        .iter()
        .map(|event| match event {
            Event::TurnStarted { .. } => "turn.started",
            Event::Compaction { .. } => "body",
            Event::Error(_) => "error",
            Event::TurnFinished(_) => "turn.finished",
            _ => "other",
        })
        .collect()
}

#[tokio::test]
async fn a_body_is_framed_with_its_message_error_and_one_finish() {
    let sink = Collected::default();
    let engine = Fixed {
        outcome: TurnOutcome {
            model_calls: 3,
            ..TurnOutcome::failed("boom", "it broke".into(), true)
        },
        refuse: false,
    };
    let finished = run_framed(&engine, user_turn("hi"), &sink, CancellationToken::new()).await;
    assert_eq!(
        kinds(&sink),
        ["turn.started", "body", "error", "turn.finished"]
    );
    assert_eq!(sink.messages.lock().unwrap().len(), 1);
    assert_eq!(finished.status, TurnStatus::Failed);
    assert_eq!(finished.num_model_calls, 3);
    assert_eq!(finished.error.unwrap().code, "boom");
}

#[tokio::test]
async fn a_refused_message_is_not_recorded_and_the_body_does_not_run() {
    let sink = Collected::default();
    let engine = Fixed {
        outcome: TurnOutcome::ended(TurnStatus::Completed),
        refuse: true,
    };
    let finished = run_framed(&engine, user_turn("hi"), &sink, CancellationToken::new()).await;
    assert_eq!(kinds(&sink), ["turn.started", "error", "turn.finished"]);
    assert!(sink.messages.lock().unwrap().is_empty());
    assert_eq!(finished.error.unwrap().code, "prompt_blocked");
}
