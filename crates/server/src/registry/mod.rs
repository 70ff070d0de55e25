//! The live side of sessions: one [`Entry`] per session that has a running
//! turn or a subscriber, and nothing for any other session (an idle session
//! is only rows in the store).
//!
//! An entry holds the session's event hub (a bounded broadcast, `hub.rs`: a
//! slow subscriber lags and is dropped, it never slows the turn), the running
//! turn's cancel token and the queue of turns waiting for it. Entries are
//! reference counted by [`EntryHandle`]s (subscribers, the turn worker, a
//! request in progress); the last handle to go removes the entry. Handles are
//! only made and dropped under the map's lock, so a session never has two
//! entries and so never two running turns.

use std::collections::{HashMap, VecDeque};
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use agentd_protocol::EventEnvelope;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admission::Admissions;
use crate::metrics::{Gauges, Metrics};
use crate::runtime::Runtime;

mod hub;
mod turn_kind;
mod turns;

pub use hub::{HUB_CAPACITY, Lagged, Subscriber};
pub use turn_kind::{TurnKind, UserTurn};
pub use turns::{Accepted, PendingTurn, Submission, SubmitError};

/// A stored event as live subscribers get it: its envelope's JSON.
#[derive(Debug)]
pub struct LiveEvent {
    pub seq: u64,
    /// The event's type, for the SSE `event:` line.
    pub kind: &'static str,
    pub json: String,
}

/// Process environment, read once at start-up (model API keys).
pub type Env = Arc<HashMap<String, String>>;

/// Cheap to clone; clones share the registry.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub runtime: Runtime,
    pub env: Env,
    pub metrics: Arc<Metrics>,
    entries: Mutex<HashMap<String, Arc<Entry>>>,
    /// Cancelled at shutdown: interrupts every turn.
    stopping: CancellationToken,
    tasks: TaskTracker,
    /// Turns whose end could not be recorded before shutdown.
    unrecorded: AtomicU64,
    admissions: Admissions,
}

pub struct Entry {
    pub session_id: String,
    events: Arc<hub::Hub>,
    /// The greatest `seq` published: an event reaching the hub twice (from
    /// this node's turn and from another node's notification) goes out once.
    published: AtomicU64,
    /// Serializes submissions, so a `client_request_id` check and the
    /// registration of the turn are one step.
    submit: Arc<tokio::sync::Mutex<()>>,
    turns: Mutex<TurnState>,
    /// Cancelled when the session is deleted: its streams end.
    pub closed: CancellationToken,
}

#[derive(Default)]
struct TurnState {
    running: Option<Running>,
    queue: VecDeque<PendingTurn>,
    /// `client_request_id` → turn id, for turns accepted but maybe not yet
    /// recorded in the store.
    request_ids: HashMap<String, String>,
    /// A user's command runs (`POST …/commands/{name}`): messages are
    /// refused, not kept waiting, until it ends.
    command_running: bool,
}

struct Running {
    turn_id: String,
    cancel: CancellationToken,
    /// Its `turn.finished` is out; only bookkeeping is left. A client that saw
    /// that event may send the next message at once: it is accepted.
    finishing: bool,
}

/// The live state of one session, for `GET /v1/sessions/{id}`.
#[derive(Debug, Clone, Default)]
pub struct LiveState {
    /// The session has an entry: the registry knows its turns best.
    pub live: bool,
    pub running_turn: Option<String>,
    pub queued: usize,
    /// A turn has sent its `turn.finished` (so `running_turn` is `None`)
    /// and its end is being recorded.
    pub finishing: bool,
}

/// Held while a session is deleted; `finish` ends the session's streams.
pub struct DeleteGuard {
    // Field order: the lock goes before the handle that owns the mutex.
    _lock: tokio::sync::OwnedMutexGuard<()>,
    handle: EntryHandle,
}

impl DeleteGuard {
    pub fn finish(self) {
        self.handle.closed.cancel();
    }
}

/// Why a session cannot be held exclusively now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Busy {
    /// A turn runs or waits.
    Turn,
    /// A user's command runs.
    Command,
}

/// Marks the session's command as running until dropped; submissions are
/// refused meanwhile (without waiting on the submit lock, which is not held).
pub struct CommandGuard {
    handle: EntryHandle,
}

impl Drop for CommandGuard {
    fn drop(&mut self) {
        self.handle.lock_turns().command_running = false;
    }
}

/// Keeps an entry alive; the last one dropped removes it from the registry.
pub struct EntryHandle {
    registry: Arc<Inner>,
    entry: Option<Arc<Entry>>,
}

impl Deref for EntryHandle {
    type Target = Entry;
    fn deref(&self) -> &Entry {
        // Only `drop` takes the entry out.
        match &self.entry {
            Some(entry) => entry,
            None => unreachable!("entry handle used after drop"),
        }
    }
}

