//! What one connection is doing, for its deadlines: a connection must send a
//! request's whole head within the header timeout (counted from its first
//! byte, or from the accept for the first request), and may sit idle between
//! requests for the keep-alive timeout. While a request is in flight (its
//! response, an event stream included, not yet fully sent) nothing expires.
//!
//! hyper's own `header_read_timeout` restarts at every idle moment, so it
//! would also be the keep-alive timeout; the two are kept apart here.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response};
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use super::first_request::Prefix;
use crate::config::server_limits::ConnectionLimits;

pub(super) struct Activity {
    limits: ConnectionLimits,
    state: Mutex<State>,
}

struct State {
    in_flight: u32,
    /// Since when no request has been in flight.
    idle_since: Instant,
    /// A request was served on this connection.
    served: bool,
    /// The first byte of the next request's head arrived then.
    head_started: Option<Instant>,
}

impl Activity {
    pub(super) fn new(limits: ConnectionLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            state: Mutex::new(State {
                in_flight: 0,
                idle_since: Instant::now(),
                served: false,
                head_started: None,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When the connection is to be closed unless something happens; `None`
    /// while a request is in flight.
    pub(super) fn deadline(&self) -> Option<Instant> {
        let state = self.lock();
        if state.in_flight > 0 {
            None
        } else if let Some(started) = state.head_started {
            Some(started + self.limits.header_timeout)
        } else if !state.served {
            Some(state.idle_since + self.limits.header_timeout)
        } else {
            Some(state.idle_since + self.limits.keepalive_idle)
        }
    }

    /// Whether the header timeout (not the keep-alive one) is what runs.
    pub(super) fn awaiting_head(&self) -> bool {
        let state = self.lock();
        state.in_flight == 0 && (state.head_started.is_some() || !state.served)
    }

    /// The connection's first head began arriving at `at` (bytes read
    /// before hyper had the connection).
    pub(super) fn head_started_at(&self, at: Instant) {
        self.lock().head_started = Some(at);
    }

    fn bytes_read(&self) {
        let mut state = self.lock();
        if state.in_flight == 0 && state.head_started.is_none() {
            state.head_started = Some(Instant::now());
        }
    }

    fn begin(self: &Arc<Self>) -> InFlight {
        let mut state = self.lock();
        state.in_flight += 1;
        state.served = true;
        state.head_started = None;
        InFlight(self.clone())
    }
}

/// A request in flight until its response's body is dropped (sent or not).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        if state.in_flight == 0 {
            state.idle_since = Instant::now();
        }
    }
}

/// The connection's socket, noting when a request's first bytes arrive;
/// bytes already read from it (`prefix`) come first.
pub(super) struct WatchedIo<T> {
    pub(super) inner: T,
    pub(super) activity: Arc<Activity>,
    pub(super) prefix: Prefix,
}

impl<T: AsyncRead + Unpin> AsyncRead for WatchedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.prefix.fill(buf) {
            self.activity.bytes_read();
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.bytes_read();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WatchedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The app as hyper calls it, counting requests in flight.
pub(super) struct WatchedService {
    app: TowerToHyperService<Router>,
    activity: Arc<Activity>,
}

impl WatchedService {
    pub(super) fn new(app: Router, activity: Arc<Activity>) -> Self {
        Self {
            app: TowerToHyperService::new(app),
            activity,
        }
    }
}

type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<Response<WatchedBody>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for WatchedService {
    type Response = Response<WatchedBody>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.begin();
        let response = self.app.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| WatchedBody {
                body,
                _in_flight: in_flight,
            }))
        })
    }
}

/// A response body that ends the request's time in flight when dropped.
pub(super) struct WatchedBody {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for WatchedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
