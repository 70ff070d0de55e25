//! The proxy over real sockets: raw requests on its unix socket, real TCP
//! servers on loopback behind it.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, UnixStream};

use super::{EgressAllowlist, EgressProxy, ProxyLimits, Refusal};

const BODY: &str = "upstream-body";
const WAIT: Duration = Duration::from_secs(10);

/// An HTTP server on loopback that records each request head and answers
/// [`BODY`], one request per connection.
async fn upstream() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut stream = BufReader::new(stream);
                let head = read_head(&mut stream).await;
                seen.lock().unwrap().push(head);
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
                    BODY.len()
                );
                let _ = stream.get_mut().write_all(response.as_bytes()).await;
            });
        }
    });
    (port, heads)
}

/// A TCP echo server on loopback.
async fn echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut read, mut write) = stream.split();
                let _ = tokio::io::copy(&mut read, &mut write).await;
            });
        }
    });
    port
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

struct Running {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    proxy: EgressProxy,
}

fn start(entries: &[String], limits: ProxyLimits) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("proxy.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let list = EgressAllowlist::parse(entries, false).unwrap();
    let proxy = EgressProxy::serve(listener, &socket, list, "s1", limits).unwrap();
    Running {
        _dir: dir,
        socket,
        proxy,
    }
}

async fn client(running: &Running) -> BufReader<UnixStream> {
    BufReader::new(UnixStream::connect(&running.socket).await.unwrap())
}

/// A new connection that has asked for a tunnel to `target`; its answer.
async fn connect(running: &Running, target: &str) -> (BufReader<UnixStream>, (u16, String)) {
    let mut stream = client(running).await;
    let ask = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    stream.get_mut().write_all(ask.as_bytes()).await.unwrap();
    let answer = response(&mut stream).await;
    (stream, answer)
}

async fn read_head(stream: &mut (impl AsyncBufReadExt + Unpin)) -> String {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if stream.read_line(&mut line).await.unwrap_or(0) == 0 || line == "\r\n" {
            return head;
        }
        head.push_str(&line);
    }
}

/// The status and body of the next response on `stream`.
async fn response(stream: &mut BufReader<UnixStream>) -> (u16, String) {
    let head = tokio::time::timeout(WAIT, read_head(stream)).await.unwrap();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no response: {head:?}"));
    let length = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.unwrap();
    (status, String::from_utf8(body).unwrap())
}

/// Whether the proxy closed `stream` (within [`WAIT`]).
async fn closed(stream: &mut BufReader<UnixStream>) -> bool {
    let mut rest = Vec::new();
    matches!(
        tokio::time::timeout(WAIT, stream.read_to_end(&mut rest)).await,
        Ok(Ok(_) | Err(_))
    )
}

fn refusal(host: &str, port: u16) -> impl Fn(&Refusal) -> bool + '_ {
    move |refusal| refusal.host == host && refusal.port == port && !refusal.reason.is_empty()
}

#[tokio::test]
async fn every_plain_request_is_judged_by_its_target_and_sent_with_that_host() {
    let (port, heads) = upstream().await;
    let running = start(&[format!("localhost:{port}")], ProxyLimits::default());
    let mut stream = client(&running).await;
    let first = format!(
        "GET http://localhost:{port}/a?b=1 HTTP/1.1\r\nHost: evil.example\r\n\
         Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nAccept: */*\r\n\r\n"
    );
    stream.get_mut().write_all(first.as_bytes()).await.unwrap();
    assert_eq!(response(&mut stream).await, (200, BODY.to_string()));
    let head = heads.lock().unwrap()[0].to_ascii_lowercase();
    assert!(head.starts_with("get /a?b=1 http/1.1\r\n"), "{head}");
    assert!(
        head.contains(&format!("host: localhost:{port}\r\n")),
        "{head}"
    );
    assert!(!head.contains("evil") && !head.contains("proxy-"), "{head}");
    assert!(head.contains("accept: */*"), "{head}");

    // The same connection, kept alive: the next request is judged afresh,
    // whatever its Host header says.
    let by_address =
        format!("GET http://127.0.0.1:{port}/b HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n");
    stream
        .get_mut()
        .write_all(by_address.as_bytes())
        .await
        .unwrap();
    assert_eq!(response(&mut stream).await.0, 403);
    // Pipelined: both in one write.
    let other = closed_port();
    let pipelined = format!(
        "GET http://localhost:{port}/c HTTP/1.1\r\n\r\n\
         GET http://localhost:{other}/d HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n"
    );
    stream
        .get_mut()
        .write_all(pipelined.as_bytes())
        .await
        .unwrap();
    assert_eq!(response(&mut stream).await.0, 200);
    assert_eq!(response(&mut stream).await.0, 403);
    // Origin form, with a listed Host: not a proxy request, never passed on.
    let origin = format!("GET /e HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n");
    stream.get_mut().write_all(origin.as_bytes()).await.unwrap();
    assert_eq!(response(&mut stream).await.0, 400);

    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 2, "{heads:?}");
    assert!(heads[1].starts_with("GET /c "), "{heads:?}");
    let refusals = running.proxy.refusals().take();
    assert_eq!(refusals.len(), 2, "{refusals:?}");
    assert!(refusals.iter().any(refusal("127.0.0.1", port)));
    assert!(refusals.iter().any(refusal("localhost", other)));
}

