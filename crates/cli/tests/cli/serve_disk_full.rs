//! `agentd serve` (SQLite) on a data dir that fills up: a message is refused
//! with `503 store_unavailable`, or accepted and its turn's end recorded once
//! space returns; never a `202` followed by silence. `/healthz` says
//! `degraded` while the disk is full. The data dir is a small tmpfs mounted
//! by the test (it runs as root).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use serve_harness::{Harness, Server, WAIT, assert_gapless, words};

/// A tmpfs of `size` mounted at `dir`; unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700")])
            .arg("tmpfs")
            .arg(dir)
            .status()
            .unwrap();
        assert!(status.success(), "mounting a tmpfs needs root");
        Self(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Write `path` until the file system is full.
fn fill(path: &Path) {
    let mut file = std::fs::File::create(path).unwrap();
    for chunk in [1 << 20, 1 << 12, 1] {
        let zeros = vec![0u8; chunk];
        while file.write_all(&zeros).is_ok() {}
    }
    let _ = file.sync_all();
}

/// The session's `turn.finished` events, from the store.
async fn finished(server: &Server, session: &str) -> Vec<Value> {
    let stored = server.all_events(session).await;
    assert_gapless(&stored);
    stored
        .into_iter()
        .filter(|e| e.event == "turn.finished")
        .map(|e| e.data)
        .collect()
}

#[tokio::test]
async fn a_full_data_dir_refuses_messages_or_records_their_end_once_space_returns() {
    let toml = "[server]\nauth = \"none\"\nmin_free_disk_mb = 1\n\
                [profiles.default]\nmode = \"bypass\"\ncheckpoints = false\n";
    let h = Harness::new(
        json!({"replies": [
            {"when": {"last_user_contains": "slow"}, "repeat": true, "delay_ms": 20,
             "content": [{"type": "text", "text": words(400)}]},
            {"when": {"last_user_contains": "quick"}, "repeat": true,
             "content": [{"type": "text", "text": "quick answer"}]}
        ]}),
        toml,
    )
    .await;
    let dir = h.data().join("small");
    let _tmpfs = Tmpfs::mount(&dir, "24m");
    let server = h.start_node("small").await;

    let (status, health) = server.get("/healthz").await;
    assert_eq!(status, StatusCode::OK, "{health}");
    assert_eq!(health["status"], "ok");
    let (first, second) = (server.session().await, server.session().await);

    // A turn accepted before the disk fills, still streaming when it does.
    let mut events = server.events(&first, None).await;
    let slow = server.message(&first, "a slow answer").await;
    while events.next().await.expect("stream ended").event != "message.delta" {}
    let filler = dir.join("filler");
    fill(&filler);

    let (status, health) = server.get("/healthz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{health}");
    assert_eq!(health["status"], "degraded", "{health}");
    let failing = health["failing"].as_array().unwrap();
    assert!(failing.contains(&json!("disk_space")), "{health}");
    assert!(health["error"].as_str().is_some_and(|e| !e.is_empty()));

    // A message while full: refused, or accepted and recorded later.
    let (status, body) = server
        .post(
            &format!("/v1/sessions/{second}/messages"),
            json!({"content": "a quick one"}),
        )
        .await;
    let accepted_while_full = match status {
        StatusCode::SERVICE_UNAVAILABLE => {
            assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
            None
        }
        StatusCode::ACCEPTED => Some(body["turn_id"].as_str().unwrap().to_string()),
        other => panic!("{other} {body}"),
    };

    // The slow turn cannot record its end while the disk is full: its
    // session stays busy rather than going idle with the turn unrecorded.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_, info) = server.get(&format!("/v1/sessions/{first}")).await;
    let ended = finished(&server, &first).await;
    assert!(
        info["status"] == "running" || ended.iter().any(|f| f["turn_id"] == slow.as_str()),
        "idle with its turn unrecorded: {info}\n{}",
        server.log()
    );

    // Space returns: every accepted turn ends, recorded.
    std::fs::remove_file(&filler).unwrap();
    server.wait_idle(&first).await;
    let ended = finished(&server, &first).await;
    let slow_end: Vec<_> = ended
        .iter()
        .filter(|f| f["turn_id"] == slow.as_str())
        .collect();
    assert_eq!(slow_end.len(), 1, "{ended:?}\n{}", server.log());
    let status = slow_end[0]["status"].as_str().unwrap();
    assert!(status == "failed" || status == "completed", "{ended:?}");
    if status == "failed" {
        assert_eq!(slow_end[0]["error"]["code"], "store_error", "{ended:?}");
    }
    if let Some(turn_id) = accepted_while_full {
        server.wait_idle(&second).await;
        let ended = finished(&server, &second).await;
        let count = ended
            .iter()
            .filter(|f| f["turn_id"] == turn_id.as_str())
            .count();
        assert_eq!(count, 1, "{ended:?}\n{}", server.log());
    }

    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, health) = server.get("/healthz").await;
        if status == StatusCode::OK {
            assert_eq!(health["database"], "up", "{health}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{health}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The same server goes on, without a restart.
    let mut events = server.events(&second, None).await;
    server.message(&second, "quick please").await;
    let done = loop {
        let event = events.next().await.expect("stream ended");
        if event.event == "turn.finished" && event.data["result"] == "quick answer" {
            break event;
        }
    };
    assert_eq!(done.data["status"], "completed", "{}", server.log());
    drop(events);
    assert_eq!(server.terminate().await, 0);
}
