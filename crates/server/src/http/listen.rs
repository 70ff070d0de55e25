//! The accept loop of `agentd serve`: HTTP/1.1 connections, and HTTP/2 ones
//! with prior knowledge (h2c: many event streams over one connection),
//! served by hyper (except an HTTP/1.1 connection whose first request is an
//! event stream: `stream_conn` serves that one without hyper's buffers), each closed when it misses its header or keep-alive deadline (see
//! `conn_watch`), at most `max_connections` open at once (more are closed at
//! once, counted), and a graceful stop: no new connections, idle ones closed,
//! in-flight requests and event streams finished.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::conn_watch::{Activity, WatchedIo, WatchedService};
use super::first_request::{self, First, Prefix};
use super::stream_conn;
use crate::config::server_limits::ConnectionLimits;
use crate::metrics::Metrics;

/// Serve `app` on `listener` until `stop` is cancelled, then until every
/// connection has closed; `cut` closes them all at once.
pub(super) async fn serve_connections(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
    cut: CancellationToken,
) {
    let connections = TaskTracker::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(err) => {
                // Out of descriptors and the like: wait rather than spin.
                if !is_connection_error(&err) {
                    tracing::error!(%err, "accepting a connection failed");
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(Duration::from_millis(200)) => {}
                    }
                }
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            metrics.connections_refused.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                max_connections = limits.max_connections,
                "connection refused: too many open"
            );
            continue;
        };
        // SSE is many small writes: without TCP_NODELAY, Nagle delays them.
        let _ = tcp.set_nodelay(true);
        let connection = serve_one(
            tcp,
            app.clone(),
            limits,
            metrics.clone(),
            stop.clone(),
            cut.clone(),
            slot,
        );
        connections.spawn(connection);
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// Errors of one connection (not of the listener): try the next one.
fn is_connection_error(err: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        err.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// Counts an open connection for `/metrics`, and holds its slot.
struct Open {
    metrics: Arc<Metrics>,
    _slot: OwnedSemaphorePermit,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.metrics
            .connections_open
            .fetch_sub(1, Ordering::Relaxed);
    }
}

async fn serve_one(
    mut tcp: TcpStream,
    app: Router,
    limits: ConnectionLimits,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
    cut: CancellationToken,
    slot: OwnedSemaphorePermit,
) {
    metrics.connections_open.fetch_add(1, Ordering::Relaxed);
    let _open = Open {
        metrics: metrics.clone(),
        _slot: slot,
    };
    let accepted = tokio::time::Instant::now();
    let first = tokio::select! {
        first = first_request::read(&mut tcp, accepted + limits.header_timeout, &stop) => first,
        () = cut.cancelled() => return,
    };
    let prefix = match first {
        First::EventStream(request) => {
            return stream_conn::serve(tcp, *request, app, cut).await;
        }
        First::Other(prefix) => prefix,
        First::Gone => return,
        First::TimedOut => {
            metrics
                .connections_timed_out
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    let activity = Activity::new(limits);
    // The first head's deadline still counts from the accept.
    activity.head_started_at(accepted);
    let io = WatchedIo {
        inner: tcp,
        activity: activity.clone(),
        prefix: Prefix::new(prefix),
    };
    // Boxed: a connection serving an event stream itself holds no room for
    // hyper's connection state.
    Box::pin(serve_hyper(io, app, limits, activity, metrics, stop, cut)).await;
}

async fn serve_hyper(
    io: WatchedIo<TcpStream>,
    app: Router,
    limits: ConnectionLimits,
    activity: Arc<Activity>,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
    cut: CancellationToken,
) {
    let io = TokioIo::new(io);
    let service = WatchedService::new(app, activity.clone());
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http2()
        .max_concurrent_streams(limits.http2_max_streams);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let mut stopping = false;
    loop {
        // While a request is in flight, look again a header timeout later.
        let wake = activity
            .deadline()
            .unwrap_or_else(|| tokio::time::Instant::now() + limits.header_timeout);
        // The connection first: a request already read (put back in front of
        // the socket) is taken before a stop can cancel hyper's version sniffing.
        tokio::select! {
            biased;
            served = connection.as_mut() => {
                if let Err(err) = served {
                    tracing::debug!(%err, "connection ended with an error");
                }
                return;
            }
            () = tokio::time::sleep_until(wake) => {
                let expired = activity
                    .deadline()
                    .is_some_and(|deadline| deadline <= tokio::time::Instant::now());
                if expired {
                    if activity.awaiting_head() {
                        metrics.connections_timed_out.fetch_add(1, Ordering::Relaxed);
                    }
                    // Dropping the connection closes the socket.
                    return;
                }
            }
            () = cut.cancelled() => return,
            () = stop.cancelled(), if !stopping => {
                stopping = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}
