//! One turn's UI message stream, read from agentd's own event log (replay,
//! then live, as `GET …/events`): the events from the turn's `turn.started`
//! to its `turn.finished`, or to a permission request still waiting for an
//! answer, as chunks; then `data: [DONE]`. Nothing is kept between streams:
//! a resumed stream is the same replay again.

use std::convert::Infallible;

use agentd_protocol::{Event, EventEnvelope, PendingKind};
use axum::http::{HeaderName, HeaderValue};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde_json::Value;

use super::chunks::Encoder;
use crate::http::AppState;
use crate::http::auth::User;
use crate::http::error::{ApiError, ApiResult};
use crate::http::sse::{HEARTBEAT, event_stream};
use crate::http::stream_limit::StreamSlot;
use crate::session::SessionService;

/// The header that tells the AI SDK the body is a UI message stream.
pub const STREAM_HEADER: &str = "x-vercel-ai-ui-message-stream";

/// Which part of which turn to send.
pub struct TurnCursor {
    pub session_id: String,
    pub turn_id: String,
    /// A seq at or before the turn's `turn.started`.
    pub after: u64,
    /// Send nothing up to this permission request: the client has the
    /// message that far (it answered this approval) and continues it.
    pub continue_after: Option<String>,
}

/// One of the user's stream slots (`max_streams_per_user`), taken before
/// a turn starts: a refused stream starts nothing.
pub fn stream_slot(state: &AppState, user: &User) -> ApiResult<StreamSlot> {
    state.stream_limit.open(&user.name).ok_or_else(|| {
        let refused = &state.registry.metrics().sse_refused;
        refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ApiError::TooManyStreams(state.stream_limit.max())
    })
}

/// The turn's chunks as an SSE response, holding `slot` while it lasts.
pub fn respond(state: &AppState, slot: StreamSlot, cursor: TurnCursor) -> Response {
    let handle = state.registry.handle(&cursor.session_id);
    // Subscribed before the replay reads the store: no event falls between.
    let live = handle.subscribe();
    let events = event_stream(
        state.registry.clone(),
        state.streams.clone(),
        handle,
        live,
        cursor.after,
    )
    .filter_map(|outgoing| async move { outgoing.into_envelope() });
    let chunks = turn_chunks(state.sessions.clone(), cursor, events).map(move |data| {
        let _slot = &slot;
        Ok::<_, Infallible>(SseEvent::default().data(data))
    });
    let mut response = Sse::new(chunks)
        .keep_alive(KeepAlive::new().interval(HEARTBEAT))
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        HeaderName::from_static(STREAM_HEADER),
        HeaderValue::from_static("v1"),
    );
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Each item one SSE `data:` line: a chunk's JSON, or the final `[DONE]`.
fn turn_chunks(
    sessions: SessionService,
    cursor: TurnCursor,
    events: impl Stream<Item = EventEnvelope> + Send + 'static,
) -> impl Stream<Item = String> + Send + 'static {
    async_stream::stream! {
        let mut events = Box::pin(events);
        let mut encoder = Encoder::new(&cursor.turn_id);
        let mut begun = false;
        let mut muted = cursor.continue_after.is_some();
        // Cut short (shutdown, a client too slow) it ends without `[DONE]`,
        // so the client sees the drop and can resume.
        let mut complete = false;
        while let Some(envelope) = events.next().await {
            let event = &envelope.event;
            let ours = turn_of(event).is_some_and(|id| id == cursor.turn_id);
            if !begun {
                // Events before the turn (the search starts a little early).
                if !ours {
                    continue;
                }
                begun = true;
                if !muted {
                    yield encoder.start().to_string();
                }
            }
            let chunks = encoder.event(event);
            let finished = ours && matches!(event, Event::TurnFinished(_));
            if muted && finished {
                // The answered request is not in this turn: send its end at least.
                muted = false;
                yield encoder.start().to_string();
            }
            if !muted {
                for chunk in &chunks {
                    yield chunk.to_string();
                }
            }
            if let Event::PermissionRequested { request_id, parent_call_id: None, .. } = event {
                if muted {
                    if cursor.continue_after.as_deref() == Some(request_id.as_str()) {
                        muted = false;
                        yield encoder.start().to_string();
                    }
                } else if waits(&sessions, &cursor.session_id, request_id).await
                    && chunks.iter().any(is_approval_request)
                {
                    for chunk in encoder.pause() {
                        yield chunk.to_string();
                    }
                    complete = true;
                    break;
                }
            }
            if finished {
                complete = true;
                break;
            }
        }
        if complete {
            yield "[DONE]".to_string();
        }
    }
}

/// The permission request is still open: the turn waits for its answer.
async fn waits(sessions: &SessionService, session_id: &str, request_id: &str) -> bool {
    sessions
        .open_request(session_id, request_id, PendingKind::Permission)
        .await
        .is_ok()
}

fn is_approval_request(chunk: &Value) -> bool {
    chunk["type"] == "tool-approval-request"
}

/// The turn an event names, for the events that name one.
fn turn_of(event: &Event) -> Option<&str> {
    match event {
        Event::TurnStarted { turn_id, .. } => Some(turn_id),
        Event::TurnFinished(finished) => Some(&finished.turn_id),
        _ => None,
    }
}
