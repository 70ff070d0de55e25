//! Running a session's accepted turns, one after another, in a task owned by
//! the server (not by the request that submitted them): each turn's events go
//! to the store and, once stored, to the session's live hub.

use std::time::Duration;

use agentd_protocol::{ErrorCode, ErrorInfo, Event, EventEnvelope, TurnFinished, TurnStatus};
use agentd_store::{SessionRecord, SessionStatus, SessionUpdate, StoreError, TurnStart};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::access::QuotaRefusal;
use crate::access::quotas::QuotaCheckError;
use crate::admission::Caller;
use crate::metrics::TurnClock;
use crate::registry::TurnKind;
use crate::registry::{EntryHandle, PendingTurn, Registry};
use crate::runtime::{RunError, TurnOptions};

/// Ends a turn's admission (see `crate::admission`) when dropped.
struct TurnDone<'a> {
    registry: &'a Registry,
    turn: &'a PendingTurn,
}

impl Drop for TurnDone<'_> {
    fn drop(&mut self) {
        self.registry.turn_done(self.turn);
    }
}

/// Run `first`, then whatever was queued behind it; at shutdown, record the
/// turns still queued as interrupted.
pub(crate) async fn drive(
    registry: Registry,
    handle: EntryHandle,
    first: PendingTurn,
    cancel: CancellationToken,
) {
    let mut next = Some((first, cancel));
    let mut waited = false;
    while let Some((turn, cancel)) = next {
        let span =
            tracing::info_span!("turn", session_id = %handle.session_id, turn_id = %turn.turn_id);
        // Its admission ends even if the turn's task panics.
        let done = TurnDone {
            registry: &registry,
            turn: &turn,
        };
        run_one(&registry, &handle, &turn, cancel, waited)
            .instrument(span)
            .await;
        drop(done);
        waited = true;
        // In a cluster: its workspace saved and its lease released.
        let coordination = registry.runtime().coordination.clone();
        coordination
            .turn_ended(&registry, &handle.session_id, &turn.turn_id)
            .await;
        next = registry.next_turn(&handle, &turn);
    }
    if registry.is_stopping() {
        for turn in registry.drain_queue(&handle) {
            let error = ErrorInfo {
                code: ErrorCode::ServerStopped,
                message: "agentd stopped before this queued turn could start.".into(),
                retryable: true,
            };
            record_end(&registry, &handle, &turn, TurnStatus::Interrupted, error).await;
            registry.turn_done(&turn);
            let coordination = registry.runtime().coordination.clone();
            coordination
                .turn_ended(&registry, &handle.session_id, &turn.turn_id)
                .await;
        }
    }
}

async fn run_one(
    registry: &Registry,
    handle: &EntryHandle,
    turn: &PendingTurn,
    cancel: CancellationToken,
    waited: bool,
) {
    let kind = match &turn.kind {
        Ok(kind) => kind,
        Err(message) => {
            tracing::error!(%message, "a queued turn cannot be read");
            let error = ErrorInfo {
                code: ErrorCode::TurnNotStarted,
                message: format!("the turn could not start: {message}"),
                retryable: false,
            };
            record_end(registry, handle, turn, TurnStatus::Failed, error).await;
            return;
        }
    };
    let Some(session) = ready_session(registry, handle, turn, waited).await else {
        return;
    };
    let runtime = registry.runtime();
    registry
        .metrics()
        .turns_started
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (observer, events) = mpsc::unbounded_channel();
    let about = TurnOf {
        owner: session.owner.clone(),
        profile: session.profile.clone(),
        turn_id: turn.turn_id.clone(),
    };
    let forward = forward_events(registry, &handle.session_id, about, events);
    let options = TurnOptions {
        client_request_id: turn.client_request_id.clone(),
        turn_id: Some(turn.turn_id.clone()),
        // Checked against the profile's when the message was accepted.
        permission_mode: message_mode(&runtime.config, &session, kind),
        ..TurnOptions::default()
    };
    let env = registry.env().clone();
    let lookup = move |key: &str| env.get(key).cloned();
    let run = runtime.run_turn(&session, kind, options, &lookup, Some(observer), cancel);
    // `run` owns the sender: when it returns, `forward` drains and ends.
    let outcome = run.await;
    if let Err(err) = forward.await {
        tracing::error!(%err, "the event forwarder failed");
    }
    settle(registry, handle, turn, outcome).await;
}

