use std::sync::{Arc, Mutex};

use agentd_engine::{Compaction, SinkError, TurnSink};
use agentd_protocol::{CompactionTrigger, Event, EventEnvelope, Message};
use agentd_store::{CompactionRecord, Store};
use async_trait::async_trait;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};

/// Events stored per commit at most.
const MAX_BATCH: usize = 256;

/// Stores a turn's events and messages. Events are pipelined: `emit` queues
/// them and a writer task stores whatever has queued up in one commit, then
/// hands each event (now with its `seq`) to the observer. The turn does not
/// wait for every small delta to hit the disk; it waits at `flush`, which the
/// engine calls before anything that needs the events visible (asking a person,
/// the end of the turn). A failed write fails every later `emit` and `flush`.
pub struct StoreSink {
    store: Arc<dyn Store>,
    session_id: String,
    /// Position of the last message this sink appended.
    last_position: Mutex<Option<u64>>,
    queue: mpsc::UnboundedSender<Command>,
    failure: Arc<Mutex<Option<SinkError>>>,
}

enum Command {
    Event(Event),
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
        writer_on.spawn(write_events(
            store.clone(),
            session_id.clone(),
            observer,
            commands,
            failure.clone(),
        ));
        Self {
            store,
            session_id,
            last_position: Mutex::new(None),
            queue,
            failure,
        }
    }

    fn failed(&self) -> Option<SinkError> {
        self.failure.lock().ok().and_then(|failure| failure.clone())
    }
}

fn stopped() -> SinkError {
    SinkError("the event writer stopped".into())
}

async fn write_events(
    store: Arc<dyn Store>,
    session_id: String,
    observer: Option<mpsc::UnboundedSender<EventEnvelope>>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    failure: Arc<Mutex<Option<SinkError>>>,
) {
    let mut events = Vec::with_capacity(MAX_BATCH);
    let mut flushes = Vec::new();
    while let Some(first) = commands.recv().await {
        let mut next = Some(first);
        while let Some(command) = next {
            match command {
                Command::Event(event) => events.push(event),
                Command::Flush(done) => flushes.push(done),
            }
            next = if events.len() < MAX_BATCH {
                commands.try_recv().ok()
            } else {
                None
            };
        }
        let failed = failure.lock().map(|f| f.is_some()).unwrap_or(true);
        if !events.is_empty() && !failed {
            match store.append_events(&session_id, &events).await {
                Ok(stored) => {
                    if let Some(observer) = &observer {
                        for envelope in stored {
                            // An observer that went away must not stop the turn.
                            let _ = observer.send(envelope);
                        }
                    }
                }
                Err(err) => {
                    tracing::error!(%err, session_id, "could not store events");
                    if let Ok(mut failure) = failure.lock() {
                        *failure = Some(SinkError(err.to_string()));
                    }
                }
            }
        }
        events.clear();
        let outcome = match failure.lock() {
            Ok(failure) => failure.clone().map_or(Ok(()), Err),
            Err(_) => Err(stopped()),
        };
        for done in flushes.drain(..) {
            let _ = done.send(outcome.clone());
        }
    }
}

#[async_trait]
impl TurnSink for StoreSink {
    async fn emit(&self, event: Event) -> Result<(), SinkError> {
        if let Some(err) = self.failed() {
            return Err(err);
        }
        self.queue
            .send(Command::Event(event))
            .map_err(|_| stopped())
    }

    async fn flush(&self) -> Result<(), SinkError> {
        let (done, stored) = oneshot::channel();
        self.queue
            .send(Command::Flush(done))
            .map_err(|_| stopped())?;
        stored.await.map_err(|_| stopped())?
    }

    async fn append_message(&self, turn_id: &str, message: &Message) -> Result<(), SinkError> {
        let stored = self
            .store
            .append_message(&self.session_id, Some(turn_id), message)
            .await
            .map_err(|err| SinkError(err.to_string()))?;
        if let Ok(mut last) = self.last_position.lock() {
            *last = Some(stored.position);
        }
        Ok(())
    }

    async fn compacted(&self, turn_id: &str, compaction: &Compaction) -> Result<(), SinkError> {
        let store_error = |err: agentd_store::StoreError| SinkError(err.to_string());
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
