//! How long the server spends serving requests (`GET /_testkit/stats`), so that a
//! benchmark can subtract the model server's own time from a client's wall time.
//!
//! A request's service time runs from the moment its handler starts to the moment
//! the last byte of its response body has been handed to hyper: for a body held in
//! memory, when the handler returns; for a streamed body, when the stream ends
//! (or fails, or is dropped because the client went away).

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, BodyDataStream, Bytes, HttpBody};
use axum::response::Response;
use futures::Stream;
use serde::{Deserialize, Serialize};

/// Cumulative service figures of a model server (`/_testkit/…` requests excluded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceStats {
    /// Requests whose response has been handed over completely.
    pub requests: u64,
    /// The sum of those requests' service times, in nanoseconds.
    pub service_ns: u64,
    /// Wall time during which at least one request was being served, in
    /// nanoseconds (overlapping requests counted once), up to the moment of the
    /// snapshot (a request still in flight counts so far).
    pub busy_ns: u64,
    /// Requests being served at the moment of the snapshot.
    pub in_flight: u64,
}

#[derive(Default)]
pub(crate) struct StatsState {
    requests: u64,
    service_ns: u64,
    busy_ns: u64,
    in_flight: u64,
    /// When the current busy period (in_flight > 0) began.
    busy_since: Option<Instant>,
}

/// The counters, shared by the server and its in-flight responses.
#[derive(Default, Clone)]
pub(crate) struct Stats(Arc<Mutex<StatsState>>);

impl Stats {
    fn lock(&self) -> MutexGuard<'_, StatsState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn snapshot(&self) -> ServiceStats {
        let state = self.lock();
        let ongoing = state
            .busy_since
            .map_or(0, |since| nanos(since.elapsed().as_nanos()));
        ServiceStats {
            requests: state.requests,
            service_ns: state.service_ns,
            busy_ns: state.busy_ns.saturating_add(ongoing),
            in_flight: state.in_flight,
        }
    }

    /// Starts timing one request; it is recorded when the timer is dropped.
    pub(crate) fn start(&self) -> Timer {
        let now = Instant::now();
        let mut state = self.lock();
        if state.in_flight == 0 {
            state.busy_since = Some(now);
        }
        state.in_flight += 1;
        Timer {
            stats: self.clone(),
            started: now,
        }
    }
}

fn nanos(n: u128) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// One request being served; dropping it records the request.
pub(crate) struct Timer {
    stats: Stats,
    started: Instant,
}

impl Timer {
    /// Records the request once `response`'s body has been handed over: now for
    /// a body of known size (already in memory), at the end of the stream otherwise.
    pub(crate) fn finish(self, response: Response) -> Response {
        if response.body().size_hint().exact().is_some() {
            drop(self);
            return response;
        }
        let (parts, body) = response.into_parts();
        let timed = Timed {
            inner: body.into_data_stream(),
            timer: Some(self),
        };
        Response::from_parts(parts, Body::from_stream(timed))
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        let now = Instant::now();
        let mut state = self.stats.lock();
        state.requests += 1;
        state.service_ns = state
            .service_ns
            .saturating_add(nanos((now - self.started).as_nanos()));
        state.in_flight = state.in_flight.saturating_sub(1);
        if state.in_flight == 0
            && let Some(since) = state.busy_since.take()
        {
            state.busy_ns = state
                .busy_ns
                .saturating_add(nanos((now - since).as_nanos()));
        }
    }
}

/// A response body stream that records its request when it ends.
struct Timed {
    inner: BodyDataStream,
    timer: Option<Timer>,
}

impl Stream for Timed {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = Pin::new(&mut self.inner).poll_next(cx);
        if let Poll::Ready(None | Some(Err(_))) = &polled {
            // The last byte (or the cut) has been handed over.
            self.timer = None;
        }
        polled
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::ServiceStats;
    use crate::ModelServer;

    async fn stats(client: &reqwest::Client, url: &str) -> ServiceStats {
        let got = client
            .get(format!("{url}/_testkit/stats"))
            .send()
            .await
            .unwrap();
        assert_eq!(got.status(), 200);
        got.json().await.unwrap()
    }

    #[tokio::test]
    async fn each_served_call_adds_one_request_and_some_time() {
        let script = serde_json::from_value(json!({"replies": [
            {"repeat": true, "content": [{"type": "text", "text": "hello from the script"}]}
        ]}))
        .unwrap();
        let server = ModelServer::start(script).await.unwrap();
        let url = server.url();
        let client = reqwest::Client::new();
        let zero = stats(&client, &url).await;
        assert_eq!(zero, ServiceStats::default());

        let mut before = zero;
        for stream in [true, false] {
            let body = json!({"model": "m", "max_tokens": 64, "stream": stream,
                "messages": [{"role": "user", "content": "hi"}]});
            let response = client
                .post(format!("{url}/v1/messages"))
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            let text = response.text().await.unwrap();
            assert!(text.contains("scripted"), "{text}");
            // The body's end reaches hyper before the client sees it, but the
            // stats request may still race the timer's drop: wait for it.
            let mut after = stats(&client, &url).await;
            while after.in_flight > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                after = stats(&client, &url).await;
            }
            assert_eq!(after.requests, before.requests + 1, "stream: {stream}");
            assert!(after.service_ns > before.service_ns, "stream: {stream}");
            assert!(after.busy_ns > before.busy_ns, "stream: {stream}");
            before = after;
        }

        // A probe with an in-memory body counts too; the stats route does not.
        client.head(&url).send().await.unwrap();
        let after = stats(&client, &url).await;
        assert_eq!(after.requests, before.requests + 1);
        assert!(after.service_ns > before.service_ns);
        assert_eq!(server.stats(), after);
        assert!(
            server
                .requests()
                .iter()
                .all(|r| !r.path.starts_with("/_testkit"))
        );
    }
}
