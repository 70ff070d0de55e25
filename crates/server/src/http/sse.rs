//! `GET /v1/sessions/{id}/events`: the session's events as SSE, replayed from
//! the store after `Last-Event-ID` (or `?after=`), then live, with no gap and
//! no duplicate.
//!
//! The stream subscribes to the session's hub *before* it reads the store, so
//! nothing stored during the replay is missed; live events at or below the
//! last sent `seq` are dropped, and a live event past a gap (say, published
//! out of order) sends the stream back to the store, which already has every
//! published event. A client too slow for the hub's buffer lags: its stream
//! ends, and it reconnects with its last id. The turn never waits for it.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agentd_protocol::EventEnvelope;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{IntoParams, PartialSchema, ToSchema};

use super::AppState;
use super::auth::User;
use super::error::{ApiError, ApiPath, ApiQuery, ApiResult, ErrorBody};
use super::sessions::owned_session;
use crate::metrics::Metrics;
use crate::registry::{EntryHandle, LiveEvent, Registry, Subscriber};
use crate::session::SessionService;

/// Events read from the store per query while replaying.
const REPLAY_PAGE: u32 = 256;
pub const HEARTBEAT: Duration = Duration::from_secs(15);

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Replay events with a greater `seq`; the `Last-Event-ID` header wins
    /// when both are given (browsers send it when they reconnect).
    #[param(pattern = r"^[0-9]{0,19}$", nullable = false)]
    pub after: Option<String>,
}

