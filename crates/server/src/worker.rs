//! Running a session's accepted turns, one after another, in a task owned by
//! the server (not by the request that submitted them): each turn's events go
//! to the store and, once stored, to the session's live hub.

use std::time::Duration;

use agentd_protocol::{ErrorInfo, Event, TurnFinished, TurnStatus, Usage};
use agentd_store::{SessionStatus, SessionUpdate, StoreError, TurnStart};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::metrics::TurnClock;
use crate::registry::{EntryHandle, PendingTurn, Registry};
use crate::runtime::{RunError, TurnOptions};

/// Run `first`, then whatever was queued behind it; at shutdown, record the
/// turns still queued as interrupted.
pub(crate) async fn drive(
    registry: Registry,
    handle: EntryHandle,
    first: PendingTurn,
    cancel: CancellationToken,
) {
    let mut next = Some((first, cancel));
    while let Some((turn, cancel)) = next {
        let span =
            tracing::info_span!("turn", session_id = %handle.session_id, turn_id = %turn.turn_id);
        run_one(&registry, &handle, &turn, cancel)
            .instrument(span)
            .await;
        // A turn taken from the cluster's queue: save and release it.
        if let Some(cluster) = &registry.runtime().cluster {
            cluster
                .turn_ended(&registry, &handle.session_id, &turn.turn_id)
                .await;
        }
        next = registry.next_turn(&handle, &turn);
    }
    if registry.is_stopping() {
        for turn in registry.drain_queue(&handle) {
            let error = ErrorInfo {
                code: "server_stopped".into(),
                message: "agentd stopped before this queued turn could start.".into(),
                retryable: true,
            };
            record_unrun(&registry, &handle, &turn, TurnStatus::Interrupted, error).await;
            if let Some(cluster) = &registry.runtime().cluster {
                cluster
                    .turn_ended(&registry, &handle.session_id, &turn.turn_id)
                    .await;
            }
        }
    }
}

async fn run_one(
    registry: &Registry,
    handle: &EntryHandle,
    turn: &PendingTurn,
    cancel: CancellationToken,
) {
    let runtime = registry.runtime();
    let mut session = match runtime.store.get_session(&handle.session_id).await {
        Ok(Some(session)) => session,
        Ok(None) => {
            tracing::warn!("session vanished before its turn could start");
            return;
        }
        Err(err) => {
            // The turn was accepted: record that it failed once the store
            // answers again, so its client sees its end.
            tracing::error!(%err, "cannot read the session to start its turn");
            if wait_for_store(registry).await {
                let error = ErrorInfo {
                    code: "store_error".into(),
                    message: format!("the turn could not start: {err}"),
                    retryable: true,
                };
                record_unrun(registry, handle, turn, TurnStatus::Failed, error).await;
            }
            return;
        }
    };
    if let Some(cluster) = &runtime.cluster
        && let Err(message) = cluster.prepare(registry, &mut session).await
    {
        tracing::error!(%message, "cannot prepare the workspace");
        let error = ErrorInfo {
            code: "workspace_unavailable".into(),
            message: format!("the turn could not start: {message}"),
            retryable: true,
        };
        record_unrun(registry, handle, turn, TurnStatus::Failed, error).await;
        return;
    }
    registry
        .metrics()
        .turns_started
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (observer, mut events) = mpsc::unbounded_channel();
    // Its own task: stored events go out as soon as they are stored, not
    // when the turn's task next yields (it may be busy building a request).
    let forward = {
        let (registry, handle) = (registry.clone(), registry.handle(&handle.session_id));
        runtime.threads.spawn_serving(async move {
            let mut clock = TurnClock::default();
            while let Some(envelope) = events.recv().await {
                registry.metrics().event(&envelope, &mut clock);
                if matches!(envelope.event, Event::TurnFinished(_)) {
                    // Before anyone sees it, so a message sent on seeing it is taken.
                    registry.finishing(&handle);
                }
                handle.publish(&envelope);
            }
        })
    };
    let options = TurnOptions {
        client_request_id: turn.client_request_id.clone(),
        turn_id: Some(turn.turn_id.clone()),
        ..TurnOptions::default()
    };
    let env = registry.env().clone();
    let lookup = move |key: &str| env.get(key).cloned();
    let run = runtime.run_turn(
        &session,
        &turn.text,
        options,
        &lookup,
        Some(observer),
        cancel,
    );
    // `run` owns the sender: when it returns, `forward` drains and ends.
    let outcome = run.await;
    if let Err(err) = forward.await {
        tracing::error!(%err, "the event forwarder failed");
    }
    match outcome {
        Ok(Some(finished)) => {
            tracing::info!(status = finished.status.as_str(), "turn finished");
        }
        Ok(None) => tracing::warn!("the store already had this turn; nothing ran"),
        Err(err @ (RunError::Config(_) | RunError::Workspace { .. })) => {
            // Nothing was recorded yet: say why the turn did not run.
            tracing::warn!(%err, "turn could not start");
            let error = ErrorInfo {
                code: "turn_not_started".into(),
                message: err.to_string(),
                retryable: false,
            };
            record_unrun(registry, handle, turn, TurnStatus::Failed, error).await;
        }
        Err(err) => {
            tracing::error!(%err, "turn failed in the store");
            record_store_failure(registry, handle, turn, &err.to_string()).await;
        }
    }
}

