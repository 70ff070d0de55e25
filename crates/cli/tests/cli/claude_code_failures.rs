//! The `claude-code` engine when its CLI misbehaves, through a real `agentd
//! serve`: a CLI that crashes mid-turn, prints a non-JSON line or a line over
//! agentd's cap fails the turn with its stderr tail, and the next message
//! resumes in a fresh process; an idle CLI is stopped and resumed; SIGTERM
//! leaves no CLI behind.
//!
//! The CLI is `scripts/fake-claude/fake-claude.sh` behind a per-test wrapper
//! (agentd clears the CLI's environment, so the wrapper sets the fake's): it
//! misbehaves, or execs the real `claude` (installed by `make test` into
//! `.tools`, or `AGENTD_CLAUDE_BIN`) against the testkit model server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use serve_harness::{Harness, SseEvent, WAIT};
use tempfile::TempDir;

fn real_claude() -> PathBuf {
    if let Some(bin) = std::env::var_os("AGENTD_CLAUDE_BIN") {
        return PathBuf::from(bin);
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/node_modules/.bin/claude");
    assert!(
        local.exists(),
        "the `claude` CLI is missing; `make test` installs it into .tools"
    );
    local.canonicalize().unwrap()
}

/// The fake CLI of one test: its wrapper and its state dir.
struct Fake {
    dir: TempDir,
}

impl Fake {
    /// `plan`: the fake's behaviour on each start (the last repeats).
    fn new(plan: &str) -> Self {
        let dir = TempDir::new().unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../scripts/fake-claude/fake-claude.sh")
            .canonicalize()
            .unwrap();
        let wrapper = format!(
            "#!/bin/sh\nexport FAKE_CLAUDE_STATE='{}' FAKE_CLAUDE_PLAN='{plan}' FAKE_CLAUDE_REAL='{}'\nexec '{}' \"$@\"\n",
            dir.path().display(),
            real_claude().display(),
            script.display()
        );
        let path = dir.path().join("claude");
        std::fs::write(&path, wrapper).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { dir }
    }

    fn command(&self) -> PathBuf {
        self.dir.path().join("claude")
    }

    /// Each start so far: `(pid, arguments)`.
    fn starts(&self) -> Vec<(u32, String)> {
        std::fs::read_to_string(self.dir.path().join("starts"))
            .unwrap_or_default()
            .lines()
            .map(|line| {
                let (pid, args) = line.split_once(' ').unwrap_or((line, ""));
                (pid.parse().unwrap(), args.to_string())
            })
            .collect()
    }

    fn toml(&self, extra: &str) -> String {
        format!(
            "[server]\nauth = \"none\"\n\
             [models.default]\nprovider = \"claude-code\"\nmodel = \"claude-sonnet-4-5\"\n\
             base_url = \"{{URL}}\"\ncommand = \"{}\"\n{extra}\
             [profiles.default]\nmode = \"bypass\"\n",
            self.command().display()
        )
    }
}

/// Side requests the CLI may make on its own (titles, topic checks).
fn side() -> Value {
    json!({"repeat": true, "content": [{"type": "text", "text": "{\"isNewTopic\": false, \"title\": \"T\"}"}]})
}

/// Remember a keyword, then recall it, each turn with a Bash call.
fn memory_script(keyword: &str) -> Value {
    json!({"replies": [
        {"when": {"last_user_contains": "REMEMBER"}, "content": [
            {"type": "text", "text": "Noted."},
            {"type": "tool_use", "name": "mcp__agentd__Bash", "input": {"command": "echo first-call", "description": "d"}}
        ]},
        {"when": {"last_tool_result_contains": "first-call"}, "content": [{"type": "text", "text": "REMEMBERED"}]},
        {"repeat": true, "when": {"last_user_contains": "RECALL"}, "content": [{"type": "text", "text": format!("It was {keyword}.")}]},
        side()
    ]})
}

/// `(state, ppid, start time)` from `/proc/PID/stat`; `None` once it is gone.
fn proc_stat(pid: u32) -> Option<(char, u32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some((
        fields[0].chars().next()?,
        fields[1].parse().ok()?,
        fields[19].parse().ok()?,
    ))
}

/// A process, told apart from a later one with the same pid.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Proc {
    pid: u32,
    started: u64,
}

impl Proc {
    fn of(pid: u32) -> Self {
        let (_, _, started) = proc_stat(pid).unwrap_or_else(|| panic!("no process {pid}"));
        Self { pid, started }
    }

