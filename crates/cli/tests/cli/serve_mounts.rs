//! Host mounts over the real HTTP API: a profile's read-only and writable
//! mounts through Bash, Read, Write, Edit and MultiEdit; a per-user
//! persistent directory shared by one user's sessions and hidden from
//! another's; mounts a session asks for, inside or outside the caller's
//! mountable roots; configs that could leak refused at start; and exports,
//! which leave a session's mounts behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use agentd_store::sqlite::SqliteStore;
use agentd_store::{PendingStore, SessionStore};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::serve_harness::{Harness, Server};

pub(crate) fn tool(name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "name": name, "input": input})
}

fn bash(command: &str) -> Value {
    json!([tool("Bash", json!({"command": command}))])
}

fn on(word: &str, content: Value) -> Value {
    json!({"repeat": true, "when": {"last_user_contains": word}, "content": content})
}

/// "done" after any tool's result.
pub(crate) fn after_tools() -> Vec<Value> {
    ["Bash", "Read", "Write", "Edit", "MultiEdit", "Glob"]
        .iter()
        .map(|name| {
            json!({"repeat": true, "when": {"last_tool_name": name},
                   "content": [{"type": "text", "text": "done"}]})
        })
        .collect()
}

/// One tool call per prompt word, then "done".
fn script() -> Value {
    let one = |name: &str, input: Value| json!([tool(name, input)]);
    let mut replies = after_tools();
    replies.extend([
        on(
            "bash-ro",
            bash("cat /mnt/ro/seen.txt; echo x > /mnt/ro/bash.txt; echo \"exit=$?\""),
        ),
        on(
            "bash-rw",
            bash("echo from-bash > /mnt/rw/bash.txt && echo wrote-rw; echo \"uid=$(id -u)\""),
        ),
        on(
            "read-ro",
            one("Read", json!({"file_path": "/mnt/ro/seen.txt"})),
        ),
        on(
            "write-ro",
            one("Write", json!({"file_path": "/mnt/ro/w.txt", "content": "no"})),
        ),
        on(
            "edit-ro",
            one(
                "Edit",
                json!({"file_path": "/mnt/ro/seen.txt", "old_string": "host", "new_string": "agent"}),
            ),
        ),
        on(
            "multi-ro",
            one(
                "MultiEdit",
                json!({"file_path": "/mnt/ro/seen.txt",
                       "edits": [{"old_string": "host", "new_string": "agent"}]}),
            ),
        ),
        on(
            "glob-ro",
            one("Glob", json!({"pattern": "*.txt", "path": "/mnt/ro"})),
        ),
        on(
            "glob-rw",
            one("Glob", json!({"pattern": "**/*.txt", "path": "/mnt/rw"})),
        ),
        on(
            "write-rw",
            one("Write", json!({"file_path": "/mnt/rw/w.txt", "content": "from-write"})),
        ),
        on(
            "read-private",
            one("Read", json!({"file_path": "/mnt/rw/private.txt"})),
        ),
        on(
            "keep-it",
            bash("echo kept-across-sessions > /persistent/p.txt && echo stored"),
        ),
        on("read-it", bash("cat /persistent/p.txt || echo nothing-there")),
        on("read-asked", bash("cat /mnt/asked/inside.txt")),
        json!({"repeat": true, "content": [{"type": "text", "text": "ok"}]}),
    ]);
    json!({ "replies": replies })
}

pub(crate) fn config(extra: &str) -> String {
    format!(
        "[models.default]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\
         base_url = \"{{URL}}\"\n{extra}"
    )
}

/// One turn; the events it added, as text.
pub(crate) async fn turn(server: &Server, session: &str, prompt: &str) -> String {
    let (_, info) = server.get(&format!("/v1/sessions/{session}")).await;
    let before = info["last_seq"].as_u64().unwrap();
    server.message(session, prompt).await;
    server.wait_idle(session).await;
    let events: Vec<String> = server
        .all_events(session)
        .await
        .iter()
        .filter(|e| e.id > before)
        .map(|e| e.data.to_string())
        .collect();
    events.join("\n")
}

