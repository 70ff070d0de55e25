//! A profile's network allowlist over the real HTTP API: real bubblewrap,
//! real curl inside it, real HTTP and TLS servers on the host's loopback.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::serve_harness::{Harness, SseEvent};

pub(crate) const BODY: &str = "hello-from-the-host";

/// The reply to the first prompt runs `command`; the next one ends the turn.
fn one_command(command: &str) -> Value {
    json!({"replies": [
        {"when": {"last_user_contains": "go"}, "content": [
            {"type": "tool_use", "id": "net_call_1", "name": "Bash", "input": {"command": command}}
        ]},
        {"when": {"last_tool_name": "Bash"}, "content": [{"type": "text", "text": "done"}]}
    ]})
}

pub(crate) fn toml(network: &str) -> String {
    format!(
        "[server]\nauth = \"none\"\n\
         [profiles.default]\nallow = [\"Bash\"]\nnetwork = {network}\n"
    )
}

/// An HTTP server on 127.0.0.1 answering every request with [`BODY`];
/// with `tls`, over TLS with that certificate.
pub(crate) fn http_server(tls: Option<Arc<rustls::ServerConfig>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let tls = tls.clone();
            std::thread::spawn(move || match tls {
                None => answer(stream),
                Some(config) => {
                    let Ok(conn) = rustls::ServerConnection::new(config) else {
                        return;
                    };
                    answer(rustls::StreamOwned::new(conn, stream));
                }
            });
        }
    });
    port
}

fn answer(mut stream: impl Read + Write) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    let _ = stream.write_all(response.as_bytes());
    let _ = stream.flush();
}

/// A self-signed certificate for `localhost` (written as `cert.pem` into
/// `dir`) and a TLS config serving it.
fn tls_config(dir: &Path) -> Arc<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl (scripts/install-deps.sh installs it)");
    assert!(status.success());
    let certs = vec![CertificateDer::from_pem_file(&cert).unwrap()];
    let key = PrivateKeyDer::from_pem_file(&key).unwrap();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    Arc::new(config)
}

/// Runs one turn with `command` under `network` and returns its events.
pub(crate) async fn run(network: &str, command: &str) -> Vec<SseEvent> {
    let h = Harness::new(one_command(command), &toml(network)).await;
    let server = h.start().await;
    let session = server.session().await;
    server.message(&session, "go").await;
    server.wait_idle(&session).await;
    let events = server.all_events(&session).await;
    let finished = events.last().unwrap();
    assert_eq!(finished.data["status"], "completed", "{:?}", finished.data);
    events
}

pub(crate) fn tool_output(events: &[SseEvent]) -> String {
    events
        .iter()
        .find(|e| e.event == "tool.finished")
        .map(|e| e.data["output"].as_str().unwrap().to_string())
        .expect("a tool.finished event")
}

fn refused(events: &[SseEvent]) -> Vec<(String, u64)> {
    events
        .iter()
        .filter(|e| e.event == "network.refused")
        .map(|e| {
            assert!(e.data["reason"].as_str().is_some_and(|r| !r.is_empty()));
            assert_eq!(e.data["call_id"], "net_call_1");
            let host = e.data["host"].as_str().unwrap().to_string();
            (host, e.data["port"].as_u64().unwrap())
        })
        .collect()
}

#[tokio::test]
async fn only_listed_names_and_ports_get_out_and_refusals_are_events() {
    let (port, other) = (http_server(None), http_server(None));
    let command = format!(
        "curl -fsS http://localhost:{port}/ && echo ' named-ok'; \
         curl -fsS http://127.0.0.1:{port}/ || echo by-address-refused; \
         curl -fsS http://localhost:{other}/ || echo other-port-refused; \
         echo \"no_proxy=[$NO_PROXY]\"; \
         python3 -c 'import urllib.request as u; print(u.urlopen(\"http://localhost:{port}/\").read().decode(), \"py-ok\")'"
    );
    let network = format!("{{ allow = [\"localhost:{port}\"] }}");
    let events = run(&network, &command).await;
    let output = tool_output(&events);
    assert!(output.contains(&format!("{BODY} named-ok")), "{output}");
    assert!(output.contains("by-address-refused"), "{output}");
    assert!(output.contains("other-port-refused"), "{output}");
    assert!(output.contains("no_proxy=[]"), "{output}");
    assert!(output.contains(&format!("{BODY} py-ok")), "{output}");
    assert_eq!(output.matches(BODY).count(), 2, "{output}");
    let refused = refused(&events);
    assert!(
        refused.contains(&("127.0.0.1".into(), u64::from(port))),
        "{refused:?}"
    );
    assert!(
        refused.contains(&("localhost".into(), u64::from(other))),
        "{refused:?}"
    );
    assert_eq!(refused.len(), 2, "{refused:?}");
}

#[tokio::test]
async fn https_to_a_listed_name_tunnels_through_the_proxy() {
    let dir = tempfile::TempDir::new().unwrap();
    let port = http_server(Some(tls_config(dir.path())));
    // The command puts the certificate into the workspace first.
    let cert = std::fs::read_to_string(dir.path().join("cert.pem")).unwrap();
    let command = format!(
        "cat > cert.pem <<'PEM'\n{cert}PEM\n\
         curl -fsS --cacert cert.pem https://localhost:{port}/ && echo ' tls-ok'; \
         curl -fsS --cacert cert.pem https://localhost:{}/ || echo tls-other-refused",
        port.wrapping_add(1)
    );
    let network = format!("{{ allow = [\"localhost:{port}\"] }}");
    let events = run(&network, &command).await;
    let output = tool_output(&events);
    assert!(output.contains(&format!("{BODY} tls-ok")), "{output}");
    assert!(output.contains("tls-other-refused"), "{output}");
    let refused = refused(&events);
    assert_eq!(
        refused,
        [("localhost".to_string(), u64::from(port.wrapping_add(1)))]
    );
}

#[tokio::test]
async fn without_network_nothing_gets_out() {
    let port = http_server(None);
    let command = format!(
        "curl -fsS --max-time 20 http://localhost:{port}/ || echo no-way-out; \
         curl -fsS --max-time 20 http://127.0.0.1:{port}/ || echo no-way-out-either; \
         echo \"proxy=[$HTTP_PROXY$http_proxy$HTTPS_PROXY]\"; \
         test -e /run/agentd/egress.sock && echo has-socket || echo no-socket"
    );
    let events = run("false", &command).await;
    let output = tool_output(&events);
    assert!(!output.contains(BODY), "{output}");
    assert!(output.contains("no-way-out"), "{output}");
    assert!(output.contains("no-way-out-either"), "{output}");
    assert!(output.contains("proxy=[]"), "{output}");
    assert!(output.contains("no-socket"), "{output}");
    assert!(refused(&events).is_empty());
}