#[tokio::test]
async fn connect_tunnels_only_to_listed_names_and_ports() {
    let port = echo().await;
    let running = start(&[format!("localhost:{port}")], ProxyLimits::default());
    let (mut stream, answer) = connect(&running, &format!("localhost:{port}")).await;
    assert_eq!(answer.0, 200);
    stream.get_mut().write_all(b"ping").await.unwrap();
    let mut pong = [0u8; 4];
    stream.read_exact(&mut pong).await.unwrap();
    assert_eq!(&pong, b"ping");

    for target in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{}", port ^ 1),
    ] {
        let (_, (status, body)) = connect(&running, &target).await;
        assert_eq!(status, 403, "{target}: {body}");
        assert!(body.contains("not on the network allowlist"), "{body}");
    }
    assert_eq!(running.proxy.refusals().take().len(), 2);
}

#[tokio::test]
async fn a_listed_host_nobody_answers_is_a_bad_gateway_not_a_refusal() {
    let port = closed_port();
    let running = start(&[format!("localhost:{port}")], ProxyLimits::default());
    let (_, answer) = connect(&running, &format!("localhost:{port}")).await;
    assert_eq!(answer.0, 502);
    assert!(running.proxy.refusals().take().is_empty());
}

fn tight() -> ProxyLimits {
    ProxyLimits {
        max_connections: 2,
        max_header_bytes: 8 * 1024,
        header_timeout: Duration::from_millis(300),
        connect_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_millis(600),
    }
}

#[tokio::test]
async fn heads_are_bounded_in_size_and_time() {
    let (port, heads) = upstream().await;
    let running = start(&[format!("localhost:{port}")], tight());
    let mut stream = client(&running).await;
    let huge = format!(
        "GET http://localhost:{port}/ HTTP/1.1\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(16 * 1024)
    );
    stream.get_mut().write_all(huge.as_bytes()).await.unwrap();
    assert_eq!(response(&mut stream).await.0, 431);
    // A slow loris: half a head, then nothing.
    let mut slow = client(&running).await;
    let half = format!("GET http://localhost:{port}/ HTTP/1.1\r\nX-A: 1\r\n");
    slow.get_mut().write_all(half.as_bytes()).await.unwrap();
    let started = std::time::Instant::now();
    assert!(closed(&mut slow).await);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(heads.lock().unwrap().is_empty());
}

#[tokio::test]
async fn connections_are_capped_and_silent_ones_closed() {
    let port = echo().await;
    let running = start(&[format!("localhost:{port}")], tight());
    let target = format!("localhost:{port}");
    let mut tunnels = Vec::new();
    for _ in 0..2 {
        let (stream, answer) = connect(&running, &target).await;
        assert_eq!(answer.0, 200);
        tunnels.push(stream);
    }
    let mut third = client(&running).await;
    let (status, body) = response(&mut third).await;
    assert_eq!(status, 503, "{body}");
    // Both tunnels stay silent: the idle timeout closes them, and their
    // slots come free.
    for tunnel in &mut tunnels {
        assert!(closed(tunnel).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (_again, answer) = connect(&running, &target).await;
    assert_eq!(answer.0, 200);
}

#[tokio::test]
async fn dropping_the_proxy_ends_its_tunnels_and_removes_its_socket() {
    let port = echo().await;
    let running = start(&[format!("localhost:{port}")], ProxyLimits::default());
    let (mut stream, answer) = connect(&running, &format!("localhost:{port}")).await;
    assert_eq!(answer.0, 200);
    let Running {
        _dir,
        socket,
        proxy,
    } = running;
    drop(proxy);
    assert!(closed(&mut stream).await);
    assert!(!socket.exists());
}
