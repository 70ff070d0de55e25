//! The event writer: a turn's events and transcript messages on their way
//! to the store and, once stored, to live subscribers. The engine emits into
//! a [`StoreSink`] and goes on at once; a writer task commits whatever has
//! queued in one transaction (`Store::append_log`) and hands each stored
//! envelope, with its `seq`, to the observer (the session's live hub).
//!
//! A turn that runs under a cluster lease appends (and stores its
//! compactions) with its [`Fence`]: once its node has lost the lease
//! (another node took the turn over), the store refuses every append
//! (`LeaseLost`), the sink fails every later call, and the turn ends here
//! without recording anything more: the node that took it over records its
//! end.

use std::sync::{Arc, Mutex};

use agentd_engine::{Compaction, SinkError, TurnSink};
use agentd_protocol::{CompactionTrigger, Event, EventEnvelope, Message, TurnFinished, TurnStatus};
use agentd_store::{CompactionRecord, EventLog, Fence, LogEntry, Logged, StoreError};
use async_trait::async_trait;
use tokio::runtime::Handle;
use tokio::sync::{Notify, mpsc, oneshot};

/// Events and messages stored per commit at most.
const MAX_BATCH: usize = 256;
/// How long the writer waits for more after the first thing queued, unless a
/// flush asks for it now: a model call's or a tool's events come in bursts,
/// and one commit for a burst costs a fraction of one per event. Readers see
/// an event at most this much later.
const LINGER: std::time::Duration = std::time::Duration::from_millis(1);

/// Stores a turn's events and messages. Both are pipelined: `emit` and
/// `append_message` queue them and a writer task stores them in order,
/// whatever has queued up in one commit (`Store::append_log`), then hands
/// each event (now with its `seq`) to the observer. The turn does not wait for the disk at
/// every delta or message; it waits at `flush`, which the engine calls before
/// anything that needs them recorded (a compaction, asking a person), and at
/// `finish_turn`. A failed event write fails every later call; a refused
/// message fails later messages, every flush and a `turn.finished` that is not
/// `failed` (which is then not recorded), but events still go in, so the
/// turn's `error` and the `turn.finished` the engine sends instead are.
pub struct StoreSink {
    store: Arc<dyn EventLog>,
    session_id: String,
    /// Position of the last message the writer appended.
    last_position: Arc<Mutex<Option<u64>>>,
    queue: mpsc::UnboundedSender<Command>,
    failure: Arc<Mutex<Option<SinkError>>>,
    /// A message the store refused. Events are still stored after it, so the
    /// turn's error and `turn.finished` reach the log.
    message_failure: Arc<Mutex<Option<SinkError>>>,
    /// Why the store fenced this turn out (its node lost the turn's lease).
    lease_lost: Arc<Mutex<Option<String>>>,
    /// The turn's lease, if it runs under one: its compactions are fenced too.
    fence: Option<Fence>,
    /// Told when someone waits for the queue to be stored (see `Writer::run`).
    flush_now: Arc<Notify>,
}

enum Command {
    Event(Event),
    Message {
        turn_id: String,
        message: Message,
    },
    Flush(oneshot::Sender<Result<(), SinkError>>),
    /// `turn.finished`, then a flush.
    Finish {
        finished: TurnFinished,
        done: oneshot::Sender<Result<(), SinkError>>,
    },
}

/// A turn's last event is refused after a refused message unless it says
/// the turn failed.
fn finishes_failed(finished: &TurnFinished) -> bool {
    finished.status == TurnStatus::Failed
}

fn is_failed_finish(event: &Event) -> bool {
    matches!(event, Event::TurnFinished(finished) if finishes_failed(finished))
}

impl StoreSink {
    /// The writer runs on `writer_on`.
    pub fn new(
        store: Arc<dyn EventLog>,
        session_id: String,
        observer: Option<mpsc::UnboundedSender<EventEnvelope>>,
        writer_on: &Handle,
    ) -> Self {
        Self::fenced(store, session_id, None, observer, writer_on)
    }

    /// [`Self::new`], with a `fence` (a turn under a cluster lease) that
    /// every append checks.
    pub fn fenced(
        store: Arc<dyn EventLog>,
        session_id: String,
        fence: Option<Fence>,
        observer: Option<mpsc::UnboundedSender<EventEnvelope>>,
        writer_on: &Handle,
    ) -> Self {
        Self::start(store, session_id, fence, observer, writer_on, LINGER)
    }

