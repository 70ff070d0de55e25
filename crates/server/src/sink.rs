use std::sync::{Arc, Mutex};

use agentd_engine::{Compaction, SinkError, TurnSink};
use agentd_protocol::{CompactionTrigger, Event, EventEnvelope, Message};
use agentd_store::{CompactionRecord, Store};
use async_trait::async_trait;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};

/// Events stored per commit at most.
const MAX_BATCH: usize = 256;

/// Stores a turn's events and messages. Both are pipelined: `emit` and
/// `append_message` queue them and a writer task stores them in order,
/// whatever events have queued up in one commit, then hands each event (now
/// with its `seq`) to the observer. The turn does not wait for the disk at
/// every delta or message; it waits at `flush`, which the engine calls before
/// anything that needs them recorded (a checkpoint, asking a person, the end
/// of the turn). A failed event write fails every later call; a refused
/// message fails later messages and every flush, but events still go in, so
/// the turn's `error` and `turn.finished` are recorded.
pub struct StoreSink {
    store: Arc<dyn Store>,
    session_id: String,
    /// Position of the last message the writer appended.
    last_position: Arc<Mutex<Option<u64>>>,
    queue: mpsc::UnboundedSender<Command>,
    failure: Arc<Mutex<Option<SinkError>>>,
    /// A message the store refused. Events are still stored after it, so the
    /// turn's error and `turn.finished` reach the log.
    message_failure: Arc<Mutex<Option<SinkError>>>,
}

enum Command {
    Event(Event),
    Message { turn_id: String, message: Message },
    Flush(oneshot::Sender<Result<(), SinkError>>),
}

impl StoreSink {
    /// The writer runs on `writer_on`.
    pub fn new(
        store: Arc<dyn Store>,
        session_id: String,
        observer: Option<mpsc::UnboundedSender<EventEnvelope>>,
        writer_on: &Handle,
    ) -> Self {
        let (queue, commands) = mpsc::unbounded_channel();
        let failure = Arc::new(Mutex::new(None));
        let message_failure = Arc::new(Mutex::new(None));
        let last_position = Arc::new(Mutex::new(None));
        let writer = Writer {
            store: store.clone(),
            session_id: session_id.clone(),
            observer,
            failure: failure.clone(),
            message_failure: message_failure.clone(),
            last_position: last_position.clone(),
        };
        writer_on.spawn(writer.run(commands));
        Self {
            store,
            session_id,
            last_position,
            queue,
            failure,
            message_failure,
        }
    }

    fn send(&self, command: Command) -> Result<(), SinkError> {
        let blocking: &[&Mutex<Option<SinkError>>] = match command {
            Command::Message { .. } => &[&self.failure, &self.message_failure],
            _ => &[&self.failure],
        };
        match first_failure(blocking) {
            Some(err) => Err(err),
            None => self.queue.send(command).map_err(|_| stopped()),
        }
    }
}

/// The first failure recorded in `slots`, if any (a poisoned slot counts).
fn first_failure(slots: &[&Mutex<Option<SinkError>>]) -> Option<SinkError> {
    slots.iter().find_map(|slot| match slot.lock() {
        Ok(failure) => failure.clone(),
        Err(_) => Some(stopped()),
    })
}

fn stopped() -> SinkError {
    SinkError("the event writer stopped".into())
}

/// The task that stores what a [`StoreSink`] queues.
struct Writer {
    store: Arc<dyn Store>,
    session_id: String,
    observer: Option<mpsc::UnboundedSender<EventEnvelope>>,
    failure: Arc<Mutex<Option<SinkError>>>,
    message_failure: Arc<Mutex<Option<SinkError>>>,
    last_position: Arc<Mutex<Option<u64>>>,
}

impl Writer {
    async fn run(self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut events = Vec::with_capacity(MAX_BATCH);
        let mut flushes = Vec::new();
        while let Some(first) = commands.recv().await {
            let mut next = Some(first);
            while let Some(command) = next {
                match command {
                    Command::Event(event) => events.push(event),
                    Command::Message { turn_id, message } => {
                        // In order: the events emitted before it go first.
                        self.store_events(&mut events).await;
                        self.store_message(&turn_id, &message).await;
                    }
                    Command::Flush(done) => flushes.push(done),
                }
                next = if events.len() < MAX_BATCH {
                    commands.try_recv().ok()
                } else {
                    None
                };
            }
            self.store_events(&mut events).await;
            let outcome =
                first_failure(&[&self.failure, &self.message_failure]).map_or(Ok(()), Err);
            for done in flushes.drain(..) {
                let _ = done.send(outcome.clone());
            }
        }
    }

    fn fail(&self, slot: &Mutex<Option<SinkError>>, what: &str, err: agentd_store::StoreError) {
        tracing::error!(%err, session_id = %self.session_id, "could not store {what}");
        if let Ok(mut failure) = slot.lock() {
            *failure = Some(SinkError(err.to_string()));
        }
    }

