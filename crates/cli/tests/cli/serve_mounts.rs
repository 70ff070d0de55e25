//! Host mounts over the real HTTP API: a profile's read-only and writable
//! mounts through Bash, Write and Edit; a per-user persistent directory
//! shared by one user's sessions and hidden from another's; and mounts a
//! session asks for, inside or outside the caller's mountable roots.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use reqwest::StatusCode;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::serve_harness::{Harness, Server};

fn tool(name: &str, input: Value) -> Value {
    json!([{"type": "tool_use", "name": name, "input": input}])
}

/// One tool call per prompt word, then "done".
fn script() -> Value {
    let bash = |command: &str| tool("Bash", json!({"command": command}));
    let on = |word: &str, content: Value| json!({"repeat": true, "when": {"last_user_contains": word}, "content": content});
    json!({"replies": [
        {"repeat": true, "when": {"last_tool_name": "Bash"}, "content": [{"type": "text", "text": "done"}]},
        {"repeat": true, "when": {"last_tool_name": "Write"}, "content": [{"type": "text", "text": "done"}]},
        {"repeat": true, "when": {"last_tool_name": "Edit"}, "content": [{"type": "text", "text": "done"}]},
        {"repeat": true, "when": {"last_tool_name": "Glob"}, "content": [{"type": "text", "text": "done"}]},
        on("bash-ro", bash("cat /mnt/ro/seen.txt; echo x > /mnt/ro/bash.txt; echo \"exit=$?\"")),
        on("bash-rw", bash("echo from-bash > /mnt/rw/bash.txt && echo wrote-rw")),
        on("write-ro", tool("Write", json!({"file_path": "/mnt/ro/w.txt", "content": "no"}))),
        on("edit-ro", tool("Edit", json!({"file_path": "/mnt/ro/seen.txt",
            "old_string": "host", "new_string": "agent"}))),
        on("glob-ro", tool("Glob", json!({"pattern": "*.txt", "path": "/mnt/ro"}))),
        on("write-rw", tool("Write", json!({"file_path": "/mnt/rw/w.txt", "content": "from-write"}))),
        on("keep-it", bash("echo kept-across-sessions > /persistent/p.txt && echo stored")),
        on("read-it", bash("cat /persistent/p.txt || echo nothing-there")),
        on("read-asked", bash("cat /mnt/asked/inside.txt")),
        {"repeat": true, "content": [{"type": "text", "text": "ok"}]}
    ]})
}

fn config(extra: &str) -> String {
    format!(
        "[models.default]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\
         base_url = \"{{URL}}\"\n{extra}"
    )
}