    /// [`Self::fenced`], its writer lingering `linger` for more.
    fn start(
        store: Arc<dyn EventLog>,
        session_id: String,
        fence: Option<Fence>,
        observer: Option<mpsc::UnboundedSender<EventEnvelope>>,
        writer_on: &Handle,
        linger: std::time::Duration,
    ) -> Self {
        let (queue, commands) = mpsc::unbounded_channel();
        let failure = Arc::new(Mutex::new(None));
        let message_failure = Arc::new(Mutex::new(None));
        let last_position = Arc::new(Mutex::new(None));
        let lease_lost = Arc::new(Mutex::new(None));
        let flush_now = Arc::new(Notify::new());
        let writer = Writer {
            store: store.clone(),
            session_id: session_id.clone(),
            fence: fence.clone(),
            observer,
            failure: failure.clone(),
            message_failure: message_failure.clone(),
            last_position: last_position.clone(),
            lease_lost: lease_lost.clone(),
            flush_now: flush_now.clone(),
            linger,
        };
        writer_on.spawn(writer.run(commands));
        Self {
            store,
            session_id,
            last_position,
            queue,
            failure,
            message_failure,
            lease_lost,
            fence,
            flush_now,
        }
    }

    /// The store refused the turn's appends: its node no longer holds the
    /// turn's lease (and nothing of it is stored after the refusal).
    pub fn lease_lost(&self) -> Option<StoreError> {
        let lost = self.lease_lost.lock().ok()?;
        lost.clone().map(StoreError::LeaseLost)
    }

    fn send(&self, command: Command) -> Result<(), SinkError> {
        let blocking: &[&Mutex<Option<SinkError>>] = match &command {
            Command::Message { .. } => &[&self.failure, &self.message_failure],
            Command::Finish { finished, .. } if !finishes_failed(finished) => {
                &[&self.failure, &self.message_failure]
            }
            _ => &[&self.failure],
        };
        if let Some(err) = first_failure(blocking) {
            return Err(err);
        }
        self.queue(command)
    }

    /// Queue `command` for the writer; one someone waits for ends its linger.
    fn queue(&self, command: Command) -> Result<(), SinkError> {
        let waited_for = matches!(command, Command::Flush(_) | Command::Finish { .. });
        self.queue.send(command).map_err(|_| stopped())?;
        if waited_for {
            self.flush_now.notify_one();
        }
        Ok(())
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
    store: Arc<dyn EventLog>,
    session_id: String,
    fence: Option<Fence>,
    observer: Option<mpsc::UnboundedSender<EventEnvelope>>,
    failure: Arc<Mutex<Option<SinkError>>>,
    message_failure: Arc<Mutex<Option<SinkError>>>,
    last_position: Arc<Mutex<Option<u64>>>,
    lease_lost: Arc<Mutex<Option<String>>>,
    flush_now: Arc<Notify>,
    linger: std::time::Duration,
}

/// An event or a message waiting for the writer.
enum Pending {
    Event(Event),
    Message {
        turn_id: String,
        message: Message,
    },
    /// `turn.finished` (an `Event::TurnFinished`).
    Finish(Event),
}

impl Pending {
    /// Still stored after a refused message.
    fn outlives_a_refused_message(&self) -> bool {
        match self {
            Pending::Event(_) => true,
            Pending::Message { .. } => false,
            Pending::Finish(event) => is_failed_finish(event),
        }
    }
}

impl Writer {
    async fn run(self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut pending = Vec::with_capacity(MAX_BATCH);
        let mut flushes = Vec::new();
        while let Some(first) = commands.recv().await {
            // A flush told of while no batch lingered (its command is in the
            // queue, sent before the telling): not a reason to cut this one.
            let _ = futures::FutureExt::now_or_never(self.flush_now.notified());
            let linger_until = tokio::time::Instant::now() + self.linger;
            let mut next = Some(first);
            loop {
                while let Some(command) = next {
                    match command {
                        Command::Event(event) => pending.push(Pending::Event(event)),
                        Command::Message { turn_id, message } => {
                            pending.push(Pending::Message { turn_id, message })
                        }
                        Command::Flush(done) => flushes.push((done, true)),
                        Command::Finish { finished, done } => {
                            // A failed finish was recorded even after a
                            // refused message; any other flush was not whole.
                            flushes.push((done, !finishes_failed(&finished)));
                            pending.push(Pending::Finish(Event::TurnFinished(finished)));
                        }
                    }
                    next = if pending.len() < MAX_BATCH {
                        commands.try_recv().ok()
                    } else {
                        None
                    };
                }
                // Someone waits for the batch, or it is full, or its time is
                // up: store it.
                if !flushes.is_empty()
                    || pending.len() >= MAX_BATCH
                    || tokio::time::Instant::now() >= linger_until
                {
                    break;
                }
                // Wait out the linger without watching the queue: a send
                // then wakes no one, so a burst of events costs this task
                // one wake, not one each (a wake of another thread, since
                // turns run on a runtime of their own). A flush ends it.
                tokio::select! {
                    () = tokio::time::sleep_until(linger_until) => {}
                    () = self.flush_now.notified() => {}
                }
                next = commands.try_recv().ok();
                if next.is_none() {
                    break;
                }
            }
            self.store(&mut pending).await;
            for (done, needs_every_message) in flushes.drain(..) {
                let slots: &[&Mutex<Option<SinkError>>] = if needs_every_message {
                    &[&self.failure, &self.message_failure]
                } else {
                    &[&self.failure]
                };
                let _ = done.send(first_failure(slots).map_or(Ok(()), Err));
            }
        }
    }

