//! The command line's behaviour without a model server: the demo model, config
//! and usage errors, and the sessions commands.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
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

#[test]
fn first_run_without_a_model_uses_the_labelled_demo() {
    let (data, ws) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    std::fs::write(ws.path().join("hello.txt"), "hi").unwrap();
    let out = agentd(data.path(), ws.path(), &["run", "what is here?"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("offline demo model"), "{stderr}");
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
    assert!(stderr.contains("● LS"), "tool activity is shown: {stderr}");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("demo"), "{stdout}");

    let ls = agentd(data.path(), ws.path(), &["sessions", "ls", "--json"]);
    assert_eq!(ls.status.code(), Some(0));
    let sessions: serde_json::Value = serde_json::from_slice(&ls.stdout).unwrap();
    assert_eq!(
        sessions[0]["title"], "what is here?",
        "titled by the prompt"
    );
    let id = sessions[0]["id"].as_str().unwrap();
    let show = agentd(data.path(), ws.path(), &["sessions", "show", "--json", id]);
    assert!(
        text(&show.stdout).contains("hello.txt"),
        "the demo's tools really looked at the workspace"
    );
}

#[test]
fn sessions_show_prints_the_transcript_and_unknown_ids_are_errors() {
    let (data, ws) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let out = agentd(
        data.path(),
        ws.path(),
        &["run", "--output-format", "json", "look"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = result["session_id"].as_str().unwrap();

    let show = agentd(data.path(), ws.path(), &["sessions", "show", id]);
    let shown = text(&show.stdout);
    assert!(shown.contains("[user] look"), "{shown}");
    assert!(shown.contains("→ LS"), "{shown}");
    assert!(shown.contains("1 turns"), "{shown}");

    let json = agentd(data.path(), ws.path(), &["sessions", "show", "--json", id]);
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(value["messages"].as_array().unwrap().len() >= 4);

    let rm = agentd(data.path(), ws.path(), &["sessions", "rm", id]);
    assert_eq!(rm.status.code(), Some(0), "{}", text(&rm.stderr));
    let gone = agentd(data.path(), ws.path(), &["sessions", "show", id]);
    assert_eq!(gone.status.code(), Some(2), "removed sessions are gone");
    assert!(
        ws.path().exists(),
        "the project directory of a run session stays"
    );
    let again = agentd(data.path(), ws.path(), &["sessions", "rm", id]);
    assert_eq!(again.status.code(), Some(2));

    let missing = agentd(data.path(), ws.path(), &["sessions", "show", "nope"]);
    assert_eq!(missing.status.code(), Some(2));
    let resume = agentd(data.path(), ws.path(), &["run", "--resume", "nope", "x"]);
    assert_eq!(resume.status.code(), Some(2));
    assert!(text(&resume.stderr).contains("no session with id nope"));
}

#[test]
fn bad_config_names_the_file_line_and_key() {
    let (data, ws) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let config = data.path().join("agentd.toml");
    std::fs::write(
        &config,
        "[profiles.default]\nmax_turns = 3\nnetwrk = true\n",
    )
    .unwrap();
    let out = agentd(
        data.path(),
        ws.path(),
        &["--config", config.to_str().unwrap(), "run", "x"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("agentd.toml"), "{stderr}");
    assert!(stderr.contains("line 3"), "{stderr}");
    assert!(stderr.contains("netwrk"), "{stderr}");
}

#[test]
fn data_dir_inside_the_workspace_is_refused() {
    let ws = TempDir::new().unwrap();
    let data = ws.path().join(".agentd");
    let out = agentd(&data, ws.path(), &["run", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("data dir"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn unknown_model_is_a_usage_error() {
    let (data, ws) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let out = agentd(data.path(), ws.path(), &["run", "--model", "gpt-9", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("gpt-9"));
}

/// The sandbox trampoline (`agentd __sandbox-enter JOIN LIMITS PROGRAM…`)
/// runs the program only once its cgroup and limits are in place; anything
/// it cannot apply stops it with status 126 before the program runs.
#[test]
fn the_sandbox_trampoline_runs_nothing_it_cannot_confine() {
    let (data, ws) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let enter_as = |join: &str, limits: &str, run_as: &str, script: &str| {
        agentd(
            data.path(),
            ws.path(),
            &[
                "__sandbox-enter",
                join,
                limits,
                run_as,
                "0",
                "bash",
                "-c",
                script,
            ],
        )
    };
    let enter = |join: &str, limits: &str| enter_as(join, limits, "-", "ulimit -n; ulimit -t");
    let ok = enter("-", "nofile=64,cpu=7");
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    assert_eq!(text(&ok.stdout), "64\n7\n");

    let no_cgroup = enter("/nonexistent/agentd/tasks", "-");
    assert_eq!(no_cgroup.status.code(), Some(126));
    assert!(no_cgroup.stdout.is_empty());
    assert!(
        text(&no_cgroup.stderr).contains("joining cgroup"),
        "{}",
        text(&no_cgroup.stderr)
    );

    let bad_limit = enter("-", "nofile=64,wings=2");
    assert_eq!(bad_limit.status.code(), Some(126));
    assert!(bad_limit.stdout.is_empty());
    assert!(text(&bad_limit.stderr).contains("unknown limit"));

    // Agent work is never root's: asked to be uid 0, nothing runs.
    let as_root = enter_as("-", "-", "0:0", "id -u");
    assert_eq!(as_root.status.code(), Some(126));
    assert!(as_root.stdout.is_empty());
    if rustix::process::geteuid().is_root() {
        let as_agent = enter_as("-", "-", "231019:231019", "id -u; id -G");
        assert_eq!(
            as_agent.status.code(),
            Some(0),
            "{}",
            text(&as_agent.stderr)
        );
        assert_eq!(text(&as_agent.stdout), "231019\n231019\n");
    }
}
