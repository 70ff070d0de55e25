//! One turn, watched live: its events rendered as they come, permission
//! requests and questions answered inline through the approvals API (while
//! the stream is still read, so an answer from elsewhere is seen), and Esc
//! or Ctrl-C interrupting it.

use std::collections::VecDeque;

use agentd_protocol::{Event, EventEnvelope};
use crossterm::style::Stylize;
use futures::{Stream, StreamExt};
use serde_json::json;

use super::Conversation;
use super::api::{ApiError, ApiResult};
use super::ask::{Ask, Asking};
use super::render::Renderer;
use super::term::{Key, KeyWatch};

/// What starts the turn.
pub enum Start {
    Message(String),
    Compact,
}

/// A turn being followed.
struct Follow {
    turn_id: String,
    /// Events up to this `seq` happened before the chat looked (a resumed
    /// session's running turn): read for the requests they leave open, not
    /// drawn again (the transcript shows them) nor asked while the replay
    /// may still hold their answers.
    replay_end: u64,
    /// Whether the turn's `turn.started` has come: what comes before it
    /// belongs to earlier turns, whose requests are all answered.
    started: bool,
    renderer: Renderer,
    waiting: VecDeque<Ask>,
    asking: Option<Asking>,
    /// Once interrupted, nothing more is asked.
    interrupted: bool,
}

impl Follow {
    fn new(turn_id: &str, replay_end: u64) -> Self {
        Self {
            turn_id: turn_id.to_string(),
            replay_end,
            started: false,
            renderer: Renderer::default(),
            waiting: VecDeque::new(),
            asking: None,
            interrupted: false,
        }
    }
}

impl Conversation {
    /// Run a turn to its end (or until the event stream breaks).
    pub async fn turn(&mut self, start: Start) -> ApiResult<()> {
        let id = self.session.clone();
        // Opened first, from the last event seen: nothing of the turn is missed.
        let events = self.api.events(&id, self.last_seq).await?;
        let accepted = match start {
            Start::Message(content) => {
                let path = format!("/v1/sessions/{id}/messages");
                self.api.post(&path, json!({"content": content})).await?
            }
            Start::Compact => {
                let path = format!("/v1/sessions/{id}/compact");
                self.api.post(&path, json!({})).await?
            }
        };
        let turn_id = accepted["turn_id"]
            .as_str()
            .ok_or_else(|| ApiError::local("the server accepted the turn without its turn_id"))?;
        self.follow(events, Follow::new(turn_id, 0)).await
    }

    /// Follow the session's running turn `turn_id` (a resumed session) from
    /// its start to its end, asking what still waits for an answer; events
    /// up to `replay_end` were there before.
    pub async fn follow_running(&mut self, turn_id: &str, replay_end: u64) -> ApiResult<()> {
        self.term
            .line("(a turn is running: following it; Esc interrupts)".dim());
        let events = self.api.events(&self.session.clone(), 0).await?;
        self.follow(events, Follow::new(turn_id, replay_end)).await
    }

    async fn follow(
        &mut self,
        mut events: impl Stream<Item = ApiResult<EventEnvelope>> + Unpin,
        mut follow: Follow,
    ) -> ApiResult<()> {
        let mut keys = KeyWatch::start();
        let outcome = loop {
            if follow.asking.is_none()
                && !follow.interrupted
                && self.last_seq >= follow.replay_end
                && let Some(ask) = follow.waiting.pop_front()
            {
                follow.asking = self.show(ask).await;
                continue;
            }
            tokio::select! {
                envelope = events.next() => match envelope {
                    Some(Ok(envelope)) => {
                        self.last_seq = envelope.seq;
                        if self.on_event(&mut follow, envelope) {
                            break Ok(());
                        }
                    }
                    Some(Err(err)) => break Err(err),
                    None => break Err(ApiError::local("the server ended the event stream")),
                },
                Some(key) = keys.keys.recv() => self.on_key(&mut follow, key).await,
            }
        };
        keys.pause().await;
        outcome
    }

    /// Show one event, or note what it asks or answers; whether it finished
    /// the turn.
    fn on_event(&mut self, follow: &mut Follow, envelope: EventEnvelope) -> bool {
        let replayed = envelope.seq <= follow.replay_end;
        match envelope.event {
            Event::TurnStarted { turn_id, .. } if turn_id == follow.turn_id => {
                follow.started = true;
            }
            _ if !follow.started => {}
            Event::PermissionRequested {
                request_id,
                tool,
                input,
                reason,
                ..
            } => follow
                .waiting
                .push_back(Ask::permission(request_id, &tool, &input, reason)),
            Event::QuestionAsked {
                request_id,
                questions,
                ..
            } => follow
                .waiting
                .push_back(Ask::question(request_id, &questions)),
            Event::PermissionResolved {
                request_id,
                decision,
                by,
            } => {
                let how = format!("{decision} by {by}");
                self.answered_elsewhere(follow, &request_id, &how);
            }
            Event::QuestionAnswered { request_id, by, .. } => {
                let how = format!("by {by}");
                self.answered_elsewhere(follow, &request_id, &how);
            }
            Event::TurnFinished(finished) if finished.turn_id == follow.turn_id => {
                if follow.asking.take().is_some() {
                    self.term.end_line();
                }
                follow
                    .renderer
                    .event(&mut self.term, &Event::TurnFinished(finished));
                return true;
            }
            event if replayed => follow.renderer.replayed(&event),
            event => follow.renderer.event(&mut self.term, &event),
        }
        false
    }

    /// A request was answered: no longer waiting, and if it is the one on
    /// screen (so not by this chat), its prompt comes down saying how.
    fn answered_elsewhere(&mut self, follow: &mut Follow, request_id: &str, how: &str) {
        follow.waiting.retain(|ask| ask.id() != request_id);
        if follow
            .asking
            .as_ref()
            .is_some_and(|asking| asking.ask.id() == request_id)
        {
            follow.asking = None;
            self.term.end_line();
            self.term.line(format!("(answered elsewhere: {how})").dim());
        }
    }

    async fn on_key(&mut self, follow: &mut Follow, key: Key) {
        match (follow.asking.take(), key) {
            (asking, Key::Interrupt) => {
                if let Some(Asking {
                    ask: Ask::Permission { .. },
                    ..
                }) = asking
                {
                    self.term.text("deny\n");
                }
                follow.interrupted = true;
                self.interrupt().await;
            }
            (Some(asking), key) => follow.asking = self.answer_key(asking, key).await,
            // Typed ahead: the next prompt starts with it.
            (None, Key::Char(c)) => self.typed_ahead.push(c),
            (None, Key::Backspace) => {
                self.typed_ahead.pop();
            }
            (None, Key::Enter) => {}
        }
    }

    /// Ask the server to stop the running turn; `turn.finished` follows.
    pub async fn interrupt(&mut self) {
        self.term.line("(interrupting…)".yellow());
        let path = format!("/v1/sessions/{}/interrupt", self.session);
        if let Err(err) = self.api.post(&path, json!({})).await
            && err.status != Some(reqwest::StatusCode::CONFLICT)
        {
            self.term.line(format!("error: {err}").red());
        }
    }

    /// Show a failed call; the conversation goes on.
    pub fn report<T>(&mut self, outcome: ApiResult<T>) {
        if let Err(err) = outcome {
            self.term.line(format!("error: {err}").red());
        }
    }
}