    /// Its state (`Z` for a zombie) while it exists.
    fn state(&self) -> Option<char> {
        proc_stat(self.pid)
            .filter(|(_, _, started)| *started == self.started)
            .map(|(state, _, _)| state)
    }

    fn parent(&self) -> u32 {
        proc_stat(self.pid).unwrap().1
    }

    fn cmdline(&self) -> String {
        std::fs::read(format!("/proc/{}/cmdline", self.pid))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default()
    }

    /// Wait until it is gone: exited and reaped, not a zombie.
    async fn wait_gone(&self, within: Duration) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match self.state() {
                None => return Ok(()),
                Some(state) if tokio::time::Instant::now() >= deadline => {
                    return Err(format!(
                        "process {} ({}) is still there in state {state}",
                        self.pid,
                        self.cmdline()
                    ));
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
}

/// Every process below `root`.
fn descendants(root: u32) -> Vec<Proc> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if let Some((_, ppid, _)) = proc_stat(pid) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            if let Some((_, _, started)) = proc_stat(child) {
                out.push(Proc {
                    pid: child,
                    started,
                });
                todo.push(child);
            }
        }
    }
    out
}

async fn finish(
    stream: &mut serve_harness::EventStream,
    server: &serve_harness::Server,
) -> Vec<SseEvent> {
    tokio::time::timeout(WAIT, stream.until_finished(1))
        .await
        .unwrap_or_else(|_| panic!("no turn.finished; log:\n{}", server.log()))
}

fn status(events: &[SseEvent]) -> &str {
    events.last().unwrap().data["status"].as_str().unwrap()
}

