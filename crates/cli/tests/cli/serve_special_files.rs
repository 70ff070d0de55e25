//! FIFOs, devices, sockets and `/proc` magic links given to the file tools of
//! a running `agentd serve`: each call fails at once with a clear error, the
//! turn ends, and no thread of the server is left blocked (a FIFO's open
//! used to block a blocking-pool thread until the turn timed out, and after).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serve_harness::{Harness, SseEvent};

/// The bypass profile is granted to everyone by name (admin-only otherwise).
const CONFIG: &str = "[access]\nprofiles = [\"default\"]\n[profiles.default]\nmode = \"bypass\"\n";

fn tool(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

fn script() -> Value {
    let mut calls = Vec::new();
    for round in 0..8 {
        calls.push(tool(
            &format!("read_fifo_{round}"),
            "Read",
            json!({"file_path": "fifo"}),
        ));
    }
    calls.extend([
        tool("read_dev", "Read", json!({"file_path": "chardev"})),
        tool("read_sock", "Read", json!({"file_path": "sock"})),
        tool("read_magic", "Read", json!({"file_path": "magic"})),
        tool("grep_fifo", "Grep", json!({"pattern": "x", "path": "fifo"})),
        tool("grep_all", "Grep", json!({"pattern": "needle"})),
        tool("ls_fifo", "LS", json!({"path": "fifo"})),
        tool("glob_all", "Glob", json!({"pattern": "*"})),
        tool(
            "edit_fifo",
            "Edit",
            json!({"file_path": "fifo", "old_string": "a", "new_string": "b"}),
        ),
        tool(
            "multi_dev",
            "MultiEdit",
            json!({"file_path": "chardev", "edits": [{"old_string": "a", "new_string": "b"}]}),
        ),
        tool(
            "write_fifo",
            "Write",
            json!({"file_path": "fifo", "content": "x"}),
        ),
    ]);
    json!({"replies": [
        {"when": {"last_user_contains": "warm up"}, "content": [
            tool("warm_read", "Read", json!({"file_path": "plain.txt"}))]},
        {"when": {"last_user_contains": "special"}, "content": calls},
        {"when": {"last_tool_name": "Write"}, "content": [{"type": "text", "text": "done"}]},
        {"when": {"last_tool_name": "Read"}, "content": [{"type": "text", "text": "warm"}]}
    ]})
}

fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .count()
}

/// Threads of `pid` waiting for a FIFO's other end.
fn blocked_on_fifos(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("wchan"))
                .is_ok_and(|wchan| wchan.contains("partner") || wchan.contains("fifo"))
        })
        .count()
}

fn finished(events: &[SseEvent]) -> Vec<(String, bool, String)> {
    events
        .iter()
        .filter(|e| e.event == "tool.finished")
        .map(|e| {
            (
                e.data["call_id"].as_str().unwrap().to_string(),
                e.data["is_error"].as_bool().unwrap(),
                e.data["output"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn special_files_fail_at_once_and_leave_no_thread_blocked() {
    let h = Harness::new(script(), CONFIG).await;
    let token = h.token("tester").await;
    let server = h.start().await.with_token(&token);
    let session = server.session().await;
    let ws = h.data().join("workspaces").join(&session);
    std::fs::write(ws.join("plain.txt"), "needle\n").unwrap();
    server.message(&session, "warm up").await;
    server.wait_idle(&session).await;
    let pid = server.pid();
    let baseline = threads(pid);

    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        ws.join("fifo"),
        rustix::fs::Mode::from_raw_mode(0o666),
    )
    .unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(ws.join("sock")).unwrap();
    std::os::unix::fs::symlink("/proc/self/root/etc/passwd", ws.join("magic")).unwrap();
    let root = rustix::process::geteuid().is_root();
    if root {
        // /dev/null's numbers.
        rustix::fs::mknodat(
            rustix::fs::CWD,
            ws.join("chardev"),
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::from_raw_mode(0o666),
            rustix::fs::makedev(1, 3),
        )
        .unwrap();
    } else {
        std::os::unix::fs::symlink("/dev/null", ws.join("chardev")).unwrap();
    }

    let started = Instant::now();
    server.message(&session, "special files").await;
    let end = server.wait_idle(&session).await;
    let took = started.elapsed();
    assert_eq!(end["status"], "idle", "{end}");
    assert!(took < Duration::from_secs(10), "the turn took {took:?}");

    let events = server.all_events(&session).await;
    let results = finished(&events);
    let by_id = |id: &str| {
        results
            .iter()
            .find(|(call, ..)| call == id)
            .unwrap()
            .clone()
    };
    for round in 0..8 {
        let (_, is_error, output) = by_id(&format!("read_fifo_{round}"));
        assert!(is_error && output.contains("FIFO"), "{output}");
    }
    for (id, words) in [
        (
            "read_dev",
            if root { "character device" } else { "outside" },
        ),
        ("read_sock", "socket"),
        ("read_magic", "outside"),
        ("grep_fifo", "FIFO"),
        ("edit_fifo", "FIFO"),
        ("ls_fifo", "directory"),
        ("write_fifo", "FIFO"),
    ] {
        let (_, is_error, output) = by_id(id);
        assert!(is_error, "{id}: {output}");
        assert!(output.contains(words), "{id}: {output}");
    }
    // Searches over the workspace skip the special files and still work.
    let (_, is_error, output) = by_id("grep_all");
    assert!(!is_error && output.contains("plain.txt"), "{output}");
    let (_, is_error, output) = by_id("glob_all");
    assert!(
        !is_error && output.contains("plain.txt") && !output.contains("fifo"),
        "{output}"
    );
    assert!(!std::fs::read_to_string("/etc/passwd").unwrap().is_empty());
    for (_, _, output) in &results {
        assert!(
            !output.contains("root:x:0:0"),
            "a magic link was followed: {output}"
        );
    }

    assert_eq!(blocked_on_fifos(pid), 0, "a server thread waits on a FIFO");
    // Idle blocking-pool threads end after 10 s; a blocked one never would.
    let deadline = Instant::now() + Duration::from_secs(20);
    while threads(pid) > baseline + 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let now = threads(pid);
    assert!(
        now <= baseline + 2,
        "threads: {baseline} before, {now} after"
    );
}
