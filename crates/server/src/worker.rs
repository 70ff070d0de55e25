//! Running a session's accepted turns, one after another, in a task owned by
//! the server (not by the request that submitted them): each turn's events go
//! to the store and, once stored, to the session's live hub.

use agentd_protocol::{ErrorInfo, Event, TurnFinished, TurnStatus, Usage};
use agentd_store::{SessionStatus, SessionUpdate, TurnStart};
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
    let session = match runtime.store.get_session(&handle.session_id).await {
        Ok(Some(session)) => session,
        Ok(None) => {
            tracing::warn!("session vanished before its turn could start");
            return;
        }
        Err(err) => {
            tracing::error!(%err, "cannot read the session to start its turn");
            return;
        }
    };
    registry
        .metrics()
        .turns_started
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (observer, mut events) = mpsc::unbounded_channel();
    let forward = async {
        let mut clock = TurnClock::default();
        while let Some(envelope) = events.recv().await {
            registry.metrics().event(&envelope, &mut clock);
            if matches!(envelope.event, Event::TurnFinished(_)) {
                // Before anyone sees it, so a message sent on seeing it is taken.
                registry.finishing(handle);
            }
            handle.publish(&envelope);
        }
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
    let (outcome, ()) = tokio::join!(run, forward);
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
            let store = &runtime.store;
            let _ = store.finish_turn(&turn.turn_id, TurnStatus::Failed).await;
            set_idle(registry, &handle.session_id).await;
        }
    }
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