    async fn store_events(&self, events: &mut Vec<Event>) {
        if events.is_empty() || first_failure(&[&self.failure]).is_some() {
            events.clear();
            return;
        }
        match self.store.append_events(&self.session_id, events).await {
            Ok(stored) => {
                if let Some(observer) = &self.observer {
                    for envelope in stored {
                        // An observer that went away must not stop the turn.
                        let _ = observer.send(envelope);
                    }
                }
            }
            Err(err) => self.fail(&self.failure, "events", err),
        }
        events.clear();
    }

    async fn store_message(&self, turn_id: &str, message: &Message) {
        if first_failure(&[&self.failure, &self.message_failure]).is_some() {
            return;
        }
        match self
            .store
            .append_message(&self.session_id, Some(turn_id), message)
            .await
        {
            Ok(stored) => {
                if let Ok(mut last) = self.last_position.lock() {
                    *last = Some(stored.position);
                }
            }
            Err(err) => self.fail(&self.message_failure, "a message", err),
        }
    }
}

#[async_trait]
impl TurnSink for StoreSink {
    async fn emit(&self, event: Event) -> Result<(), SinkError> {
        self.send(Command::Event(event))
    }

    async fn flush(&self) -> Result<(), SinkError> {
        let (done, stored) = oneshot::channel();
        self.queue
            .send(Command::Flush(done))
            .map_err(|_| stopped())?;
        stored.await.map_err(|_| stopped())?
    }

    async fn append_message(&self, turn_id: &str, message: &Message) -> Result<(), SinkError> {
        self.send(Command::Message {
            turn_id: turn_id.to_string(),
            message: message.clone(),
        })
    }

    async fn compacted(&self, turn_id: &str, compaction: &Compaction) -> Result<(), SinkError> {
        let store_error = |err: agentd_store::StoreError| SinkError(err.to_string());
        // The compaction starts after the last message appended: have it stored.
        self.flush().await?;
        let last = self.last_position.lock().ok().and_then(|last| *last);
        let last = match last {
            Some(last) => last,
            None => self
                .store
                .messages(&self.session_id)
                .await
                .map_err(store_error)?
                .len() as u64,
        };
        let record = CompactionRecord {
            id: uuid::Uuid::now_v7().to_string(),
            session_id: self.session_id.clone(),
            turn_id: Some(turn_id.to_string()),
            trigger: match compaction.trigger {
                CompactionTrigger::Auto => "auto".into(),
                CompactionTrigger::Manual => "manual".into(),
            },
            summary: compaction.summary.clone(),
            context: compaction.context.clone(),
            first_kept_position: (last + 1) as i64,
            tokens_before: compaction.tokens_before,
            tokens_after: compaction.tokens_after,
            created_at: chrono::Utc::now(),
        };
        self.store
            .add_compaction(&record)
            .await
            .map_err(store_error)
    }
}

#[cfg(test)]
mod tests {
    use agentd_protocol::ErrorInfo;

    use super::*;
    use crate::test_support::{sqlite_with_session, store_with_session};

    fn event(n: u32) -> Event {
        Event::Error(ErrorInfo {
            code: format!("e{n}"),
            message: String::new(),
            retryable: false,
        })
    }

    /// Queued messages and events are all stored, in order, once `flush` returns.
    #[tokio::test]
    async fn flush_returns_once_queued_messages_and_events_are_stored() {
        let (store, session) = store_with_session().await;
        let sink = StoreSink::new(store.clone(), session.clone(), None, &Handle::current());
        for n in 0..3 {
            sink.emit(event(n)).await.unwrap();
            sink.append_message("t", &Message::user_text(format!("m{n}")))
                .await
                .unwrap();
        }
        sink.flush().await.unwrap();
        let texts: Vec<String> = store
            .messages(&session)
            .await
            .unwrap()
            .iter()
            .map(|m| m.message.text())
            .collect();
        assert_eq!(texts, ["m0", "m1", "m2"]);
        assert_eq!(store.events_after(&session, 0, 100).await.unwrap().len(), 3);
    }

    /// A message the store refuses fails the next flush and every later
    /// message; events still go in, so the turn's end is recorded.
    #[tokio::test]
    async fn a_refused_message_fails_what_follows_but_not_the_log() {
        let (sqlite, session) = sqlite_with_session().await;
        sqlx::query(
            "CREATE TRIGGER refuse BEFORE INSERT ON messages WHEN NEW.content LIKE '%lost?%' \
             BEGIN SELECT RAISE(ABORT, 'refused'); END",
        )
        .execute(sqlite.pool())
        .await
        .unwrap();
        let store: Arc<dyn Store> = Arc::new(sqlite);
        let sink = StoreSink::new(store.clone(), session.clone(), None, &Handle::current());
        sink.append_message("t", &Message::user_text("lost?"))
            .await
            .unwrap();
        assert!(sink.flush().await.is_err());
        assert!(
            sink.append_message("t", &Message::user_text("again"))
                .await
                .is_err()
        );
        sink.emit(event(0)).await.unwrap();
        assert!(sink.flush().await.is_err());
        assert_eq!(store.events_after(&session, 0, 100).await.unwrap().len(), 1);
    }
}