/// The session, read and made ready for the turn; `None` when the turn
/// must not run (its end is recorded then, unless the session is gone).
async fn ready_session(
    registry: &Registry,
    handle: &EntryHandle,
    turn: &PendingTurn,
    waited: bool,
) -> Option<SessionRecord> {
    let runtime = registry.runtime();
    let mut session = match runtime.store.get_session(&handle.session_id).await {
        Ok(Some(session)) => session,
        Ok(None) => {
            tracing::warn!("session vanished before its turn could start");
            return None;
        }
        Err(err) => {
            // The turn was accepted: record that it failed once the store
            // answers again, so its client sees its end.
            tracing::error!(%err, "cannot read the session to start its turn");
            let error = ErrorInfo {
                code: ErrorCode::StoreError,
                message: format!("the turn could not start: {err}"),
                retryable: true,
            };
            record_end(registry, handle, turn, TurnStatus::Failed, error).await;
            return None;
        }
    };
    // A grant taken back or a quota reached while it waited stops it.
    if waited
        && let Some(by) = &turn.by
        && let Err(error) = still_allowed(registry, by, &session).await
    {
        tracing::info!(code = %error.code, "a queued turn is no longer allowed");
        record_end(registry, handle, turn, TurnStatus::Failed, error).await;
        return None;
    }
    if let Err(message) = runtime
        .coordination
        .before_turn(registry, &mut session)
        .await
    {
        tracing::error!(%message, "cannot prepare the workspace");
        let error = ErrorInfo {
            code: ErrorCode::WorkspaceUnavailable,
            message: format!("the turn could not start: {message}"),
            retryable: true,
        };
        record_end(registry, handle, turn, TurnStatus::Failed, error).await;
        return None;
    }
    Some(session)
}

/// Hand the turn's stored events to the session's live hub, in a task of
/// its own: they go out as soon as they are stored, not when the turn's
/// task next yields (it may be busy building a request).
fn forward_events(
    registry: &Registry,
    session_id: &str,
    about: TurnOf,
    mut events: mpsc::UnboundedReceiver<agentd_protocol::EventEnvelope>,
) -> tokio::task::JoinHandle<()> {
    let (registry, handle) = (registry.clone(), registry.handle(session_id));
    let threads = registry.runtime().threads.clone();
    threads.spawn_serving(async move {
        let mut clock = TurnClock::default();
        while let Some(envelope) = events.recv().await {
            registry.metrics().event(&envelope, &mut clock);
            if matches!(envelope.event, Event::TurnFinished(_)) {
                // Before anyone sees it, so a message sent on seeing it is taken.
                registry.finishing(&handle);
            }
            handle.publish(&envelope);
            // After the live hub: a webhook is one insert, on this task.
            let store = registry.runtime().store.as_ref();
            let turn = crate::webhooks::TurnOf {
                owner: &about.owner,
                profile: &about.profile,
                turn_id: &about.turn_id,
            };
            registry
                .webhooks()
                .event_stored(store, &turn, &envelope)
                .await;
        }
    })
}

/// Whose turn a forwarder hands events of, for webhooks.
struct TurnOf {
    owner: String,
    profile: String,
    turn_id: String,
}

/// After the turn ran (or could not): record what the turn itself could not.
async fn settle(
    registry: &Registry,
    handle: &EntryHandle,
    turn: &PendingTurn,
    outcome: Result<Option<TurnFinished>, RunError>,
) {
    match outcome {
        Ok(Some(finished)) if finished.status == TurnStatus::Failed => {
            tracing::info!(status = finished.status.as_str(), "turn finished");
            // A store that failed mid-turn and came back before its end may
            // have taken the turn's status but not its `turn.finished`.
            if !matches!(finished_is_stored(registry, handle, turn).await, Ok(true)) {
                record_store_failure(registry, handle, turn, "its end was not stored").await;
            }
        }
        Ok(Some(finished)) => {
            tracing::info!(status = finished.status.as_str(), "turn finished");
        }
        Ok(None) => tracing::warn!("the store already had this turn; nothing ran"),
        Err(RunError::Store(StoreError::LeaseLost(why))) => {
            // Another node took the turn over and records its end.
            tracing::warn!(%why, "the turn's lease was lost; its end is the new owner's");
        }
        Err(err @ (RunError::Config(_) | RunError::Workspace { .. })) => {
            // Nothing was recorded yet: say why the turn did not run.
            tracing::warn!(%err, "turn could not start");
            let error = ErrorInfo {
                code: ErrorCode::TurnNotStarted,
                message: err.to_string(),
                retryable: false,
            };
            record_end(registry, handle, turn, TurnStatus::Failed, error).await;
        }
        Err(err) => {
            tracing::error!(%err, "turn failed in the store");
            record_store_failure(registry, handle, turn, &err.to_string()).await;
        }
    }
}