    fn fail(&self, slot: &Mutex<Option<SinkError>>, what: &str, err: agentd_store::StoreError) {
        tracing::error!(%err, session_id = %self.session_id, "could not store {what}");
        if let Ok(mut failure) = slot.lock() {
            *failure = Some(SinkError(err.to_string()));
        }
    }

    /// Store `pending` in order, in one commit when the store can. An event
    /// that cannot be stored fails everything after it; a message, only the
    /// messages after it (the log goes on).
    async fn store(&self, pending: &mut Vec<Pending>) {
        loop {
            if first_failure(&[&self.failure]).is_some() {
                pending.clear();
            }
            if first_failure(&[&self.message_failure]).is_some() {
                pending.retain(Pending::outlives_a_refused_message);
            }
            if pending.is_empty() {
                return;
            }
            let entries: Vec<LogEntry> = pending
                .iter()
                .map(|p| match p {
                    Pending::Event(event) | Pending::Finish(event) => LogEntry::Event(event),
                    Pending::Message { turn_id, message } => LogEntry::Message {
                        turn_id: Some(turn_id),
                        message,
                    },
                })
                .collect();
            let appended = match &self.fence {
                Some(fence) => {
                    self.store
                        .append_log_fenced(&self.session_id, fence, &entries)
                        .await
                }
                None => self.store.append_log(&self.session_id, &entries).await,
            };
            let done = appended.stored.len();
            for logged in appended.stored {
                match logged {
                    Logged::Event(envelope) => {
                        if let Some(observer) = &self.observer {
                            let _ = observer.send(envelope);
                        }
                    }
                    Logged::Message(stored) => {
                        if let Ok(mut last) = self.last_position.lock() {
                            *last = Some(stored.position);
                        }
                    }
                }
            }
            let Some(err) = appended.error else {
                pending.clear();
                return;
            };
            match (pending.get(done), err) {
                // Nothing more of this turn may be stored: it is another
                // node's now.
                (_, StoreError::LeaseLost(why)) => {
                    tracing::warn!(session_id = %self.session_id, %why,
                        "the turn's lease was lost; storing nothing more of it");
                    if let Ok(mut failure) = self.failure.lock() {
                        *failure = Some(SinkError(StoreError::LeaseLost(why.clone()).to_string()));
                    }
                    if let Ok(mut lost) = self.lease_lost.lock() {
                        *lost = Some(why);
                    }
                }
                (Some(Pending::Message { .. }), err) => {
                    self.fail(&self.message_failure, "a message", err)
                }
                (_, err) => self.fail(&self.failure, "events", err),
            }
            pending.drain(..=done.min(pending.len() - 1));
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
        self.queue(Command::Flush(done))?;
        stored.await.map_err(|_| stopped())?
    }

    async fn finish_turn(&self, finished: &TurnFinished) -> Result<(), SinkError> {
        let (done, stored) = oneshot::channel();
        self.send(Command::Finish {
            finished: finished.clone(),
            done,
        })?;
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
        // The compaction starts after the last message appended: have it
        // stored. A turn fenced out fails here (or at the fenced insert).
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
        let added = match &self.fence {
            Some(fence) => self.store.add_compaction_fenced(&record, fence).await,
            None => self.store.add_compaction(&record).await,
        };
        added.map_err(store_error)
    }
}

#[cfg(test)]
mod fenced_out;

#[cfg(test)]
mod tests {
    use agentd_protocol::ErrorInfo;
    use agentd_store::Store;

    use super::*;
    use crate::test_support::{sqlite_with_session, store_with_session};