/// First wait between attempts to record a turn that failed in the store.
const RETRY_FIRST: Duration = Duration::from_millis(500);
/// Longest wait between attempts.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// The store failed during the turn (database down, disk full): its end may
/// be unrecorded. Record it as `failed` — the turn row, an `error` and a
/// `turn.finished` unless the latter is already stored, the session idle —
/// retrying until the store takes it, so the session is usable again once
/// the database is back, without a restart. Gives up at shutdown (the next
/// start finishes the turn as interrupted).
async fn record_store_failure(
    registry: &Registry,
    handle: &EntryHandle,
    turn: &PendingTurn,
    detail: &str,
) {
    let error = ErrorInfo {
        code: "store_error".into(),
        message: format!("the turn failed in the store: {detail}"),
        retryable: true,
    };
    let mut wait = RETRY_FIRST;
    let mut attempt = 1u32;
    loop {
        match try_record_failure(registry, handle, turn, &error).await {
            Ok(()) => {
                if attempt > 1 {
                    tracing::info!(
                        attempt,
                        "recorded the failed turn after the store came back"
                    );
                }
                return;
            }
            Err(StoreError::NotFound(what)) => {
                // The turn (or session) was never recorded: record it now, once.
                tracing::warn!(%what, "the failed turn was never recorded");
                record_unrun(registry, handle, turn, TurnStatus::Failed, error).await;
                return;
            }
            Err(err) => {
                tracing::warn!(%err, attempt, "cannot record the failed turn yet; retrying");
            }
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = registry.stopping() => {
                tracing::warn!("shutting down before the failed turn could be recorded");
                return;
            }
        }
        wait = (wait * 2).min(RETRY_MAX);
        attempt += 1;
    }
}

/// Wait until the store answers a ping; `false` when shutdown came first.
async fn wait_for_store(registry: &Registry) -> bool {
    let mut wait = RETRY_FIRST;
    loop {
        if registry.runtime().store.ping().await.is_ok() {
            return true;
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = registry.stopping() => return false,
        }
        wait = (wait * 2).min(RETRY_MAX);
    }
}

/// One attempt of [`record_store_failure`]; every step may be repeated.
async fn try_record_failure(
    registry: &Registry,
    handle: &EntryHandle,
    turn: &PendingTurn,
    error: &ErrorInfo,
) -> Result<(), StoreError> {
    let store = &registry.runtime().store;
    // First: `NotFound` here means the turn was never recorded.
    store.finish_turn(&turn.turn_id, TurnStatus::Failed).await?;
    let session = store
        .get_session(&handle.session_id)
        .await?
        .ok_or_else(|| StoreError::NotFound(handle.session_id.clone()))?;
    let last = store
        .events_after(&handle.session_id, session.last_seq.saturating_sub(1), 1)
        .await?;
    let finished_stored = last.iter().any(
        |envelope| matches!(&envelope.event, Event::TurnFinished(f) if f.turn_id == turn.turn_id),
    );
    if !finished_stored {
        let finished = TurnFinished {
            agent_status: None,
            turn_id: turn.turn_id.clone(),
            status: TurnStatus::Failed,
            result: None,
            usage: Usage::default(),
            cost_usd: 0.0,
            num_model_calls: 0,
            duration_ms: 0,
            error: Some(error.clone()),
        };
        let events = [Event::Error(error.clone()), Event::TurnFinished(finished)];
        let stored = store.append_events(&handle.session_id, &events).await?;
        registry.finishing(handle);
        for envelope in &stored {
            registry
                .metrics()
                .event(envelope, &mut TurnClock::default());
            handle.publish(envelope);
        }
    }
    let update = SessionUpdate {
        status: Some(SessionStatus::Idle),
        ..SessionUpdate::default()
    };
    store.update_session(&handle.session_id, update).await?;
    Ok(())
}

/// Record a turn that never ran: the turn row, an `error` and its one
/// `turn.finished`, published like any other events.
async fn record_unrun(
    registry: &Registry,
    handle: &EntryHandle,
    turn: &PendingTurn,
    status: TurnStatus,
    error: ErrorInfo,
) {
    let store = &registry.runtime().store;
    let started = store
        .start_turn(
            &handle.session_id,
            &turn.turn_id,
            turn.client_request_id.as_deref(),
        )
        .await;
    if !matches!(started, Ok(TurnStart::Started(_))) {
        // Recorded before (or the store is failing): never a second finish.
        return;
    }
    let finished = TurnFinished {
        agent_status: None,
        turn_id: turn.turn_id.clone(),
        status,
        result: None,
        usage: Usage::default(),
        cost_usd: 0.0,
        num_model_calls: 0,
        duration_ms: 0,
        error: Some(error.clone()),
    };
    for event in [Event::Error(error), Event::TurnFinished(finished)] {
        match store.append_event(&handle.session_id, &event).await {
            Ok(envelope) => {
                registry
                    .metrics()
                    .event(&envelope, &mut TurnClock::default());
                handle.publish(&envelope);
            }
            Err(err) => tracing::error!(%err, "cannot record why the turn did not run"),
        }
    }
    let _ = store.finish_turn(&turn.turn_id, status).await;
    set_idle(registry, &handle.session_id).await;
}

async fn set_idle(registry: &Registry, session_id: &str) {
    let update = SessionUpdate {
        status: Some(SessionStatus::Idle),
        ..SessionUpdate::default()
    };
    if let Err(err) = registry
        .runtime()
        .store
        .update_session(session_id, update)
        .await
    {
        tracing::error!(%err, "cannot mark the session idle");
    }
}