/// Stream the session's events (SSE): `id: <seq>`, `event: <type>`,
/// `data: <envelope JSON>`, and a comment every 15 s.
#[utoipa::path(get, path = "/v1/sessions/{id}/events", tag = "sessions",
    params(
        ("id" = String, Path, description = "Session id"),
        ("Last-Event-ID" = Option<String>, Header, nullable = false, pattern = r"^[0-9]{0,19}$",
            description = "Resume after this seq"),
        EventsQuery,
    ),
    responses(
        (status = 200, description = "An endless `text/event-stream`: each SSE event is one \
            `EventEnvelope` (see the `StreamedEvent` schema)", content_type = "text/event-stream", body = StreamedEvent),
        (status = 400, description = "Bad `Last-Event-ID` or `after`", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, description = "The user has `max_streams_per_user` streams open; see `Retry-After`", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn events(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<EventsQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let session = owned_session(&state, &user, &id).await?;
    // Both are checked (a bad one is a 400 even when the other wins).
    let after = query
        .after
        .as_deref()
        .map(|value| parse_seq(value, "after"))
        .transpose()?;
    let after = match headers.get("last-event-id") {
        Some(value) => {
            let value = value
                .to_str()
                .map_err(|_| ApiError::BadRequest("Last-Event-ID is not text".into()))?;
            parse_seq(value, "Last-Event-ID")?
        }
        None => after.unwrap_or(0),
    };
    if after > session.last_seq {
        return Err(ApiError::BadRequest(format!(
            "event {after} does not exist: the session's last event is {}",
            session.last_seq
        )));
    }
    let Some(slot) = state.stream_limit.open(&user.name) else {
        state
            .registry
            .metrics()
            .sse_refused
            .fetch_add(1, Ordering::Relaxed);
        return Err(ApiError::TooManyStreams(state.stream_limit.max()));
    };
    let handle = state.registry.handle(&id);
    // Subscribe first: whatever is stored from now on reaches us live.
    let live = handle.subscribe();
    tracing::debug!(session_id = %id, after, "event stream opened");
    let stream = event_stream(
        state.registry.clone(),
        state.streams.clone(),
        handle,
        live,
        after,
    )
    .map(move |outgoing| {
        // The stream holds its user's slot until it ends.
        let _slot = &slot;
        Ok::<_, Infallible>(outgoing.into_sse())
    });
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(HEARTBEAT))
        .into_response();
    // Reverse proxies must pass events on at once.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// One SSE event of the stream, for the OpenAPI document: `data` is an
/// [`EventEnvelope`] as JSON (`contentSchema`, so validators parse it).
pub struct StreamedEvent;

impl utoipa::PartialSchema for StreamedEvent {
    fn schema() -> RefOr<Schema> {
        let string = || ObjectBuilder::new().schema_type(Type::String);
        let types = agentd_protocol::Event::TYPES.iter().map(|(name, _)| *name);
        ObjectBuilder::new()
            .property("id", string().description(Some("The event's `seq`")))
            .property(
                "event",
                string()
                    .description(Some("The event's `type`"))
                    .enum_values(Some(types)),
            )
            .property(
                "data",
                string()
                    .content_media_type("application/json")
                    .content_schema(Some(Ref::from_schema_name(EventEnvelope::name()))),
            )
            .required("id")
            .required("event")
            .required("data")
            .into()
    }
}

impl ToSchema for StreamedEvent {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((EventEnvelope::name().into(), EventEnvelope::schema()));
        EventEnvelope::schemas(schemas);
    }
}

/// A `seq` from a client: digits only, at most 19 of them (SQLite's
/// integers), as the document's pattern says; empty is 0.
fn parse_seq(raw: &str, what: &str) -> ApiResult<u64> {
    if raw.is_empty() {
        return Ok(0);
    }
    let bad = || ApiError::BadRequest(format!("{what} must be an event seq (0 or more)"));
    if raw.len() > 19 || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    raw.parse().map_err(|_| bad())
}

enum Step {
    Live(Arc<LiveEvent>),
    Lagged,
    End,
}

/// Counts open streams for `/metrics`.
struct ClientGuard(Arc<Metrics>);

impl ClientGuard {
    fn new(metrics: Arc<Metrics>) -> Self {
        metrics.sse_clients.fetch_add(1, Ordering::Relaxed);
        Self(metrics)
    }
}

impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.0.sse_clients.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a stream sends: a replayed envelope, or a live event already encoded.
pub(super) enum Outgoing {
    /// Boxed: the variants stay of a size (an envelope's JSON map is an
    /// `IndexMap` when serde_json's `preserve_order` is on, as the ACP crate
    /// turns it on in `agentd`).
    Stored(Box<EventEnvelope>),
    Live(Arc<LiveEvent>),
}

impl Outgoing {
    #[cfg(test)]
    fn seq(&self) -> u64 {
        match self {
            Outgoing::Stored(envelope) => envelope.seq,
            Outgoing::Live(event) => event.seq,
        }
    }

    /// The event itself, for streams that translate it (the AI SDK's).
    pub(super) fn into_envelope(self) -> Option<EventEnvelope> {
        match self {
            Outgoing::Stored(envelope) => Some(*envelope),
            Outgoing::Live(event) => serde_json::from_str(&event.json)
                .inspect_err(|err| tracing::error!(%err, seq = event.seq, "undecodable live event"))
                .ok(),
        }
    }

    fn into_sse(self) -> SseEvent {
        match self {
            Outgoing::Live(event) => SseEvent::default()
                .id(event.seq.to_string())
                .event(event.kind)
                .data(&event.json),
            Outgoing::Stored(envelope) => match serde_json::to_string(&envelope) {
                Ok(json) => SseEvent::default()
                    .id(envelope.seq.to_string())
                    .event(envelope.event.type_name())
                    .data(json),
                Err(err) => SseEvent::default().comment(format!("unencodable event: {err}")),
            },
        }
    }
}

/// The session's events after `after`: stored ones, then live ones, until
/// `stop` is cancelled, the session is deleted or the client lags.
pub(super) fn event_stream(
    registry: Registry,
    stop: CancellationToken,
    handle: EntryHandle,
    mut live: Subscriber,
    after: u64,
) -> impl Stream<Item = Outgoing> {
    async_stream::stream! {
        let metrics = registry.metrics().clone();
        let _client = ClientGuard::new(metrics.clone());
        let sessions = SessionService::new(registry.clone());
        let mut last = after;
        let mut replaying = true;
        loop {
            if replaying {
                let page = match sessions.events_after(&handle.session_id, last, REPLAY_PAGE).await {
                    Ok(page) => page,
                    Err(err) => {
                        tracing::error!(session_id = %handle.session_id, %err, "replay failed");
                        break;
                    }
                };
                replaying = page.len() == REPLAY_PAGE as usize;
                for envelope in page {
                    last = envelope.seq;
                    yield Outgoing::Stored(Box::new(envelope));
                }
                continue;
            }
            // Live events first, so a stream ending at shutdown still sends
            // what the interrupted turns recorded.
            let step = tokio::select! {
                biased;
                received = live.recv() => match received {
                    Ok(event) => Step::Live(event),
                    Err(_lagged) => Step::Lagged,
                },
                () = stop.cancelled() => Step::End,
                () = handle.closed.cancelled() => Step::End,
            };
            match step {
                Step::Live(event) if event.seq <= last => {}
                Step::Live(event) if event.seq == last + 1 => {
                    last = event.seq;
                    yield Outgoing::Live(event);
                }
                // A gap: the store has the missing events (stored before published).
                Step::Live(_) => replaying = true,
                Step::Lagged => {
                    metrics.sse_lagged.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(session_id = %handle.session_id, last, "slow event client dropped");
                    break;
                }
                Step::End => break,
            }
        }
        tracing::debug!(session_id = %handle.session_id, last, "event stream closed");
    }
}

#[cfg(test)]
#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use agentd_protocol::{DeltaKind, Event};
    use futures::StreamExt;
    use tokio_util::sync::CancellationToken;

    use super::{event_stream, parse_seq};
    use crate::config::Config;
    use crate::metrics::Metrics;
    use crate::registry::{HUB_CAPACITY, Registry};
    use crate::runtime::Runtime;

    #[test]
    fn seqs_are_plain_bounded_integers() {
        assert_eq!(parse_seq("42", "x").unwrap(), 42);
        assert!(parse_seq(" 7 ", "x").is_err(), "the pattern has no blanks");
        assert_eq!(parse_seq("", "x").unwrap(), 0);
        for bad in ["-1", "abc", "1e3", "4.2", "99999999999999999999999", "0x10"] {
            assert!(parse_seq(bad, "x").is_err(), "{bad}");
        }
    }

    async fn registry() -> (Registry, String) {
        let (store, session_id) = crate::test_support::store_with_session().await;
        let runtime = Runtime::new(store, Config::default(), "/tmp/unused".into());
        let registry = Registry::new(runtime, Default::default(), Arc::new(Metrics::default()));
        (registry, session_id)
    }

    fn delta(n: u32) -> Event {
        Event::MessageDelta {
            parent_call_id: None,
            turn_id: "t".into(),
            index: 0,
            kind: DeltaKind::Text,
            text: format!("piece {n}"),
        }
    }

    #[tokio::test]
    async fn replay_then_live_without_gap_or_duplicate_even_out_of_order() {
        let (registry, id) = registry().await;
        let store = registry.runtime().store.clone();
        let mut stored = Vec::new();
        for n in 0..600 {
            stored.push(store.append_event(&id, &delta(n)).await.unwrap());
        }
        let handle = registry.handle(&id);
        let live = handle.subscribe();
        let stop = CancellationToken::new();
        let mut stream = Box::pin(event_stream(
            registry.clone(),
            stop.clone(),
            handle,
            live,
            10,
        ));
        // Published twice (replay covers them): dropped as already sent.
        registry.handle(&id).publish(&stored[20]);
        let mut seqs = Vec::new();
        for _ in 0..590 {
            seqs.push(stream.next().await.unwrap().seq());
        }
        // Live: two events published out of order; the stream fills the gap.
        let a = store.append_event(&id, &delta(600)).await.unwrap();
        let b = store.append_event(&id, &delta(601)).await.unwrap();
        registry.handle(&id).publish(&b);
        registry.handle(&id).publish(&a);
        seqs.push(stream.next().await.unwrap().seq());
        seqs.push(stream.next().await.unwrap().seq());
        assert_eq!(seqs, (11..=602).collect::<Vec<u64>>());
        stop.cancel();
        assert!(stream.next().await.is_none(), "ends when stopped");
    }

    #[tokio::test]
    async fn a_client_that_falls_behind_is_dropped_and_the_entry_goes() {
        let (registry, id) = registry().await;
        let store = registry.runtime().store.clone();
        let handle = registry.handle(&id);
        let live = handle.subscribe();
        let mut stream = Box::pin(event_stream(
            registry.clone(),
            CancellationToken::new(),
            handle,
            live,
            0,
        ));
        let publisher = registry.handle(&id);
        let first = store.append_event(&id, &delta(0)).await.unwrap();
        publisher.publish(&first);
        assert_eq!(stream.next().await.unwrap().seq(), 1, "live now");
        // It stops reading while the turn goes on: the turn never waits, and
        // once the client is too far behind its stream ends.
        for n in 1..=(HUB_CAPACITY as u32 + 10) {
            let envelope = store.append_event(&id, &delta(n)).await.unwrap();
            publisher.publish(&envelope);
        }
        assert!(stream.next().await.is_none(), "a lagging client is dropped");
        assert_eq!(
            registry
                .metrics()
                .sse_lagged
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        drop(stream);
        drop(publisher);
        assert_eq!(
            registry.gauges().sessions_live,
            0,
            "no handle left: evicted"
        );
    }
}