    pub(super) fn event(n: u32) -> Event {
        Event::Error(ErrorInfo {
            code: format!("e{n}").into(),
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

    /// A flush ends the writer's linger: with a minute's linger, the events
    /// queued before it are stored and it returns at once, and so does the
    /// turn's end. (Waiting on the queue itself, the writer woke at every
    /// event; it now sleeps the linger out unless someone waits.)
    #[tokio::test]
    async fn a_flush_and_the_turns_end_cut_the_linger_short() {
        let (store, session) = store_with_session().await;
        let minute = std::time::Duration::from_secs(60);
        let sink = StoreSink::start(
            store.clone(),
            session.clone(),
            None,
            None,
            &Handle::current(),
            minute,
        );
        let within = |what| tokio::time::timeout(std::time::Duration::from_secs(10), what);
        for n in 0..5 {
            sink.emit(event(n)).await.unwrap();
        }
        // Let the writer take the first event and start lingering.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        within(sink.flush())
            .await
            .expect("the flush waited out the linger")
            .unwrap();
        assert_eq!(store.events_after(&session, 0, 100).await.unwrap().len(), 5);
        sink.emit(event(5)).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let finished = finished(TurnStatus::Completed);
        within(sink.finish_turn(&finished))
            .await
            .expect("the end waited out the linger")
            .unwrap();
        assert_eq!(store.events_after(&session, 0, 100).await.unwrap().len(), 7);
    }

    /// A store with a session that refuses every message containing "lost?".
    async fn refusing_lost_messages() -> (Arc<dyn Store>, String) {
        let (sqlite, session) = sqlite_with_session().await;
        sqlx::query(
            "CREATE TRIGGER refuse BEFORE INSERT ON messages WHEN NEW.content LIKE '%lost?%' \
             BEGIN SELECT RAISE(ABORT, 'refused'); END",
        )
        .execute(sqlite.pool())
        .await
        .unwrap();
        (Arc::new(sqlite), session)
    }

    /// A message the store refuses fails the next flush and every later
    /// message; events still go in, so the turn's end is recorded.
    #[tokio::test]
    async fn a_refused_message_fails_what_follows_but_not_the_log() {
        let (store, session) = refusing_lost_messages().await;
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

    pub(super) fn finished(status: TurnStatus) -> TurnFinished {
        TurnFinished {
            agent_status: None,
            turn_id: "t".into(),
            status,
            result: None,
            usage: Default::default(),
            cost_usd: 0.0,
            num_model_calls: 1,
            duration_ms: 1,
            error: None,
        }
    }

    /// `turn.finished` goes in with what was queued before it. After a
    /// refused message (queued in the same batch) a `completed` one is
    /// refused and not recorded; the `failed` one the engine sends then is.
    #[tokio::test]
    async fn a_turn_cannot_finish_completed_without_its_messages() {
        let (store, session) = refusing_lost_messages().await;
        let finishes = |store: Arc<dyn Store>, session: String| async move {
            store
                .events_after(&session, 0, 100)
                .await
                .unwrap()
                .into_iter()
                .filter_map(|e| match e.event {
                    Event::TurnFinished(f) => Some(f.status),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let sink = StoreSink::new(store.clone(), session.clone(), None, &Handle::current());
        sink.append_message("t", &Message::user_text("kept"))
            .await
            .unwrap();
        sink.finish_turn(&finished(TurnStatus::Completed))
            .await
            .unwrap();
        assert_eq!(store.messages(&session).await.unwrap().len(), 1);
        assert_eq!(
            finishes(store.clone(), session.clone()).await,
            [TurnStatus::Completed]
        );

        let sink = StoreSink::new(store.clone(), session.clone(), None, &Handle::current());
        sink.append_message("t", &Message::user_text("lost?"))
            .await
            .unwrap();
        sink.emit(event(1)).await.unwrap();
        assert!(
            sink.finish_turn(&finished(TurnStatus::Completed))
                .await
                .is_err()
        );
        // Once the failure is known, refused at once.
        assert!(
            sink.finish_turn(&finished(TurnStatus::MaxTurns))
                .await
                .is_err()
        );
        sink.finish_turn(&finished(TurnStatus::Failed))
            .await
            .unwrap();
        assert_eq!(
            finishes(store.clone(), session.clone()).await,
            [TurnStatus::Completed, TurnStatus::Failed]
        );
        // The event queued after the refused message is in.
        assert_eq!(store.events_after(&session, 0, 100).await.unwrap().len(), 3);
    }
}
