//! `agentd gc`: retention by age, with the real binary and the demo model.
//! Old sessions are made by importing an export with its times set back (no
//! test hooks in the binary).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tempfile::TempDir;

fn agentd(data_dir: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentd"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("HOME", data_dir)
        .env("AGENTD_DATA_DIR", data_dir)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A session made by `agentd run` (its workspace is `ws`, the user's project).
fn run_session(data: &Path, ws: &Path) -> String {
    let out = agentd(data, ws, &["run", "--output-format", "json", "look"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    result["session_id"].as_str().unwrap().to_string()
}

/// A session made by `agentd run` in a scratch data dir, imported here last
/// updated `days` ago, with `workspace` (`None`: agentd's own
/// `<data>/workspaces/<id>`, created here).
fn old_session(data: &Path, ws: &Path, days: i64, workspace: Option<&Path>) -> String {
    old_session_with(data, ws, days, workspace, |_| {})
}

/// As [`old_session`], the export changed by `edit` first.
fn old_session_with(
    data: &Path,
    ws: &Path,
    days: i64,
    workspace: Option<&Path>,
    edit: impl FnOnce(&mut serde_json::Value),
) -> String {
    let scratch = TempDir::new().unwrap();
    let id = run_session(scratch.path(), ws);
    let export = agentd(scratch.path(), ws, &["sessions", "export", &id]);
    assert_eq!(export.status.code(), Some(0), "{}", text(&export.stderr));
    let mut value: serde_json::Value = serde_json::from_slice(&export.stdout).unwrap();
    let workspace: PathBuf = match workspace {
        Some(path) => path.to_path_buf(),
        None => {
            let dir = data.join("workspaces").join(&id);
            std::fs::create_dir_all(dir.join("src")).unwrap();
            std::fs::write(dir.join("src/main.rs"), "fn main() {}").unwrap();
            dir.canonicalize().unwrap()
        }
    };
    let then = (chrono::Utc::now() - chrono::TimeDelta::days(days)).to_rfc3339();
    value["session"]["workspace"] = workspace.to_str().unwrap().into();
    value["session"]["created_at"] = then.clone().into();
    value["session"]["updated_at"] = then.into();
    edit(&mut value);
    let file = scratch.path().join("export.json");
    std::fs::write(&file, value.to_string()).unwrap();
    let import = agentd(data, ws, &["sessions", "import", file.to_str().unwrap()]);
    assert_eq!(import.status.code(), Some(0), "{}", text(&import.stderr));
    id
}

fn session_ids(data: &Path, ws: &Path) -> Vec<String> {
    let ls = agentd(data, ws, &["sessions", "ls", "--json"]);
    assert_eq!(ls.status.code(), Some(0), "{}", text(&ls.stderr));
    let sessions: serde_json::Value = serde_json::from_slice(&ls.stdout).unwrap();
    sessions
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn gc_removes_old_sessions_and_only_agentd_created_workspaces() {
    let (data, ws) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    std::fs::write(ws.path().join("project.txt"), "mine").unwrap();
    let fresh = run_session(data.path(), ws.path());
    let old_own = old_session(data.path(), ws.path(), 40, None);
    let old_cli = old_session(data.path(), ws.path(), 31, Some(ws.path()));
    let own_dir = data.path().join("workspaces").join(&old_own);
    assert!(own_dir.join("src/main.rs").exists());

    // Dry run: lists the two old ones, removes nothing.
    let dry = agentd(
        data.path(),
        ws.path(),
        &["gc", "--older-than", "30d", "--dry-run"],
    );
    let listed = text(&dry.stdout);
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry.stderr));
    assert!(
        listed.contains(&old_own) && listed.contains(&old_cli),
        "{listed}"
    );
    assert!(!listed.contains(&fresh), "{listed}");
    assert!(listed.contains("would remove 2 sessions"), "{listed}");
    assert_eq!(session_ids(data.path(), ws.path()).len(), 3);
    assert!(own_dir.exists());

    // A larger cutoff spares them all.
    let none = agentd(data.path(), ws.path(), &["gc", "--older-than", "90d"]);
    assert_eq!(none.status.code(), Some(0), "{}", text(&none.stderr));
    assert!(text(&none.stdout).contains("removed 0 sessions"));
    assert_eq!(session_ids(data.path(), ws.path()).len(), 3);

    let gc = agentd(data.path(), ws.path(), &["gc", "--older-than", "30d"]);
    assert_eq!(gc.status.code(), Some(0), "{}", text(&gc.stderr));
    assert!(
        text(&gc.stdout).contains("removed 2 sessions"),
        "{}",
        text(&gc.stdout)
    );
    assert_eq!(session_ids(data.path(), ws.path()), vec![fresh.clone()]);
    assert!(
        !own_dir.exists(),
        "agentd's own workspace goes with its session"
    );
    assert!(data.path().join("workspaces").exists());
    assert_eq!(
        std::fs::read_to_string(ws.path().join("project.txt")).unwrap(),
        "mine",
        "the user's project directory is never touched"
    );

    // The fresh one survives an hour's cutoff, then goes with `0m` a moment later.
    let hour = agentd(data.path(), ws.path(), &["gc", "--older-than", "12h"]);
    assert!(text(&hour.stdout).contains("removed 0 sessions"));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let all = agentd(data.path(), ws.path(), &["gc", "--older-than", "0m"]);
    assert_eq!(all.status.code(), Some(0), "{}", text(&all.stderr));
    assert!(text(&all.stdout).contains("removed 1 sessions"));
    assert!(session_ids(data.path(), ws.path()).is_empty());
    assert!(ws.path().join("project.txt").exists());
}

#[test]
fn gc_rejects_ages_it_does_not_understand() {
    let (data, ws) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    for bad in ["30s", "1w", "abc", "-5d", "1.5h"] {
        let arg = format!("--older-than={bad}");
        let out = agentd(data.path(), ws.path(), &["gc", &arg]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(
            stderr.contains("expected a whole number followed by d, h or m"),
            "{bad}: {stderr}"
        );
    }
    let missing = agentd(data.path(), ws.path(), &["gc"]);
    assert_eq!(missing.status.code(), Some(2));
}

/// A pinned session is kept however old; an export whose tags break the
/// server's rule is not imported.
#[test]
fn gc_keeps_pinned_sessions_and_import_checks_tags() {
    let (data, ws) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let pinned = old_session_with(data.path(), ws.path(), 40, Some(ws.path()), |v| {
        v["session"]["pinned"] = true.into();
        v["session"]["tags"] = serde_json::json!(["keep"]);
    });
    let gc = agentd(data.path(), ws.path(), &["gc", "--older-than", "30d"]);
    assert_eq!(gc.status.code(), Some(0), "{}", text(&gc.stderr));
    assert!(text(&gc.stdout).contains("removed 0 sessions"));
    assert_eq!(session_ids(data.path(), ws.path()), vec![pinned]);

    let scratch = TempDir::new().unwrap();
    let id = run_session(scratch.path(), ws.path());
    let export = agentd(scratch.path(), ws.path(), &["sessions", "export", &id]);
    let mut value: serde_json::Value = serde_json::from_slice(&export.stdout).unwrap();
    value["session"]["tags"] = serde_json::json!(["ok", "a\"b"]);
    let file = scratch.path().join("export.json");
    std::fs::write(&file, value.to_string()).unwrap();
    let import = agentd(
        data.path(),
        ws.path(),
        &["sessions", "import", file.to_str().unwrap()],
    );
    let stderr = text(&import.stderr);
    assert_eq!(import.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("tag"), "{stderr}");
    assert_eq!(session_ids(data.path(), ws.path()).len(), 1);
}
