//! The workspace files API against an agent that swaps its files and
//! directories for symlinks while they are served (as parallel subagents
//! can, with `renameat2(RENAME_EXCHANGE)` in a loop): hundreds of reads and
//! listings never show what lies behind a link out of the workspace, and a
//! FIFO is refused at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentd_testkit::swapper::Swapper;
use rustix::fs::CWD;
use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::serve_harness::{Harness, Server};

const MARKER: &str = "MARKER-c4e9: the other side of the swap";
/// Names only the other directory has: a listing showing one looked there.
const OTHER_NAMES: [&str; 2] = ["marker.txt", "other-only.txt"];

/// Names and contents under `dir`, links not followed.
fn state(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
            }
            let content = if meta.is_file() {
                std::fs::read(&path).unwrap()
            } else {
                Vec::new()
            };
            out.insert(path, content);
        }
    }
    out
}

/// `GET …/files/content?path=…`: status and body, in bounded time.
async fn content(server: &Server, id: &str, path: &str) -> (StatusCode, Vec<u8>) {
    let request = server
        .request(Method::GET, &format!("/v1/sessions/{id}/files/content"))
        .query(&[("path", path)])
        .send();
    let response = tokio::time::timeout(Duration::from_secs(10), request)
        .await
        .expect("answered at once")
        .unwrap();
    let status = response.status();
    (status, response.bytes().await.unwrap().to_vec())
}

/// `GET …/files?path=…`: status and body, in bounded time.
async fn listing(server: &Server, id: &str, path: &str) -> (StatusCode, Value) {
    let request = server
        .request(Method::GET, &format!("/v1/sessions/{id}/files"))
        .query(&[("path", path)]);
    tokio::time::timeout(Duration::from_secs(10), server.send(request))
        .await
        .expect("answered at once")
}

#[tokio::test]
async fn files_are_never_served_through_links_swapped_in() {
    let h = Harness::open(json!({"replies": []})).await;
    let server = h.start().await;
    let id = server.session().await;
    let ws = h.data().join("workspaces").join(&id);
    let other = h.data().join("other");
    std::fs::create_dir_all(&other).unwrap();
    for name in OTHER_NAMES.iter().chain(&["f.txt"]) {
        std::fs::write(other.join(name), MARKER).unwrap();
    }
    std::fs::create_dir(ws.join("d")).unwrap();
    std::fs::write(ws.join("a.txt"), "inside a\n").unwrap();
    std::fs::write(ws.join("d/f.txt"), "inside d\n").unwrap();
    symlink(other.join("marker.txt"), ws.join("swap_file")).unwrap();
    symlink(&other, ws.join("swap_dir")).unwrap();
    let other_before = state(&other);

    let flipper = Swapper::start(vec![
        (ws.join("a.txt"), ws.join("swap_file")),
        (ws.join("d"), ws.join("swap_dir")),
    ]);
    let (mut served, mut listed) = (0, 0);
    for _ in 0..300 {
        for path in ["a.txt", "d/f.txt"] {
            let (status, body) = content(&server, &id, path).await;
            let text = String::from_utf8_lossy(&body);
            assert!(!text.contains(MARKER), "{path}: {status} {text}");
            if status == StatusCode::OK {
                assert!(text.starts_with("inside"), "{path}: {text}");
                served += 1;
            } else {
                // Refused while it is a link out (or mid-swap), never more.
                let refused = [StatusCode::FORBIDDEN, StatusCode::NOT_FOUND];
                assert!(refused.contains(&status), "{path}: {status} {text}");
            }
        }
        for path in ["d", "."] {
            let (status, body) = listing(&server, &id, path).await;
            let text = body.to_string();
            for name in OTHER_NAMES {
                assert!(!text.contains(name), "{path}: {text}");
            }
            if status == StatusCode::OK {
                listed += 1;
            } else {
                let refused = [StatusCode::FORBIDDEN, StatusCode::NOT_FOUND];
                assert!(refused.contains(&status), "{path}: {status} {text}");
            }
        }
    }
    let swaps = flipper.finish();
    assert!(swaps > 0, "the flipper never swapped");
    assert!(served > 0 && listed > 0, "{served} {listed}");
    assert_eq!(state(&other), other_before, "the other side changed");
}

#[tokio::test]
async fn a_fifo_is_refused_at_once() {
    let h = Harness::open(json!({"replies": []})).await;
    let server = h.start().await;
    let id = server.session().await;
    let ws = h.data().join("workspaces").join(&id);
    let mode = rustix::fs::Mode::from_raw_mode(0o644);
    rustix::fs::mkfifoat(CWD, ws.join("pipe"), mode).unwrap();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();

    let (status, body) = content(&server, &id, "pipe").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let body: Value = serde_json::from_slice(&body).unwrap();
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("FIFO"), "{body}");
    let (status, body) = listing(&server, &id, "pipe").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = listing(&server, &id, ".").await;
    assert_eq!(status, StatusCode::OK);
    let kinds: Vec<(&str, &str)> = body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds, [("a.txt", "file"), ("pipe", "other")]);
}
