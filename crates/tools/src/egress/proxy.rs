//! The host side of a session's network allowlist: an HTTP proxy on a unix
//! socket (bound into the sandbox, reached through the egress forwarder).
//! Each connection is served by hyper's HTTP/1 server, so every request on
//! it, kept alive or pipelined, is parsed and judged on its own (see the
//! `http` module). Every decision is logged; refusals are also kept for the
//! session's event log ([`NetworkRefusals`]). [`ProxyLimits`] bound what a
//! client may hold.
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::idle::Idle;
use super::{EgressAllowlist, EgressError, NetworkRefusals, ProxyLimits, Refusal};

/// A running proxy; stops, ends its connections and removes its socket
/// when dropped.
#[derive(Debug)]
pub struct EgressProxy {
    socket: PathBuf,
    refusals: NetworkRefusals,
    stop: CancellationToken,
}

/// What every connection of one proxy shares.
#[derive(Debug)]
pub(super) struct Shared {
    list: EgressAllowlist,
    refusals: NetworkRefusals,
    session: String,
    pub(super) limits: ProxyLimits,
    pub(super) stop: CancellationToken,
}

impl EgressProxy {
    /// Serves `listener`, bound at `socket` by the caller (in a directory
    /// of its own that nobody else may enter). Needs a Tokio runtime.
    pub fn serve(
        listener: std::os::unix::net::UnixListener,
        socket: &Path,
        list: EgressAllowlist,
        session: &str,
        limits: ProxyLimits,
    ) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        let listener = UnixListener::from_std(listener)?;
        let refusals = NetworkRefusals::default();
        let stop = CancellationToken::new();
        let shared = Arc::new(Shared {
            list,
            refusals: refusals.clone(),
            session: session.to_string(),
            limits,
            stop: stop.clone(),
        });
        tokio::spawn(accept(listener, shared));
        Ok(Self {
            socket: socket.to_path_buf(),
            refusals,
            stop,
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Where this proxy's refusals collect.
    pub fn refusals(&self) -> NetworkRefusals {
        self.refusals.clone()
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.stop.cancel();
        let _ = std::fs::remove_file(&self.socket);
    }
}

async fn accept(listener: UnixListener, shared: Arc<Shared>) {
    let slots = Arc::new(Semaphore::new(shared.limits.max_connections));
    loop {
        let accepted = tokio::select! {
            () = shared.stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((client, _)) => match slots.clone().try_acquire_owned() {
                Ok(slot) => {
                    tokio::spawn(serve_connection(client, shared.clone(), slot));
                }
                Err(_) => {
                    tracing::warn!(session = %shared.session, max = shared.limits.max_connections, "egress proxy: too many connections; one refused");
                    tokio::spawn(busy(client));
                }
            },
            Err(err) => {
                tracing::warn!(%err, "egress proxy: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// Answers a connection over the limit, without reading from it.
async fn busy(mut client: UnixStream) {
    let body = "agentd refused this connection: too many connections through the proxy at once\n";
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        client.write_all(response.as_bytes()).await?;
        client.shutdown().await
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), write).await;
}

async fn serve_connection(client: UnixStream, shared: Arc<Shared>, slot: OwnedSemaphorePermit) {
    let limits = shared.limits;
    let io = TokioIo::new(Idle::new(client, limits.idle_timeout));
    // A tunnel outlives the HTTP connection it came from: it holds the slot too.
    let slot = Arc::new(slot);
    let service = {
        let shared = shared.clone();
        service_fn(move |request| super::http::handle(request, shared.clone(), slot.clone()))
    };
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_header_size(limits.max_header_bytes)
        .max_buf_size(limits.max_header_bytes.max(8192) * 2)
        .serve_connection(io, service)
        .with_upgrades();
    tokio::select! {
        () = shared.stop.cancelled() => {}
        served = connection => {
            if let Err(err) = served {
                tracing::debug!(%err, session = %shared.session, "egress proxy: connection ended");
            }
        }
    }
}

impl Shared {
    /// Checks `host:port` against the list, resolves it once, and connects
    /// to one of exactly the addresses checked. Logs the decision.
    pub(super) async fn open(&self, host: &str, port: u16) -> Result<TcpStream, EgressError> {
        let result = match self.list.resolve(host, port).await {
            Ok(addrs) => connect(&addrs, host, self.limits).await,
            Err(err) => Err(err),
        };
        let session = &self.session;
        match &result {
            Ok(stream) => {
                let addr = stream.peer_addr().ok();
                tracing::info!(%session, %host, port, ?addr, "egress allowed");
            }
            Err(EgressError::Refused(reason)) => {
                tracing::warn!(%session, %host, port, %reason, "egress refused");
                self.refusals.push(Refusal {
                    host: host.to_string(),
                    port,
                    reason: reason.clone(),
                });
            }
            Err(EgressError::Unreachable(reason)) => {
                tracing::info!(%session, %host, port, %reason, "egress allowed, but unreachable");
            }
        }
        result
    }

    /// Tells the log about a request refused before any host was judged.
    pub(super) fn malformed(&self, reason: &str) {
        tracing::warn!(session = %self.session, %reason, "egress refused: bad request");
    }
}

async fn connect(
    addrs: &[std::net::SocketAddr],
    host: &str,
    limits: ProxyLimits,
) -> Result<TcpStream, EgressError> {
    let mut last = String::new();
    for addr in addrs {
        match tokio::time::timeout(limits.connect_timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(err)) => last = format!("could not connect to {host} ({addr}): {err}"),
            Err(_) => {
                last = format!(
                    "could not connect to {host} ({addr}) within {} s",
                    limits.connect_timeout.as_secs_f64()
                );
            }
        }
    }
    Err(EgressError::Unreachable(last))
}
