//! Checkpoints, rewind and fork over the real HTTP API: turns that write,
//! edit and delete files through Write, Edit and Bash, then the workspace
//! and the transcript put back as they were.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use reqwest::StatusCode;
use serde_json::{Value, json};
use serve_harness::{Harness, Server};

/// Every path under `root` with its kind, mode and content.
fn tree(root: &Path) -> BTreeMap<String, (String, u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(
                    rel,
                    ("link".into(), 0, target.display().to_string().into_bytes()),
                );
            } else if meta.is_dir() {
                out.insert(rel, ("dir".into(), mode, Vec::new()));
                stack.push(path);
            } else {
                out.insert(rel, ("file".into(), mode, std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

fn tool(name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "name": name, "input": input})
}

fn script() -> Value {
    json!({"replies": [
        {"when": {"last_user_contains": "set up"}, "content": [tool("Bash", json!({"command":
            "mkdir -p dir && printf 'alpha\\n' > a.txt && printf 'beta' > dir/b.txt && \
             printf '#!/bin/sh\\necho hi\\n' > run.sh && chmod 755 run.sh && ln -s a.txt link"}))]},
        {"repeat": true, "when": {"last_user_contains": "change"}, "content": [
            tool("Write", json!({"file_path": "new.txt", "content": "brand new"}))]},
        {"repeat": true, "when": {"last_tool_name": "Write"}, "content": [
            tool("Edit", json!({"file_path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"}))]},
        {"repeat": true, "when": {"last_tool_name": "Edit"}, "content": [tool("Bash", json!({"command":
            "rm dir/b.txt && rm link && mkdir -p x/y && printf z > x/y/z.txt && chmod 600 run.sh"}))]},
        {"repeat": true, "content": [{"type": "text", "text": "done"}]}
    ]})
}

async fn turn(server: &Server, session: &str, text: &str) {
    server.message(session, text).await;
    server.wait_idle(session).await;
}

fn workspace_of(h: &Harness, session: &str) -> std::path::PathBuf {
    h.data().join("workspaces").join(session)
}

async fn checkpoints(server: &Server, session: &str) -> Vec<Value> {
    let (status, body) = server
        .get(&format!("/v1/sessions/{session}/checkpoints"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["checkpoints"].as_array().unwrap().clone()
}

async fn transcript(server: &Server, session: &str) -> Vec<Value> {
    let (_, body) = server
        .get(&format!("/v1/sessions/{session}/messages"))
        .await;
    body["messages"].as_array().unwrap().clone()
}

#[tokio::test]
async fn rewind_restores_files_history_or_both() {
    let h = Harness::new(
        script(),
        "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n",
    )
    .await;
    let server = h.start().await;
    let session = server.session().await;
    let ws = workspace_of(&h, &session);
    turn(&server, &session, "set up the project").await;
    let after_setup = tree(&ws);
    assert!(after_setup.contains_key("run.sh") && after_setup.contains_key("link"));
    let messages_after_setup = transcript(&server, &session).await.len();
    turn(&server, &session, "change things").await;
    let changed = tree(&ws);
    assert_ne!(changed, after_setup);
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "ALPHA\n"
    );

    let points = checkpoints(&server, &session).await;
    assert_eq!(
        points.len(),
        2,
        "one per turn that changed files: {points:?}"
    );
    let second = points[1]["id"].as_str().unwrap().to_string();
    assert!(
        points[1]["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "run.sh")
    );
    let events = server.all_events(&session).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| e.event == "checkpoint.created")
            .count(),
        2
    );

    // Files only: the workspace as before the second turn, byte for byte and
    // mode for mode; the transcript untouched.
    let path = format!("/v1/sessions/{session}/rewind");
    let (status, body) = server
        .post(&path, json!({"checkpoint_id": second, "history": false}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(tree(&ws), after_setup);
    assert_eq!(body["messages_removed"], 0);
    assert!(
        body["files_restored"].as_array().unwrap().len() >= 5,
        "{body}"
    );
    let full = transcript(&server, &session).await.len();
    assert!(full > messages_after_setup);

    // History only: the transcript as before the second turn; files as they are.
    std::fs::write(ws.join("kept.txt"), "user edit").unwrap();
    let (status, body) = server
        .post(&path, json!({"checkpoint_id": second, "files": false}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["messages_removed"],
        (full - messages_after_setup) as u64
    );
    assert_eq!(
        transcript(&server, &session).await.len(),
        messages_after_setup
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("kept.txt")).unwrap(),
        "user edit"
    );
    // The next turn does not see the rewound one.
    turn(&server, &session, "what happened?").await;
    let last = h.model_requests().pop().unwrap().body["messages"].to_string();
    assert!(
        last.contains("set up the project") && !last.contains("change things"),
        "{last}"
    );

    // Both, to the first checkpoint: an empty workspace and transcript.
    let first = checkpoints(&server, &session).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, body) = server.post(&path, json!({"checkpoint_id": first})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        tree(&ws).is_empty(),
        "{:?}",
        tree(&ws).keys().collect::<Vec<_>>()
    );
    assert!(transcript(&server, &session).await.is_empty());

    // Bad requests lose nothing.
    let (status, _) = server.post(&path, json!({"checkpoint_id": "nope"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .post(
            &path,
            json!({"checkpoint_id": first, "files": false, "history": false}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_fork_at_a_middle_message_has_that_transcript_and_workspace() {
    let h = Harness::new(
        script(),
        "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n",
    )
    .await;
    let server = h.start().await;
    let session = server.session().await;
    let ws = workspace_of(&h, &session);
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    turn(&server, &session, "set up the project").await;
    let after_setup = tree(&ws);
    let setup_messages = transcript(&server, &session).await;
    turn(&server, &session, "change things").await;
    let original_tree = tree(&ws);
    let original_messages = transcript(&server, &session).await;

    let at = setup_messages.last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, fork) = server
        .post(
            &format!("/v1/sessions/{session}/fork"),
            json!({"at_message_id": at}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{fork}");
    let fork_id = fork["id"].as_str().unwrap().to_string();
    assert_ne!(fork_id, session);
    let fork_ws = workspace_of(&h, &fork_id);
    assert_eq!(tree(&fork_ws), after_setup, ".git comes along as it is now");
    let forked: Vec<Value> = transcript(&server, &fork_id)
        .await
        .into_iter()
        .map(|m| m["message"].clone())
        .collect();
    let expected: Vec<Value> = setup_messages
        .iter()
        .map(|m| m["message"].clone())
        .collect();
    assert_eq!(forked, expected);
    // The original is untouched.
    assert_eq!(tree(&ws), original_tree);
    assert_eq!(transcript(&server, &session).await, original_messages);

    // The fork lives on by itself.
    turn(&server, &fork_id, "change things").await;
    assert_eq!(
        std::fs::read_to_string(fork_ws.join("a.txt")).unwrap(),
        "ALPHA\n"
    );
    assert_eq!(tree(&ws), original_tree);

    // Without a message: everything, and the workspace as it is now.
    let (status, whole) = server
        .post(&format!("/v1/sessions/{session}/fork"), json!({}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let whole_id = whole["id"].as_str().unwrap();
    assert_eq!(tree(&workspace_of(&h, whole_id)), original_tree);
    assert_eq!(
        transcript(&server, whole_id).await.len(),
        original_messages.len()
    );
    let (status, _) = server
        .post(
            &format!("/v1/sessions/{session}/fork"),
            json!({"at_message_id": "nope"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_profile_can_turn_checkpoints_off() {
    let h = Harness::new(
        script(),
        "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\ncheckpoints = false\n",
    )
    .await;
    let server = h.start().await;
    let session = server.session().await;
    turn(&server, &session, "set up the project").await;
    assert!(workspace_of(&h, &session).join("a.txt").exists());
    assert!(checkpoints(&server, &session).await.is_empty());
    let events = server.all_events(&session).await;
    assert!(!events.iter().any(|e| e.event == "checkpoint.created"));
}
