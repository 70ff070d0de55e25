//! `agentd serve` on PostgreSQL while the database goes away mid-turn: the
//! turn ends `failed`, `/healthz` says the database is down, API calls that
//! need the store answer `503 store_unavailable`, and once PostgreSQL is
//! back the server recovers without a restart. Runs its own throwaway
//! cluster (`scripts/postgres.sh` with a private `AGENTD_PG_STATE`), since it
//! stops and starts it. Like `serve_postgres`, it runs where the shared
//! cluster of `make test` runs (`AGENTD_TEST_POSTGRES_URL` set).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use serve_harness::{Harness, Server, WAIT, assert_gapless};
use tokio::process::Command;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/postgres.sh")
}

/// A PostgreSQL cluster of this test only; removed on drop (also used by
/// `serve_shutdown`).
pub(crate) struct Cluster {
    state: PathBuf,
    pub(crate) url: String,
    port: String,
}

impl Cluster {
    /// A cluster of its own (the tests stop it); needs PostgreSQL installed,
    /// which `make test` does and says so with AGENTD_TEST_POSTGRES_URL.
    pub(crate) async fn start() -> Self {
        assert!(
            std::env::var("AGENTD_TEST_POSTGRES_URL").is_ok_and(|u| !u.is_empty()),
            "AGENTD_TEST_POSTGRES_URL is not set: this test needs PostgreSQL installed. \
         Run it via `make test`, or `eval \"$(scripts/postgres.sh start)\"` and export the URL."
        );
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        // Not under a private temp dir: the cluster's owner (not root) must
        // reach it.
        let state =
            std::env::temp_dir().join(format!("agentd-db-down-{}-{nanos}", std::process::id()));
        let out = Command::new(script())
            .arg("start")
            .env("AGENTD_PG_STATE", &state)
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "postgres.sh start failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = stdout
            .lines()
            .find_map(|l| l.strip_prefix("AGENTD_TEST_POSTGRES_URL="))
            .expect("no URL from postgres.sh")
            .trim()
            .to_string();
        let port = url
            .rsplit_once(':')
            .and_then(|(_, rest)| rest.split('/').next())
            .unwrap()
            .to_string();
        Self { state, url, port }
    }

    fn data(&self) -> PathBuf {
        self.state.join("data")
    }