impl Drop for EntryHandle {
    fn drop(&mut self) {
        let Some(entry) = self.entry.take() else {
            return;
        };
        let mut entries = self.registry.lock_entries();
        let id = entry.session_id.clone();
        // Dropped under the lock, where handles are made: the count is exact.
        drop(entry);
        if entries.get(&id).is_some_and(|e| Arc::strong_count(e) == 1) {
            entries.remove(&id);
        }
    }
}

impl Entry {
    fn lock_turns(&self) -> MutexGuard<'_, TurnState> {
        // The state stays consistent even if a holder panicked.
        self.turns.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn subscribe(&self) -> Subscriber {
        self.events.subscribe()
    }

    /// Send a stored event to the live subscribers, serialized once for all
    /// of them. With none, nothing is done: whoever subscribes later reads
    /// this event from the store, where it already is.
    pub fn publish(&self, envelope: &EventEnvelope) {
        let before = self.published.fetch_max(envelope.seq, Ordering::AcqRel);
        // Already sent, or overtaken: a stream past a gap reads the store.
        if envelope.seq <= before || self.events.subscriber_count() == 0 {
            return;
        }
        match serde_json::to_string(envelope) {
            Ok(json) => {
                self.events.send(Arc::new(LiveEvent {
                    seq: envelope.seq,
                    kind: envelope.event.type_name(),
                    json,
                }));
            }
            Err(err) => tracing::error!(%err, seq = envelope.seq, "cannot encode an event"),
        }
    }
}

impl Entry {
    /// The greatest `seq` published to this hub so far.
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Acquire)
    }

    /// A turn of this session runs in this process.
    pub fn runs_here(&self) -> bool {
        self.lock_turns().running.is_some()
    }
}

impl Inner {
    fn lock_entries(&self) -> MutexGuard<'_, HashMap<String, Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Registry {
    pub fn new(runtime: Runtime, env: Env, metrics: Arc<Metrics>) -> Self {
        Self {
            inner: Arc::new(Inner {
                runtime,
                env,
                metrics,
                entries: Mutex::new(HashMap::new()),
                stopping: CancellationToken::new(),
                tasks: TaskTracker::new(),
                unrecorded: AtomicU64::new(0),
                admissions: Admissions::default(),
            }),
        }
    }

    /// Turns accepted here and not ended, by user.
    pub fn admissions(&self) -> &Admissions {
        &self.inner.admissions
    }

    /// `turn` ended (ran, failed, or was dropped at shutdown).
    pub(crate) fn turn_done(&self, turn: &PendingTurn) {
        if let Some(by) = &turn.by {
            self.inner.admissions.ended(&by.name);
        }
    }

    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    pub fn webhooks(&self) -> &crate::webhooks::Webhooks {
        &self.inner.runtime.webhooks
    }