/// One turn; the transcript as text.
async fn turn(server: &Server, session: &str, prompt: &str) -> String {
    server.message(session, prompt).await;
    server.wait_idle(session).await;
    let (status, body) = server
        .get(&format!("/v1/sessions/{session}/messages"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body.to_string()
}

fn dir(path: PathBuf, mode: u32) -> PathBuf {
    std::fs::create_dir_all(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

#[tokio::test]
async fn a_read_only_mount_is_unwritable_and_a_writable_one_writable() {
    let tmp = TempDir::new().unwrap();
    let ro = dir(tmp.path().join("ro"), 0o755);
    std::fs::write(ro.join("seen.txt"), "from the host\n").unwrap();
    // A root server's agent has a uid of its own: a writable mount must be
    // writable by it.
    let rw = dir(tmp.path().join("rw"), 0o777);
    let extra = format!(
        "[profiles.default]\nallow = [\"Bash\", \"Write\", \"Edit\"]\n\
         mounts = [{{ host = \"{}\", path = \"/mnt/ro\" }}, \
         {{ host = \"{}\", path = \"/mnt/rw\", mode = \"rw\" }}]\n",
        shown(&ro),
        shown(&rw)
    );
    let h = Harness::new(script(), &config(&extra)).await;
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let session = alice.session().await;

    let text = turn(&alice, &session, "bash-ro").await;
    assert!(text.contains("from the host"), "{text}");
    assert!(text.contains("Read-only file system"), "{text}");
    assert!(!ro.join("bash.txt").exists());
    let text = turn(&alice, &session, "write-ro").await;
    assert!(text.contains("read-only mount"), "{text}");
    assert!(!ro.join("w.txt").exists());
    let text = turn(&alice, &session, "edit-ro").await;
    assert!(text.contains("read-only mount"), "{text}");
    assert_eq!(
        std::fs::read_to_string(ro.join("seen.txt")).unwrap(),
        "from the host\n"
    );

    // The file tools show a mount's files where the sandbox has them.
    let text = turn(&alice, &session, "glob-ro").await;
    assert!(text.contains("/mnt/ro/seen.txt"), "{text}");
    assert!(!text.contains(&shown(&ro)), "{text}");

    let text = turn(&alice, &session, "bash-rw").await;
    assert!(text.contains("wrote-rw"), "{text}");
    assert_eq!(
        std::fs::read_to_string(rw.join("bash.txt")).unwrap(),
        "from-bash\n"
    );
    turn(&alice, &session, "write-rw").await;
    assert_eq!(
        std::fs::read_to_string(rw.join("w.txt")).unwrap(),
        "from-write"
    );
}

#[tokio::test]
async fn a_per_user_directory_is_shared_by_that_users_sessions_only() {
    let tmp = TempDir::new().unwrap();
    let persistent = dir(tmp.path().join("persistent"), 0o755);
    let extra = format!(
        "[profiles.default]\nallow = [\"Bash\"]\n\
         mounts = [{{ host = \"{}/{{user}}\", path = \"/persistent\", mode = \"rw\" }}]\n",
        shown(&persistent)
    );
    let h = Harness::new(script(), &config(&extra)).await;
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let bob = server.as_user(&h.token("bob").await);

    let first = alice.session().await;
    assert!(turn(&alice, &first, "keep-it").await.contains("stored"));
    let mode = std::fs::metadata(persistent.join("alice"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    let second = alice.session().await;
    let text = turn(&alice, &second, "read-it").await;
    assert!(text.contains("kept-across-sessions"), "{text}");

    let theirs = bob.session().await;
    let text = turn(&bob, &theirs, "read-it").await;
    assert!(text.contains("nothing-there"), "{text}");
    assert!(!text.contains("kept-across-sessions"), "{text}");
}

#[tokio::test]
async fn a_session_mount_must_lie_in_the_callers_mountable_roots() {
    let tmp = TempDir::new().unwrap();
    let shared = dir(tmp.path().join("shared/data"), 0o755);
    std::fs::write(shared.join("inside.txt"), "inside the root\n").unwrap();
    let private = dir(tmp.path().join("private"), 0o755);
    let extra = format!(
        "[profiles.default]\nallow = [\"Bash\"]\n\
         [users.alice]\nmountable = [\"{}\"]\n",
        shown(&tmp.path().join("shared"))
    );
    let h = Harness::new(script(), &config(&extra)).await;
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let bob = server.as_user(&h.token("bob").await);
    let ask = |host: &Path, path: &str| json!({"mounts": [{"host": shown(host), "path": path}]});

    for (who, host) in [(&alice, &private), (&bob, &shared)] {
        let (status, body) = who.post("/v1/sessions", ask(host, "/mnt/asked")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert_eq!(body["error"]["code"], "forbidden");
    }
    // A link inside the root to outside it is where it leads.
    std::os::unix::fs::symlink(&private, tmp.path().join("shared/link")).unwrap();
    let link = tmp.path().join("shared/link");
    let (status, _) = alice.post("/v1/sessions", ask(&link, "/mnt/asked")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = alice.post("/v1/sessions", ask(&shared, "/usr/x")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    let (status, body) = alice.post("/v1/sessions", ask(&shared, "/mnt/asked")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let session = body["id"].as_str().unwrap();
    let text = turn(&alice, session, "read-asked").await;
    assert!(text.contains("inside the root"), "{text}");
}