    /// `pg_ctl ARGS` as the cluster's owner.
    async fn pg_ctl(&self, args: &[&str]) {
        let bin = pg_bindir().await;
        let owner = Command::new("stat")
            .args(["-c", "%U"])
            .arg(self.data())
            .output()
            .await
            .unwrap();
        let owner = String::from_utf8_lossy(&owner.stdout).trim().to_string();
        let me = Command::new("id").arg("-un").output().await.unwrap();
        let me = String::from_utf8_lossy(&me.stdout).trim().to_string();
        let pg_ctl = format!("{bin}/pg_ctl");
        let mut cmd = if owner == me {
            Command::new(&pg_ctl)
        } else {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", &owner, "--", &pg_ctl]);
            cmd
        };
        let out = cmd.args(args).output().await.unwrap();
        assert!(
            out.status.success(),
            "pg_ctl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Like a crash: no shutdown checkpoint, connections cut.
    pub(crate) async fn stop(&self) {
        let data = self.data().display().to_string();
        self.pg_ctl(&["-D", &data, "-m", "immediate", "-w", "stop"])
            .await;
    }

    /// Start again on the same port, with the same data.
    async fn restart(&self) {
        let data = self.data().display().to_string();
        let log = self.state.join("server.log").display().to_string();
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off \
             -c synchronous_commit=off -c full_page_writes=off -c max_connections=400",
            self.port,
            self.state.display()
        );
        self.pg_ctl(&[
            "-D", &data, "-l", &log, "-w", "-t", "30", "-o", &options, "start",
        ])
        .await;
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new(script())
            .arg("stop")
            .env("AGENTD_PG_STATE", &self.state)
            .status();
    }
}

/// The newest PostgreSQL's `bin` dir (as `scripts/postgres.sh` picks it).
async fn pg_bindir() -> String {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|bin| bin.join("pg_ctl").exists())
        .collect();
    dirs.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.split('.').next())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    if let Some(dir) = dirs.last() {
        return dir.display().to_string();
    }
    let out = Command::new("sh")
        .args(["-c", "dirname \"$(command -v pg_ctl)\""])
        .output()
        .await
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Poll `path` until `check(status, body)` holds.
async fn poll(server: &Server, path: &str, what: &str, check: impl Fn(StatusCode, &Value) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, body) = server.get(path).await;
        if check(status, &body) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: still {status} {body}\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn postgres_down_mid_turn_fails_the_turn_and_recovers_without_restart() {
    let cluster = Cluster::start().await;
    let toml = format!(
        "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n\
         [database]\nurl = \"{}\"\n",
        cluster.url
    );
    let h = Harness::new(
        json!({"replies": [
            {"when": {"last_user_contains": "slow"}, "content": [
                {"type": "tool_use", "name": "Bash",
                 "input": {"command": "echo started; sleep 4; echo done"}}
            ]},
            {"when": {"last_tool_result_contains": "done"},
             "content": [{"type": "text", "text": "slept well"}]},
            {"when": {"last_user_contains": "again"},
             "content": [{"type": "text", "text": "back again"}]}
        ]}),
        &toml,
    )
    .await;
    let server = h.start().await;

    let (status, health) = server.get("/healthz").await;
    assert_eq!(status, StatusCode::OK, "{health}");
    assert_eq!(health["status"], "ok");
    assert_eq!(health["database"], "up");

    let id = server.session().await;
    let mut events = server.events(&id, None).await;
    let turn_id = server.message(&id, "a slow task").await;
    loop {
        let event = tokio::time::timeout(WAIT, events.next())
            .await
            .expect("no tool output in time")
            .expect("stream ended");
        if event.event == "tool.output" && event.data["text"].as_str().unwrap().contains("started")
        {
            break;
        }
    }
    drop(events);

    cluster.stop().await;

    // Health answers, quickly, with the database down.
    let asked = tokio::time::Instant::now();
    let (status, health) = server.get("/healthz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{health}");
    assert_eq!(health["status"], "degraded");
    assert_eq!(health["database"], "down");
    assert!(health["error"].as_str().is_some_and(|e| !e.is_empty()));
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );

    // API calls that need the store: a clear 5xx JSON error, not a hang.
    let asked = tokio::time::Instant::now();
    let (status, body) = server.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "store_unavailable", "{body}");
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );

    // The turn ends (its events cannot be stored) while the database is down.
    let deadline = tokio::time::Instant::now() + WAIT;
    while !server.log().contains("turn failed in the store") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn did not end: {}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, health) = server.get("/healthz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{health}");

    // PostgreSQL is back: the same server recovers.
    cluster.restart().await;
    poll(
        &server,
        "/healthz",
        "healthz after restart",
        |status, body| status == StatusCode::OK && body["database"] == "up",
    )
    .await;
    let info = server.wait_idle(&id).await;
    assert_eq!(info["running_turn_id"], Value::Null, "{info}");

    let stored = server.all_events(&id).await;
    assert_gapless(&stored);
    let finished: Vec<_> = stored
        .iter()
        .filter(|e| e.event == "turn.finished")
        .collect();
    assert_eq!(finished.len(), 1, "{stored:?}");
    assert_eq!(finished[0].data["turn_id"], turn_id.as_str());
    assert_eq!(finished[0].data["status"], "failed");
    assert_eq!(finished[0].data["error"]["code"], "store_error");

    // The session takes a new message and completes it.
    let mut events = server.events(&id, Some(stored.last().unwrap().id)).await;
    server.message(&id, "try again").await;
    let next = events.until_finished(1).await;
    let done = next.last().unwrap();
    assert_eq!(done.data["status"], "completed", "{}", server.log());
    assert_eq!(done.data["result"], "back again");
    server.terminate().await;
}