/// First wait between attempts to record a turn's end.
const RETRY_FIRST: Duration = Duration::from_millis(500);
/// Longest wait between attempts.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// The store failed during the turn (database down, disk full): its end may
/// be unrecorded. Record it as `failed` (see [`record_end`]).
async fn record_store_failure(
    registry: &Registry,
    handle: &EntryHandle,
    turn: &PendingTurn,
    detail: &str,
) {
    let error = ErrorInfo {
        code: ErrorCode::StoreError,
        message: format!("the turn failed in the store: {detail}"),
        retryable: true,
    };
    record_end(registry, handle, turn, TurnStatus::Failed, error).await;
}

/// Record how a turn ended when the turn itself could not (it never ran, or
/// the store failed under it): the turn row (made if it never was), an
/// `error` and a `turn.finished` unless one is stored, the session idle.
/// Retried with backoff until the store takes it: a turn accepted with `202`
/// always ends in the log, and the session stays busy until then. Gives up
/// at shutdown after a last attempt (the next start finishes a recorded
/// turn as interrupted).
async fn record_end(
    registry: &Registry,
    handle: &EntryHandle,
    turn: &PendingTurn,
    status: TurnStatus,
    error: ErrorInfo,
) {
    let mut wait = RETRY_FIRST;
    let mut attempt = 1u32;
    loop {
        match try_record_end(registry, handle, turn, status, &error).await {
            Ok(()) => {
                if attempt > 1 {
                    tracing::info!(attempt, "recorded the turn's end after the store came back");
                }
                return;
            }
            Err(err @ StoreError::Database(_)) => {
                tracing::warn!(%err, attempt, "cannot record the turn's end yet; retrying");
            }
            Err(StoreError::LeaseLost(why)) => {
                // The session too: this node's start of the turn (fenced)
                // came before the takeover, the new owner's idle after it.
                tracing::warn!(%why, "the turn's lease was lost; its end is the new owner's");
                return;
            }
            Err(err) => {
                // Not the store being away: retrying cannot help.
                tracing::error!(%err, "cannot record the turn's end");
                return;
            }
        }
        if registry.is_stopping() {
            tracing::warn!("shutting down before the turn's end could be recorded");
            registry.gave_up_recording();
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = registry.stopping() => {}
        }
        wait = (wait * 2).min(RETRY_MAX);
        attempt += 1;
    }
}

/// One attempt of [`record_end`]; every step may be repeated.
async fn try_record_end(
    registry: &Registry,
    handle: &EntryHandle,
    turn: &PendingTurn,
    status: TurnStatus,
    error: &ErrorInfo,
) -> Result<(), StoreError> {
    // Each write fenced by the turn's lease in a cluster: a node that lost
    // it records nothing (`LeaseLost`), the node that took it over does.
    let runtime = registry.runtime();
    let (session_id, turn_id) = (handle.session_id.as_str(), turn.turn_id.as_str());
    match runtime
        .record_turn_status(session_id, turn_id, status)
        .await
    {
        Ok(()) => {}
        Err(StoreError::NotFound(_)) => {
            // Never recorded: record it now.
            let started = runtime
                .record_turn_start(session_id, turn_id, turn.client_request_id.as_deref())
                .await;
            match started {
                Ok(TurnStart::Started(_)) => {
                    runtime
                        .record_turn_status(session_id, turn_id, status)
                        .await?
                }
                // Its request id belongs to a recorded turn: that one has its end.
                Ok(TurnStart::Duplicate(_)) => return Ok(()),
                // The session was deleted: nothing is left to record in.
                Err(StoreError::NotFound(_)) => return Ok(()),
                Err(err) => return Err(err),
            }
        }
        Err(err) => return Err(err),
    }
    let stored = match finished_is_stored(registry, handle, turn).await {
        Err(StoreError::NotFound(_)) => return Ok(()),
        stored => stored?,
    };
    if !stored {
        let finished = TurnFinished::never_ran(turn_id, status, error.clone());
        let events = [Event::Error(error.clone()), Event::TurnFinished(finished)];
        let stored = runtime
            .append_turn_events(session_id, turn_id, &events)
            .await?;
        registry.finishing(handle);
        for envelope in &stored {
            registry
                .metrics()
                .event(envelope, &mut TurnClock::default());
            handle.publish(envelope);
        }
        notify_webhooks(registry, turn, &stored).await;
    }
    let update = SessionUpdate {
        status: Some(SessionStatus::Idle),
        ..SessionUpdate::default()
    };
    runtime
        .update_session_for_turn(session_id, turn_id, update)
        .await?;
    Ok(())
}