    pub fn env(&self) -> &Env {
        &self.inner.env
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The session's entry, made if it has none.
    pub fn handle(&self, session_id: &str) -> EntryHandle {
        let mut entries = self.inner.lock_entries();
        let entry = entries
            .entry(session_id.to_string())
            .or_insert_with(|| {
                Arc::new(Entry {
                    session_id: session_id.to_string(),
                    events: Arc::default(),
                    published: AtomicU64::new(0),
                    submit: Arc::new(tokio::sync::Mutex::new(())),
                    turns: Mutex::new(TurnState::default()),
                    closed: CancellationToken::new(),
                })
            })
            .clone();
        EntryHandle {
            registry: self.inner.clone(),
            entry: Some(entry),
        }
    }

    /// The running and queued turns of a session; default when it is not live.
    pub fn live_state(&self, session_id: &str) -> LiveState {
        // Under the map's lock: a loose `Arc` clone would defeat eviction.
        let entries = self.inner.lock_entries();
        match entries.get(session_id) {
            Some(entry) => {
                let turns = entry.lock_turns();
                LiveState {
                    live: true,
                    running_turn: turns
                        .running
                        .as_ref()
                        .filter(|r| !r.finishing)
                        .map(|r| r.turn_id.clone()),
                    queued: turns.queue.len(),
                    finishing: turns.running.as_ref().is_some_and(|r| r.finishing),
                }
            }
            None => LiveState::default(),
        }
    }

    /// The session's entry if it has one with live subscribers.
    pub(crate) fn watched(&self, session_id: &str) -> Option<EntryHandle> {
        let entries = self.inner.lock_entries();
        let entry = entries.get(session_id)?;
        (entry.events.subscriber_count() > 0).then(|| EntryHandle {
            registry: self.inner.clone(),
            entry: Some(entry.clone()),
        })
    }

    /// A turn of the session runs (or finishes) in this process.
    pub(crate) fn runs_here(&self, session_id: &str) -> bool {
        let entries = self.inner.lock_entries();
        entries.get(session_id).is_some_and(|e| e.runs_here())
    }

    /// `(session, published seq)` of sessions with live subscribers and no
    /// turn running here.
    pub(crate) fn watched_sessions(&self) -> Vec<(String, u64)> {
        let entries = self.inner.lock_entries();
        entries
            .values()
            .filter(|e| e.events.subscriber_count() > 0 && !e.runs_here())
            .map(|e| (e.session_id.clone(), e.published()))
            .collect()
    }

    /// `(session, turn)` of the turns running here (not yet finishing).
    pub(crate) fn running_turns(&self) -> Vec<(String, String)> {
        let entries = self.inner.lock_entries();
        entries
            .values()
            .filter_map(|e| {
                let turns = e.lock_turns();
                let running = turns.running.as_ref().filter(|r| !r.finishing)?;
                Some((e.session_id.clone(), running.turn_id.clone()))
            })
            .collect()
    }

    /// The turn runs, finishes or waits in this process.
    pub(crate) fn knows_turn(&self, session_id: &str, turn_id: &str) -> bool {
        let entries = self.inner.lock_entries();
        entries.get(session_id).is_some_and(|e| {
            let turns = e.lock_turns();
            turns.running.as_ref().is_some_and(|r| r.turn_id == turn_id)
                || turns.queue.iter().any(|t| t.turn_id == turn_id)
        })
    }

    /// Interrupt the session's turn if it is `turn_id`; whether it was.
    pub(crate) fn interrupt_turn(&self, session_id: &str, turn_id: &str) -> bool {
        let entries = self.inner.lock_entries();
        let Some(entry) = entries.get(session_id) else {
            return false;
        };
        let turns = entry.lock_turns();
        match turns.running.as_ref() {
            Some(running) if running.turn_id == turn_id && !running.finishing => {
                running.cancel.cancel();
                true
            }
            _ => false,
        }
    }

    /// Interrupt the session's running turn; its id, or `None` if none runs.
    pub fn interrupt(&self, session_id: &str) -> Option<String> {
        let entries = self.inner.lock_entries();
        let turns = entries.get(session_id)?.lock_turns();
        let running = turns.running.as_ref().filter(|r| !r.finishing)?;
        running.cancel.cancel();
        Some(running.turn_id.clone())
    }

    /// Hold off new turns of an idle session while it is deleted; refused
    /// when a turn is running or queued, or a user's command runs.
    pub async fn begin_delete(&self, session_id: &str) -> Result<DeleteGuard, Busy> {
        let handle = self.handle(session_id);
        let lock = handle.submit.clone().lock_owned().await;
        // A finishing turn is over for the client: wait out its bookkeeping.
        for _ in 0..500 {
            let (busy, idle) = {
                let turns = handle.lock_turns();
                if turns.command_running {
                    return Err(Busy::Command);
                }
                let running = turns.running.as_ref();
                (
                    !turns.queue.is_empty() || running.is_some_and(|r| !r.finishing),
                    running.is_none(),
                )
            };
            if busy {
                return Err(Busy::Turn);
            }
            if idle {
                return Ok(DeleteGuard {
                    _lock: lock,
                    handle,
                });
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        Err(Busy::Turn)
    }

    /// Mark an idle session's command as running: until the guard is
    /// dropped, messages (and another command, a rewind or a delete) are
    /// refused at once. Refused when a turn is running or queued, or
    /// another command runs.
    pub async fn begin_command(&self, session_id: &str) -> Result<CommandGuard, Busy> {
        let exclusive = self.begin_delete(session_id).await?;
        exclusive.handle.lock_turns().command_running = true;
        let DeleteGuard {
            _lock: lock,
            handle,
        } = exclusive;
        drop(lock);
        Ok(CommandGuard { handle })
    }

    pub fn gauges(&self) -> Gauges {
        let entries = self.inner.lock_entries();
        let mut gauges = Gauges {
            sessions_live: entries.len() as u64,
            ..Gauges::default()
        };
        for entry in entries.values() {
            let turns = entry.lock_turns();
            gauges.turns_running += u64::from(turns.running.is_some());
            gauges.turns_queued += turns.queue.len() as u64;
        }
        gauges
    }

    /// Stop: interrupt every running turn, record queued ones as
    /// interrupted, and wait (at most `grace`) for the turns to be recorded;
    /// whether they all were in time.
    pub async fn shutdown(&self, grace: std::time::Duration) -> bool {
        self.inner.stopping.cancel();
        self.inner.tasks.close();
        if tokio::time::timeout(grace, self.inner.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("turns did not finish within {grace:?} of shutdown");
            return false;
        }
        true
    }

    /// A turn's end was given up on at shutdown (the next start records it
    /// as interrupted).
    pub(crate) fn gave_up_recording(&self) {
        self.inner.unrecorded.fetch_add(1, Ordering::Relaxed);
    }

    /// Turns whose end could not be recorded before shutdown.
    pub fn unrecorded_turns(&self) -> u64 {
        self.inner.unrecorded.load(Ordering::Relaxed)
    }

    pub fn is_stopping(&self) -> bool {
        self.inner.stopping.is_cancelled()
    }

    /// Resolves when shutdown begins.
    pub async fn stopping(&self) {
        self.inner.stopping.cancelled().await
    }
}
