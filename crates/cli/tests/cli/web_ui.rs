//! The web UI in a real browser: a real `agentd serve` (against the testkit
//! model server) and `node web/e2e/run.mjs`, which drives headless Debian
//! chromium through playwright-core and exits 0 when every scenario passed.
//!
//! The scenarios, the model's script (`web/e2e/script.json`, as in the other
//! tests) and the server's `agentd.toml` (`web/e2e/agentd.toml`, `{URL}` is
//! the model server; default: token authentication) live with the UI in
//! `web/e2e/`. `run.mjs` gets `AGENTD_URL`, `AGENTD_TOKEN` (an API token of
//! `AGENTD_USER`), `AGENTD_DATA_DIR`, `AGENTD_E2E_OUT` (screenshots:
//! `target/ui-screenshots`), `CHROMIUM` and `NODE_PATH` (`.tools/node_modules`).
//! Missing chromium, node or playwright-core fail the test: `bash
//! scripts/install-deps.sh` installs them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use serve_harness::Harness;
use tokio::process::Command;

/// The whole browser run, scenarios included.
const E2E_TIMEOUT: Duration = Duration::from_secs(300);
const CHROMIUM: &str = "/usr/bin/chromium";
const USER: &str = "alice";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// What the browser run needs; a message naming what is missing.
fn missing_tools(repo: &Path) -> Vec<String> {
    let mut missing = Vec::new();
    if !Path::new(CHROMIUM).is_file() {
        missing.push(format!("chromium ({CHROMIUM})"));
    }
    let node = std::process::Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !node.is_ok_and(|s| s.success()) {
        missing.push("node".into());
    }
    let playwright = repo.join(".tools/node_modules/playwright-core/package.json");
    if !playwright.is_file() {
        missing.push(format!("playwright-core ({})", playwright.display()));
    }
    missing
}

/// End a browser run that took too long, and the browser it started (it
/// runs in its own process group).
fn kill_group(child: &tokio::process::Child) {
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &format!("-{pid}")])
            .status();
    }
}

/// The repository, once chromium, node and playwright-core are known to be
/// there; fails `test` (what needs them) with what is missing otherwise.
fn repo_with_browser(test: &str) -> PathBuf {
    let repo = repo();
    let missing = missing_tools(&repo);
    assert!(
        missing.is_empty(),
        "{test} needs {}: run bash scripts/install-deps.sh",
        missing.join(", ")
    );
    repo
}

#[tokio::test]
async fn the_web_ui_passes_its_browser_scenarios() {
    let repo = repo_with_browser("the web UI test");
    let e2e = repo.join("web/e2e");
    let script: Value = match std::fs::read_to_string(e2e.join("script.json")) {
        Ok(text) => serde_json::from_str(&text).expect("web/e2e/script.json is not JSON"),
        Err(_) => json!({"replies": []}),
    };
    let toml = std::fs::read_to_string(e2e.join("agentd.toml"))
        .unwrap_or_else(|_| "[server]\nauth = \"token\"\n".into());

    // The project web/e2e/agentd.toml names, outside the data dir.
    let project = tempfile::TempDir::new().unwrap();
    let toml = toml.replace("{PROJECT}", &project.path().display().to_string());
    let h = Harness::new(script, &toml).await;
    let token = h.token(USER).await;
    let server = h.start().await;
    let stdout = run_scenarios("run.mjs", &h, &server, &token, USER, &[]).await;
    println!("{stdout}");
    // The image the browser attached reached the model as an image block.
    let image = json!({"type": "image", "source":
        {"type": "base64", "media_type": "image/png", "data": crate::serve_attachments::PNG_B64}});
    let with_image = h.model_requests().into_iter().find(|request| {
        request.body["messages"].as_array().is_some_and(|messages| {
            messages.iter().any(|m| {
                m["content"]
                    .as_array()
                    .is_some_and(|blocks| blocks.contains(&image))
                    && m.to_string().contains("E2E-IMAGE")
            })
        })
    });
    assert!(
        with_image.is_some(),
        "no model request carried the attached image"
    );
}

/// `node web/e2e/<runner>` against `server` with the environment the
/// scenarios expect (see the module's doc) plus `env`; panics with its output
/// and the server's log unless it exits 0 within [`E2E_TIMEOUT`]. Its stdout.
pub(crate) async fn run_scenarios(
    runner: &str,
    h: &Harness,
    server: &serve_harness::Server,
    token: &str,
    user: &str,
    env: &[(&str, &str)],
) -> String {
    let repo = repo_with_browser(runner);
    let runner = repo.join("web/e2e").join(runner);
    assert!(runner.is_file(), "{} is missing", runner.display());
    let out = repo.join("target/ui-screenshots");
    std::fs::create_dir_all(&out).unwrap();
    let stdout_path = h.data().join("e2e.stdout");
    let stderr_path = h.data().join("e2e.stderr");

    let mut node = Command::new("node");
    node.arg(&runner)
        .current_dir(&repo)
        .env("AGENTD_URL", &server.url)
        .env("AGENTD_TOKEN", token)
        .env("AGENTD_USER", user)
        .env("AGENTD_DATA_DIR", h.data())
        .env("AGENTD_E2E_OUT", &out)
        .env("NODE_PATH", repo.join(".tools/node_modules"))
        .env("CHROMIUM", CHROMIUM)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        // Its own process group, so a timeout also ends the browser.
        .process_group(0)
        .kill_on_drop(true);
    let mut child = node.spawn().expect("cannot start node");
    let status = tokio::time::timeout(E2E_TIMEOUT, child.wait()).await;
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    let report = || {
        format!(
            "--- stdout\n{}\n--- stderr\n{}\n--- agentd serve log\n{}",
            read(&stdout_path),
            read(&stderr_path),
            server.log()
        )
    };
    let status = match status {
        Ok(status) => status.unwrap(),
        Err(_) => {
            kill_group(&child);
            panic!(
                "{} did not finish within {E2E_TIMEOUT:?}\n{}",
                runner.display(),
                report()
            );
        }
    };
    assert!(
        status.success(),
        "{} failed ({status}); screenshots in {}\n{}",
        runner.display(),
        out.display(),
        report()
    );
    read(&stdout_path)
}
