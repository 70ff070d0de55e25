//! `agentd serve`'s connection limits over real TCP: connections that never
//! finish their headers are closed after `header_timeout_s` and the server's
//! descriptors go back to where they were; an idle keep-alive connection is
//! closed after `keepalive_idle_s`; connections over `max_connections` are
//! closed at once; event streams over `max_streams_per_user` answer 429.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;
use serve_harness::{Harness, Server, WAIT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Open descriptors of process `pid`.
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// Room for `n` more descriptors in this process (the server inherits it).
fn raise_fd_limit(n: u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    let want = limit.current.unwrap_or(u64::MAX).max(n);
    if limit.current.is_some_and(|c| c < want) {
        limit.current = Some(limit.maximum.map_or(want, |max| want.min(max)));
        setrlimit(Resource::Nofile, limit).unwrap();
    }
}

fn address(server: &Server) -> String {
    server.url.trim_start_matches("http://").to_string()
}

/// `GET path` on a connection of its own, closed after the answer.
async fn raw_get(server: &Server, path: &str) -> String {
    // A connection closed by the server at once (over the cap) answers "".
    let exchange = async {
        let mut tcp = TcpStream::connect(address(server)).await.unwrap();
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        let _ = tcp.write_all(request.as_bytes()).await;
        String::from_utf8_lossy(&closed(tcp).await).into_owned()
    };
    tokio::time::timeout(WAIT, exchange)
        .await
        .expect("no answer")
}

/// A value of `/metrics`.
async fn metric(server: &Server, name: &str) -> f64 {
    let answer = raw_get(server, "/metrics").await;
    answer
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {answer}"))
        .parse()
        .unwrap()
}

/// Resolves when the server closes `tcp` (EOF or reset); bytes it sent first.
async fn closed(mut tcp: TcpStream) -> Vec<u8> {
    let mut received = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => return received,
            Ok(n) => received.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test]
async fn two_thousand_half_open_connections_are_closed_after_the_header_timeout() {
    const HALF_OPEN: usize = 2000;
    raise_fd_limit(3 * HALF_OPEN as u64 + 1024);
    // Long enough that all 2 000 are open at once even on a busy machine.
    let toml = "[server]\nauth = \"none\"\nheader_timeout_s = 5\n";
    let h = Harness::new(json!({"replies": []}), toml).await;
    let server = h.start().await;
    let pid = server.pid();
    // Warm up: the database's and the runtime's descriptors are open.
    for _ in 0..3 {
        assert!(
            raw_get(&server, "/healthz")
                .await
                .starts_with("HTTP/1.1 200")
        );
    }
    let baseline = fds(pid);

    let mut half_open = Vec::with_capacity(HALF_OPEN);
    for _ in 0..HALF_OPEN {
        let mut tcp = TcpStream::connect(address(&server)).await.unwrap();
        tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        half_open.push(tcp);
    }
    // On a busy machine the server may still be accepting: watch a moment.
    let mut peak = fds(pid);
    let watch = tokio::time::Instant::now() + Duration::from_secs(3);
    while peak <= baseline + HALF_OPEN / 2 && tokio::time::Instant::now() < watch {
        tokio::time::sleep(Duration::from_millis(50)).await;
        peak = peak.max(fds(pid));
    }
    assert!(
        peak > baseline + HALF_OPEN / 2,
        "the connections were not accepted: {baseline} → {peak}"
    );
    // Still answering meanwhile.
    let answer = raw_get(&server, "/healthz").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // Every one of them is closed by the server, with no answer.
    let ends = futures::future::join_all(half_open.into_iter().map(closed));
    let received = tokio::time::timeout(WAIT, ends)
        .await
        .expect("half-open connections stayed open");
    assert!(received.iter().all(Vec::is_empty));

    let deadline = tokio::time::Instant::now() + WAIT;
    // A few more for the database's connections opened meanwhile.
    while fds(pid) > baseline + 10 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "descriptors stayed at {} (baseline {baseline})",
            fds(pid)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let timed_out = metric(&server, "agentd_connections_timed_out_total").await;
    assert!(timed_out >= HALF_OPEN as f64, "{timed_out}");
    assert!(
        raw_get(&server, "/healthz")
            .await
            .starts_with("HTTP/1.1 200")
    );
    assert_eq!(server.terminate().await, 0);
}

#[tokio::test]
async fn keep_alive_connections_and_streams_are_capped() {
    let toml = "[server]\nauth = \"none\"\nheader_timeout_s = 30\nkeepalive_idle_s = 1\n\
                max_connections = 8\nmax_streams_per_user = 2\n";
    let h = Harness::new(json!({"replies": []}), toml).await;
    let server = h.start().await;
    let id = server.session().await;

    // Two streams per user; a third is refused until one ends.
    let first = server.events(&id, None).await;
    let second = server.events(&id, None).await;
    let path = format!("/v1/sessions/{id}/events");
    let refused = server.request(Method::GET, &path).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key("retry-after"));
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_streams", "{body}");
    assert_eq!(metric(&server, "agentd_sse_refused_total").await, 1.0);
    drop(first);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let response = server.request(Method::GET, &path).send().await.unwrap();
        if response.status() == StatusCode::OK {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no stream slot freed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(second);

    // A keep-alive connection that goes quiet after its answer is closed.
    let mut tcp = TcpStream::connect(address(&server)).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let answer = tokio::time::timeout(WAIT, closed(tcp))
        .await
        .expect("the idle connection stayed open");
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));

    // Wait until only the asking connection is open (the client's pool of
    // the stream requests goes after its idle time).
    let deadline = tokio::time::Instant::now() + WAIT;
    while metric(&server, "agentd_connections_open").await > 1.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "connections stayed open"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Twelve connections that send nothing: eight hold every slot, the
    // rest are closed at once, long before the 30 s header timeout.
    let mut held = Vec::new();
    for _ in 0..12 {
        held.push(TcpStream::connect(address(&server)).await.unwrap());
    }
    let verdicts = futures::future::join_all(held.iter_mut().map(|tcp| async move {
        let mut byte = [0u8; 1];
        tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut byte))
            .await
            .is_ok()
    }))
    .await;
    let closed_at_once = verdicts.iter().filter(|closed| **closed).count();
    // One more may go while the asking connection still held its slot.
    assert!(
        (4..=5).contains(&closed_at_once),
        "{closed_at_once} of 12 closed with max_connections = 8"
    );
    drop(held);
    let deadline = tokio::time::Instant::now() + WAIT;
    let refused = loop {
        // Its own connection may come before the held ones are closed.
        let answer = tokio::time::timeout(Duration::from_secs(2), raw_get(&server, "/metrics"))
            .await
            .unwrap_or_default();
        if let Some(value) = answer
            .lines()
            .find_map(|line| line.strip_prefix("agentd_connections_refused_total "))
        {
            break value.parse::<f64>().unwrap();
        }
        assert!(tokio::time::Instant::now() < deadline, "no /metrics");
    };
    assert!(refused >= 4.0, "{refused}");
    assert_eq!(server.terminate().await, 0);
}