pub(crate) fn dir(path: PathBuf, mode: u32) -> PathBuf {
    std::fs::create_dir_all(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

pub(crate) fn shown(path: &Path) -> String {
    path.display().to_string()
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[tokio::test]
async fn a_read_only_mount_is_unwritable_and_a_writable_one_writable() {
    let tmp = TempDir::new().unwrap();
    let ro = dir(tmp.path().join("ro"), 0o755);
    std::fs::write(ro.join("seen.txt"), "from the host\n").unwrap();
    // A root server's agent has a uid of its own: a writable mount must be
    // writable by it.
    let rw = dir(tmp.path().join("rw"), 0o777);
    std::fs::write(rw.join("private.txt"), "ROOT-ONLY-7f3\n").unwrap();
    std::fs::set_permissions(rw.join("private.txt"), PermissionsExt::from_mode(0o600)).unwrap();
    let closed = dir(rw.join("closed"), 0o700);
    std::fs::write(closed.join("hidden-name.txt"), "").unwrap();
    let extra = format!(
        "[profiles.default]\nallow = [\"Bash\", \"Read\", \"Write\", \"Edit\", \"MultiEdit\"]\n\
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
    let text = turn(&alice, &session, "read-ro").await;
    assert!(text.contains("from the host"), "{text}");
    for word in ["write-ro", "edit-ro", "multi-ro"] {
        let text = turn(&alice, &session, word).await;
        let refusals = text.matches("is on a read-only mount").count();
        assert!(refusals > 0, "{word}: {text}");
    }
    assert!(!ro.join("w.txt").exists());
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
    // The file tools work on a mount as the agent, as its commands do.
    let agent_uid = std::fs::metadata(rw.join("bash.txt")).unwrap().uid();
    assert!(text.contains(&format!("uid={agent_uid}")), "{text}");
    assert_eq!(
        std::fs::metadata(rw.join("w.txt")).unwrap().uid(),
        agent_uid
    );
    let text = turn(&alice, &session, "read-private").await;
    let listed = turn(&alice, &session, "glob-rw").await;
    assert!(listed.contains("/mnt/rw/w.txt"), "{listed}");
    if is_root() {
        assert!(!text.contains("ROOT-ONLY-7f3"), "{text}");
        assert!(text.contains("permission denied"), "{text}");
        assert!(!listed.contains("hidden-name"), "{listed}");
    } else {
        assert!(text.contains("ROOT-ONLY-7f3"), "{text}");
        assert!(listed.contains("hidden-name"), "{listed}");
    }
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
    let meta = std::fs::metadata(persistent.join("alice")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    // The agent's own: what its commands write there is theirs too.
    let written = std::fs::metadata(persistent.join("alice/p.txt")).unwrap();
    assert_eq!(meta.uid(), written.uid());
    let second = alice.session().await;
    let text = turn(&alice, &second, "read-it").await;
    assert!(text.contains("kept-across-sessions"), "{text}");

    let theirs = bob.session().await;
    let text = turn(&bob, &theirs, "read-it").await;
    assert!(text.contains("nothing-there"), "{text}");
    assert!(!text.contains("kept-across-sessions"), "{text}");
    if is_root() {
        let bobs = std::fs::metadata(persistent.join("bob")).unwrap();
        assert_ne!(bobs.uid(), meta.uid());
    }

    // A link planted at a user's name is refused, not followed.
    std::os::unix::fs::symlink(persistent.join("alice"), persistent.join("carol")).unwrap();
    let carol = server.as_user(&h.token("carol").await);
    let hers = carol.session().await;
    let text = turn(&carol, &hers, "read-it").await;
    assert!(text.contains("turn_not_started"), "{text}");
    assert!(text.contains("symbolic link"), "{text}");
    assert!(!text.contains("kept-across-sessions"), "{text}");
}

#[tokio::test]
async fn a_session_mount_must_lie_in_the_callers_mountable_roots() {
    let tmp = TempDir::new().unwrap();
    let shared = dir(tmp.path().join("shared/data"), 0o755);
    std::fs::write(shared.join("inside.txt"), "inside the root\n").unwrap();
    let private = dir(tmp.path().join("private"), 0o755);
    let projects = dir(tmp.path().join("shared/projects"), 0o755);
    let extra = format!(
        "[profiles.default]\nallow = [\"Bash\"]\n\
         [workspaces]\nroots = [\"{}\"]\n\
         [users.alice]\nmountable = [\"{}\"]\n",
        shown(&projects),
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
    // Behind a directory another uid keeps closed, though root could open it.
    let closed = dir(tmp.path().join("shared/data/someone"), 0o700);
    let keys = dir(closed.join("keys"), 0o755);
    for path in [&closed, &keys] {
        std::os::unix::fs::chown(path, Some(62_000), Some(62_000)).unwrap();
    }
    for host in [keys.clone(), closed.join("missing")] {
        let (status, body) = alice.post("/v1/sessions", ask(&host, "/mnt/asked")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{}: {body}", host.display());
    }
    // Sessions work in a workspace root: no mount may hold or lie in one.
    for host in [projects.clone(), tmp.path().join("shared")] {
        let (status, body) = alice.post("/v1/sessions", ask(&host, "/mnt/asked")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("workspace root"), "{body}");
    }
    let (status, body) = alice.post("/v1/sessions", ask(&shared, "/usr/x")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    let (status, body) = alice.post("/v1/sessions", ask(&shared, "/mnt/asked")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let session = body["id"].as_str().unwrap().to_string();
    let text = turn(&alice, &session, "read-asked").await;
    assert!(text.contains("inside the root"), "{text}");

    // Exports leave the mounts behind, and say so.
    let (code, exported, stderr) = h.cli(&["sessions", "export", &session]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("host mounts are not exported"), "{stderr}");
    assert!(!exported.contains(&shown(&shared)), "{exported}");
    let elsewhere = TempDir::new().unwrap();
    let file = elsewhere.path().join("export.json");
    std::fs::write(&file, &exported).unwrap();
    let import = h
        .command_in(elsewhere.path(), &["sessions", "import", &shown(&file)])
        .output()
        .await
        .unwrap();
    assert!(import.status.success(), "{import:?}");
    let store = SqliteStore::open(&elsewhere.path().join("agentd.db"))
        .await
        .unwrap();
    assert!(store.get_session(&session).await.unwrap().is_some());
    assert_eq!(store.session_mounts(&session).await.unwrap(), None);
}

/// Configs whose mounts could reach what is not the user's are refused at
/// start, with the reason.
#[tokio::test]
async fn a_config_that_could_leak_is_refused_when_the_server_starts() {
    let tmp = TempDir::new().unwrap();
    let users = dir(tmp.path().join("users"), 0o755);
    let persistent = format!(
        "[profiles.default]\nmounts = [{{ host = \"{}/{{user}}/persistent\", path = \"/p\" }}]\n",
        shown(&users)
    );
    for (extra, why) in [
        // bob could ask for `<users>/alice`.
        (
            format!("{persistent}[mounts]\nallowed = [\"{}\"]\n", shown(&users)),
            "`{user}` directories are",
        ),
        (
            "[profiles.default]\nmounts = [{ host = \"{DATA}/workspaces\", path = \"/w\" }]\n"
                .to_string(),
            "data dir",
        ),
        (
            format!(
                "[profiles.default]\nmounts = [{{ host = \"{}\", path = \"/m\" }}]\n",
                shown(&tmp.path().join("missing"))
            ),
            "cannot be resolved",
        ),
    ] {
        let h = Harness::new(json!({"replies": []}), &config(&extra)).await;
        std::fs::create_dir_all(h.data().join("workspaces")).unwrap();
        let (code, _, stderr) = h.cli(&["serve", "--bind", "127.0.0.1:0"]).await;
        assert_ne!(code, 0, "{extra}");
        assert!(stderr.contains(why), "{extra}: {stderr}");
    }
}
