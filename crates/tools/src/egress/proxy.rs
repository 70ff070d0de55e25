//! The host side of a session's network allowlist: an HTTP proxy on a unix
//! socket (bound into the sandbox, reached through the egress forwarder).
//! `CONNECT host:port` tunnels (HTTPS) and absolute-URI requests (plain
//! HTTP) are let through only to hosts the list permits, at addresses it
//! permits: names are resolved here and the connection goes to exactly the
//! vetted addresses. Every decision is logged; refusals are also kept for
//! the session's event log ([`NetworkRefusals`]).
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};

use super::{EgressAllowlist, NetworkRefusals, Refusal};

/// The largest request head the proxy reads.
const MAX_HEAD: usize = 64 * 1024;

/// A running proxy; stops and removes its socket when dropped.
#[derive(Debug)]
pub struct EgressProxy {
    socket: PathBuf,
    refusals: NetworkRefusals,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Debug, Clone)]
struct Shared {
    list: Arc<EgressAllowlist>,
    refusals: NetworkRefusals,
    session: String,
}

impl EgressProxy {
    /// Listens at `socket` (replacing a stale one), open to any local user:
    /// a sandbox may run as another uid, and the socket's directory is what
    /// keeps others out.
    pub fn start(socket: &Path, list: EgressAllowlist, session: &str) -> io::Result<Self> {
        let _ = std::fs::remove_file(socket);
        let listener = UnixListener::bind(socket)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o666))?;
        let refusals = NetworkRefusals::default();
        let shared = Shared {
            list: Arc::new(list),
            refusals: refusals.clone(),
            session: session.to_string(),
        };
        let task = tokio::spawn(accept(listener, shared));
        Ok(Self {
            socket: socket.to_path_buf(),
            refusals,
            task,
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
        self.task.abort();
        let _ = std::fs::remove_file(&self.socket);
    }
}

async fn accept(listener: UnixListener, shared: Shared) {
    loop {
        match listener.accept().await {
            Ok((client, _)) => {
                tokio::spawn(handle(client, shared.clone()));
            }
            Err(err) => {
                tracing::warn!(%err, "egress proxy: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// What a client asked for.
struct Request {
    host: String,
    port: u16,
    /// `None` for a CONNECT tunnel; else the head to send upstream.
    forward_head: Option<Vec<u8>>,
}

async fn handle(mut client: UnixStream, shared: Shared) {
    let (head, rest) = match read_head(&mut client).await {
        Ok(read) => read,
        Err(err) => {
            tracing::debug!(%err, "egress proxy: unreadable request");
            return;
        }
    };
    let request = match parse_request(&head) {
        Ok(request) => request,
        Err(reason) => {
            let _ = respond(&mut client, "400 Bad Request", &reason).await;
            return;
        }
    };
    let upstream = match connect(&shared.list, &request.host, request.port).await {
        Ok(upstream) => upstream,
        Err(reason) => {
            tracing::warn!(session = %shared.session, host = %request.host, port = request.port, %reason, "egress refused");
            shared.refusals.push(Refusal {
                host: request.host.clone(),
                port: request.port,
                reason: reason.clone(),
            });
            let _ = respond(&mut client, "403 Forbidden", &reason).await;
            return;
        }
    };
    tracing::info!(session = %shared.session, host = %request.host, port = request.port, "egress allowed");
    let _ = relay(client, upstream, request.forward_head, &rest).await;
}

async fn relay(
    mut client: UnixStream,
    mut upstream: TcpStream,
    forward_head: Option<Vec<u8>>,
    rest: &[u8],
) -> io::Result<()> {
    match forward_head {
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await?
        }
        Some(head) => upstream.write_all(&head).await?,
    }
    upstream.write_all(rest).await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// Checks `host:port` against the list, resolves it, checks every address
/// and connects to the first that answers.
async fn connect(list: &EgressAllowlist, host: &str, port: u16) -> Result<TcpStream, String> {
    let permit = list.permits(host, port)?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((bare, port))
        .await
        .map_err(|err| format!("could not resolve {host}: {err}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("could not resolve {host}: no addresses"));
    }
    for addr in &addrs {
        list.check_addr(permit, host, addr.ip())?;
    }
    let mut last = String::new();
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(stream) => return Ok(stream),
            Err(err) => last = format!("could not connect to {host} ({addr}): {err}"),
        }
    }
    Err(last)
}

/// The request head (through the blank line) and whatever came after it.
async fn read_head(client: &mut UnixStream) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let read = client.read(&mut chunk).await?;
        if read == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed"));
        }
        buf.extend_from_slice(&chunk[..read]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::other("request head too large"));
        }
    }
}

fn parse_request(head: &[u8]) -> Result<Request, String> {
    let text = std::str::from_utf8(head).map_err(|_| "request head is not UTF-8".to_string())?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("bad request line {first:?}"));
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        let url = url::Url::parse(&format!("tcp://{target}"))
            .map_err(|_| format!("bad CONNECT target {target:?}"))?;
        let (Some(host), Some(port)) = (url.host_str(), url.port()) else {
            return Err(format!("CONNECT target {target:?} needs host:port"));
        };
        return Ok(Request {
            host: host.to_string(),
            port,
            forward_head: None,
        });
    }
    let url = url::Url::parse(target)
        .ok()
        .filter(|url| url.scheme() == "http")
        .ok_or_else(|| {
            format!("only http:// URLs and CONNECT go through this proxy, not {target:?}")
        })?;
    let host = url.host_str().ok_or("the URL has no host")?.to_string();
    let port = url.port_or_known_default().unwrap_or(80);
    let path = &url[url::Position::BeforePath..];
    let mut out = format!("{method} {path} {version}\r\n");
    for line in lines.filter(|line| !line.is_empty()) {
        let name = line
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        // One request per upstream connection: the next may be for another host.
        if !matches!(
            name.as_str(),
            "connection" | "proxy-connection" | "proxy-authorization" | "keep-alive"
        ) {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok(Request {
        host,
        port,
        forward_head: Some(out.into_bytes()),
    })
}

async fn respond(client: &mut UnixStream, status: &str, reason: &str) -> io::Result<()> {
    let body = format!("agentd refused this connection: {reason}\n");
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_requests_become_origin_form_for_one_request() {
        let head = b"GET http://Example.org:8080/a?b=1 HTTP/1.1\r\nHost: example.org:8080\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n";
        let request = parse_request(head).unwrap();
        assert_eq!((request.host.as_str(), request.port), ("example.org", 8080));
        let head = String::from_utf8(request.forward_head.unwrap()).unwrap();
        assert_eq!(
            head,
            "GET /a?b=1 HTTP/1.1\r\nHost: example.org:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn connect_targets_and_bad_requests() {
        let request = parse_request(b"CONNECT pypi.org:443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((request.host.as_str(), request.port), ("pypi.org", 443));
        assert!(request.forward_head.is_none());
        let v6 = parse_request(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("[::1]", 8443));
        assert!(parse_request(b"CONNECT pypi.org HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_request(b"GET /relative HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_request(b"GET ftp://x/ HTTP/1.1\r\n\r\n").is_err());
    }
}