/// A turn relayed to the real CLI, one where the fake misbehaves as
/// `behaviour` (failed, with an `error` event carrying `code` and the fake's
/// stderr), and one in a fresh process that resumes the first turn's
/// conversation.
async fn misbehaves_then_resumes(behaviour: &str, code: &str) -> Vec<SseEvent> {
    let fake = Fake::new(&format!("{behaviour} real"));
    let h = Harness::new(memory_script("KEYWORD-OTTER"), &fake.toml("")).await;
    let server = h.start().await;
    let session = server.session().await;
    let mut stream = server.events(&session, None).await;

    server
        .message(&session, "REMEMBER the word KEYWORD-OTTER")
        .await;
    let events = finish(&mut stream, &server).await;
    assert_eq!(
        status(&events),
        "completed",
        "{events:#?}\n{}",
        server.log()
    );
    let starts = fake.starts();
    assert_eq!(starts.len(), 1, "{starts:?}");
    // The fake, and the real CLI it relays to.
    let mut cli = descendants(starts[0].0);
    cli.push(Proc::of(starts[0].0));

    server.message(&session, "MISBEHAVE now").await;
    let failed = finish(&mut stream, &server).await;
    assert_eq!(status(&failed), "failed", "{failed:#?}");
    let error = failed.iter().find(|e| e.event == "error").unwrap();
    assert_eq!(error.data["code"], code, "{error:#?}");
    let message = error.data["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("FAKE-STDERR-{behaviour}")),
        "the stderr tail is in the error: {message}"
    );
    assert_eq!(failed.last().unwrap().data["error"]["code"], code);
    // The misbehaving CLI is gone (and reaped) with all it started.
    for process in &cli {
        if let Some(state) = process.state() {
            panic!(
                "{process:?} ({}) is still there in state {state}",
                process.cmdline()
            );
        }
    }

    server.message(&session, "RECALL the word").await;
    let events = finish(&mut stream, &server).await;
    assert_eq!(
        status(&events),
        "completed",
        "{events:#?}\n{}",
        server.log()
    );
    assert_eq!(
        events.last().unwrap().data["result"],
        "It was KEYWORD-OTTER."
    );
    let starts = fake.starts();
    assert_eq!(starts.len(), 2, "a fresh process: {starts:?}");
    assert!(starts[1].1.contains("--resume"), "{starts:?}");
    let recall = h
        .model_requests()
        .into_iter()
        .rev()
        .find(|r| r.body_text().contains("RECALL the word"))
        .unwrap();
    assert!(
        recall.body_text().contains("KEYWORD-OTTER") && recall.body_text().contains("first-call"),
        "the fresh CLI has the earlier conversation\n{}",
        server.log()
    );
    failed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cli_that_crashes_mid_turn_fails_the_turn_and_the_next_message_resumes() {
    let failed = misbehaves_then_resumes("crash", "claude_code_crashed").await;
    let message = failed.iter().find(|e| e.event == "error").unwrap().data["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("exited during the turn") && message.contains("exit status: 3"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_json_line_fails_the_turn_and_the_next_message_resumes() {
    let failed = misbehaves_then_resumes("notjson", "claude_code_protocol").await;
    let message = failed.iter().find(|e| e.event == "error").unwrap().data["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("Error: this is not JSON {"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_over_the_cap_fails_the_turn_and_the_next_message_resumes() {
    let failed = misbehaves_then_resumes("toolong", "claude_code_line_too_long").await;
    let message = failed.iter().find(|e| e.event == "error").unwrap().data["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("a line of 68157440 bytes, over agentd's limit of 67108864 bytes"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_cli_is_stopped_and_the_next_message_resumes() {
    let fake = Fake::new("real");
    let h = Harness::new(
        memory_script("KEYWORD-HERON"),
        &fake.toml("idle_timeout_s = 1\n"),
    )
    .await;
    let server = h.start().await;
    let session = server.session().await;
    let mut stream = server.events(&session, None).await;
    server
        .message(&session, "REMEMBER the word KEYWORD-HERON")
        .await;
    let events = finish(&mut stream, &server).await;
    assert_eq!(
        status(&events),
        "completed",
        "{events:#?}\n{}",
        server.log()
    );

    let starts = fake.starts();
    assert_eq!(starts.len(), 1);
    let cli = Proc::of(starts[0].0);
    let agentd = cli.parent();
    assert_eq!(
        cli.state().map(|s| s != 'Z'),
        Some(true),
        "warm after its turn"
    );
    // Stopped about a second after its turn, and reaped.
    cli.wait_gone(Duration::from_secs(15)).await.unwrap();
    let zombies: Vec<String> = descendants(agentd)
        .iter()
        .filter(|p| p.state() == Some('Z'))
        .map(|p| format!("{} {}", p.pid, p.cmdline()))
        .collect();
    assert!(zombies.is_empty(), "zombies: {zombies:?}");
    assert!(server.log().contains("stopping an idle claude process"));

    server.message(&session, "RECALL the word").await;
    let events = finish(&mut stream, &server).await;
    assert_eq!(
        status(&events),
        "completed",
        "{events:#?}\n{}",
        server.log()
    );
    assert_eq!(
        events.last().unwrap().data["result"],
        "It was KEYWORD-HERON."
    );
    let starts = fake.starts();
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert!(starts[1].1.contains("--resume"), "{starts:?}");
    let recall = h
        .model_requests()
        .into_iter()
        .rev()
        .find(|r| r.body_text().contains("RECALL the word"))
        .unwrap();
    assert!(recall.body_text().contains("KEYWORD-HERON"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_leaves_no_cli_behind() {
    let fake = Fake::new("real");
    let script = json!({"replies": [
        {"when": {"last_user_contains": "HELLO"}, "content": [{"type": "text", "text": "Hi."}]},
        {"when": {"last_user_contains": "SLEEP"}, "content": [
            {"type": "tool_use", "name": "mcp__agentd__Bash", "input": {"command": "sleep 60", "description": "d"}}
        ]},
        {"repeat": true, "when": {"last_tool_result_contains": ""}, "content": [{"type": "text", "text": "slept"}]},
        side()
    ]});
    let h = Harness::new(script, &fake.toml("")).await;
    let server = h.start().await;
    // One session with a warm CLI between turns…
    let idle = server.session().await;
    let mut stream = server.events(&idle, None).await;
    server.message(&idle, "HELLO").await;
    let events = finish(&mut stream, &server).await;
    assert_eq!(
        status(&events),
        "completed",
        "{events:#?}\n{}",
        server.log()
    );
    // …and one in the middle of a tool call.
    let busy = server.session().await;
    let mut stream = server.events(&busy, None).await;
    server.message(&busy, "SLEEP").await;
    loop {
        let event = tokio::time::timeout(WAIT, stream.next())
            .await
            .unwrap()
            .unwrap();
        if event.event == "tool.started" {
            break;
        }
    }
    let starts = fake.starts();
    assert_eq!(starts.len(), 2, "{starts:?}");
    let clis: Vec<Proc> = starts.iter().map(|(pid, _)| Proc::of(*pid)).collect();
    let agentd = clis[0].parent();
    // Everything agentd started: the CLIs, whatever they started, the sandbox.
    let mut below = descendants(agentd);
    for cli in &clis {
        assert!(below.contains(cli), "{cli:?} is agentd's");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    below.extend(descendants(agentd));
    below.dedup();

    drop(stream);
    let code = server.terminate().await;
    assert_eq!(code, 0);
    for process in &below {
        process
            .wait_gone(Duration::from_secs(5))
            .await
            .unwrap_or_else(|err| panic!("left behind after SIGTERM: {err}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cli_killed_between_turns_is_reaped_and_the_next_message_resumes() {
    let fake = Fake::new("real");
    // Idle timeout 8 s: the reaper looks every 2 s, well before it.
    let h = Harness::new(
        memory_script("KEYWORD-IBIS"),
        &fake.toml("idle_timeout_s = 8\n"),
    )
    .await;
    let server = h.start().await;
    let session = server.session().await;
    let mut stream = server.events(&session, None).await;
    server
        .message(&session, "REMEMBER the word KEYWORD-IBIS")
        .await;
    let events = finish(&mut stream, &server).await;
    assert_eq!(
        status(&events),
        "completed",
        "{events:#?}\n{}",
        server.log()
    );

    // Once agentd has kept the CLI's transcript (it does after
    // `turn.finished`, when the CLI has written it).
    let projects = h
        .data()
        .join("claude-code")
        .join(&session)
        .join(".claude/projects");
    let deadline = tokio::time::Instant::now() + WAIT;
    while !std::fs::read_dir(&projects).is_ok_and(|dirs| {
        dirs.flatten().any(|d| {
            std::fs::read_dir(d.path()).is_ok_and(|files| {
                files
                    .flatten()
                    .any(|f| f.path().extension().is_some_and(|e| e == "jsonl"))
            })
        })
    }) {
        assert!(tokio::time::Instant::now() < deadline, "no transcript");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cli = Proc::of(fake.starts()[0].0);
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &cli.pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // Reaped by agentd long before the idle timeout: not left a zombie.
    cli.wait_gone(Duration::from_secs(6)).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !server
        .log()
        .contains("a claude process exited between turns")
    {
        assert!(tokio::time::Instant::now() < deadline, "{}", server.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    server.message(&session, "RECALL the word").await;
    let events = finish(&mut stream, &server).await;
    assert_eq!(
        status(&events),
        "completed",
        "{events:#?}\n{}",
        server.log()
    );
    assert_eq!(
        events.last().unwrap().data["result"],
        "It was KEYWORD-IBIS."
    );
    let starts = fake.starts();
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert!(starts[1].1.contains("--resume"), "{starts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcript_the_cli_writes_late_is_kept_whole() {
    // The CLI writes a turn's transcript some time after its `result` line
    // (~70 ms here, more under load); this one takes 400 ms.
    let fake = Fake::new("slowflush");
    let script = json!({"replies": [
        {"when": {"last_user_contains": "FIRST"}, "content": [{"type": "text", "text": "Noted."}]},
        {"when": {"last_user_contains": "SECOND"}, "content": [{"type": "text", "text": "Noted too."}]},
        {"repeat": true, "when": {"last_user_contains": "RECALL"}, "content": [{"type": "text", "text": "Both."}]},
        side()
    ]});
    let h = Harness::new(script, &fake.toml("")).await;
    let server = h.start().await;
    let session = server.session().await;
    let mut stream = server.events(&session, None).await;
    for text in ["FIRST word KEYWORD-ALPHA", "SECOND word KEYWORD-BRAVO"] {
        server.message(&session, text).await;
        let events = finish(&mut stream, &server).await;
        assert_eq!(
            status(&events),
            "completed",
            "{events:#?}\n{}",
            server.log()
        );
    }
    drop(stream);
    assert_eq!(server.terminate().await, 0);
    // Another machine: only what agentd kept in the store.
    std::fs::remove_dir_all(h.data().join("claude-code")).unwrap();

    let server = h.start().await;
    server.message(&session, "RECALL both words").await;
    server.wait_idle(&session).await;
    let recall = h
        .model_requests()
        .into_iter()
        .rev()
        .find(|r| r.body_text().contains("RECALL both words"))
        .unwrap_or_else(|| panic!("no RECALL request\n{}", server.log()));
    let text = recall.body_text();
    assert!(
        text.contains("KEYWORD-ALPHA") && text.contains("KEYWORD-BRAVO"),
        "the resumed CLI has both turns\n{text}"
    );
}