/// The session's last event is this turn's `turn.finished` (nothing of the
/// session is stored after it while the turn holds the session).
async fn finished_is_stored(
    registry: &Registry,
    handle: &EntryHandle,
    turn: &PendingTurn,
) -> Result<bool, StoreError> {
    let store = &registry.runtime().store;
    let session = store
        .get_session(&handle.session_id)
        .await?
        .ok_or_else(|| StoreError::NotFound(handle.session_id.clone()))?;
    let last = store
        .events_after(&handle.session_id, session.last_seq.saturating_sub(1), 1)
        .await?;
    Ok(last.iter().any(
        |envelope| matches!(&envelope.event, Event::TurnFinished(f) if f.turn_id == turn.turn_id),
    ))
}

/// Whether `by` may still run a turn of `session`: its profile and model
/// granted, no spend or storage quota reached.
async fn still_allowed(
    registry: &Registry,
    by: &Caller,
    session: &SessionRecord,
) -> Result<(), ErrorInfo> {
    let access = registry.runtime().access();
    let refused = |code: ErrorCode, message: String| ErrorInfo {
        code,
        message,
        retryable: false,
    };
    let user = access
        .store
        .get_user_by_name(&by.name)
        .await
        .map_err(|err| refused(ErrorCode::StoreError, err.to_string()))?;
    if user.is_some_and(|user| user.disabled_at.is_some()) {
        return Err(refused(
            ErrorCode::UserDisabled,
            format!("the user {} is disabled", by.name),
        ));
    }
    let usable = access
        .usable(&by.name, by.is_admin)
        .await
        .map_err(|err| refused(ErrorCode::StoreError, err.to_string()))?;
    if let Some(message) = usable.refusal(access.config, &session.profile, &session.model) {
        return Err(refused(ErrorCode::NotGranted, message));
    }
    match access.recheck_queued(&by.name).await {
        Ok(()) => Ok(()),
        Err(QuotaCheckError::Refused(QuotaRefusal::Exceeded { message, .. })) => {
            Err(refused(ErrorCode::QuotaExceeded, message))
        }
        Err(QuotaCheckError::Refused(QuotaRefusal::Rate { message, .. })) => {
            Err(refused(ErrorCode::RateLimited, message))
        }
        Err(QuotaCheckError::Store(err)) => Err(refused(ErrorCode::StoreError, err.to_string())),
    }
}

/// The mode a message asked for, as long as it is still no looser than the
/// session profile's now (the profile may have been tightened while the
/// turn waited in a queue); otherwise the profile's own.
fn message_mode(
    config: &crate::config::Config,
    session: &SessionRecord,
    kind: &TurnKind,
) -> Option<agentd_policy::permissions::PermissionMode> {
    let asked = kind.permission_mode()?;
    let profile = config.profile(&session.profile).ok()?;
    if asked.is_looser_than(profile.mode) {
        tracing::warn!(session = %session.id, asked = asked.name(), profile = profile.mode.name(),
            "a message's permission mode is looser than its profile's now; the profile's applies");
        return None;
    }
    Some(asked)
}

/// A turn's end recorded here (it never ran, or the store failed under it)
/// goes to webhooks like one the turn recorded itself.
async fn notify_webhooks(registry: &Registry, turn: &PendingTurn, stored: &[EventEnvelope]) {
    let store = registry.runtime().store.as_ref();
    for envelope in stored {
        registry
            .webhooks()
            .session_event_stored(store, &turn.turn_id, envelope)
            .await;
    }
}
