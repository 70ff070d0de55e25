//! `agentd sessions checkpoints|rewind|fork` on a local session: the same
//! operations as the server's `…/rewind` and `…/fork`, on the command line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::run_harness;

use run_harness::{Harness, Wire};
use serde_json::json;

fn two_turn_script() -> serde_json::Value {
    json!({"replies": [
        {"content": [{"type": "tool_use", "name": "Write",
            "input": {"file_path": "notes.txt", "content": "first\n"}}]},
        {"content": [{"type": "text", "text": "wrote it"}]},
        {"content": [{"type": "tool_use", "name": "Write",
            "input": {"file_path": "notes.txt", "content": "second\n"}}]},
        {"content": [{"type": "text", "text": "changed it"}]}
    ]})
}

fn output(h: &Harness, args: &[&str]) -> (i32, String, String) {
    let out = h.command(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn rewind_and_fork_a_local_session_from_the_command_line() {
    let h = Harness::new(Wire::Anthropic, two_turn_script()).await;
    let first = h.run("write notes", &[]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let id = first.session_id();
    let second = h.run("change notes", &["--resume", &id]).await;
    assert_eq!(second.code, 0, "{}", second.stderr);
    let notes = h.ws().join("notes.txt");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "second\n");

    let (code, listed, err) = output(&h, &["sessions", "checkpoints", &id]);
    assert_eq!(code, 0, "{err}");
    let ids: Vec<&str> = listed
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(ids.len(), 2, "one checkpoint per turn that wrote: {listed}");

    // A fork at the end of the first turn has its files as they were then.
    let store = agentd_store::TranscriptStore::messages(&h.store().await, &id)
        .await
        .unwrap();
    let first_turn_end = store
        .iter()
        .rfind(|m| m.turn_id.as_deref() == Some(first.finished().turn_id.as_str()))
        .unwrap()
        .id
        .clone();
    let (code, forked, err) = output(&h, &["sessions", "fork", &id, "--at", &first_turn_end]);
    assert_eq!(code, 0, "{err}");
    let fork_id = forked.trim();
    assert_ne!(fork_id, id);
    let fork = agentd_store::SessionStore::get_session(&h.store().await, fork_id)
        .await
        .unwrap()
        .unwrap();
    let fork_notes = std::path::Path::new(&fork.workspace).join("notes.txt");
    assert_eq!(std::fs::read_to_string(fork_notes).unwrap(), "first\n");
    let fork_messages = agentd_store::TranscriptStore::messages(&h.store().await, fork_id)
        .await
        .unwrap();
    assert_eq!(
        fork_messages.last().unwrap().message,
        store
            .iter()
            .find(|m| m.id == first_turn_end)
            .unwrap()
            .message
    );

    // Rewinding the original to its second checkpoint: the first turn's file
    // comes back and the second turn leaves the transcript.
    let (code, said, err) = output(&h, &["sessions", "rewind", &id, ids[1]]);
    assert_eq!(code, 0, "{err}");
    assert!(said.contains("1 file(s) restored"), "{said}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "first\n");
    let left = agentd_store::TranscriptStore::messages(&h.store().await, &id)
        .await
        .unwrap();
    let first_turn: Vec<&str> = store
        .iter()
        .filter(|m| m.turn_id.as_deref() == Some(first.finished().turn_id.as_str()))
        .map(|m| m.id.as_str())
        .collect();
    let left: Vec<&str> = left.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(
        left, first_turn,
        "the second turn is gone from the transcript"
    );
    assert!(
        said.contains(&format!(
            "{} message(s) removed",
            store.len() - first_turn.len()
        )),
        "{said}"
    );

    let (code, _, err) = output(&h, &["sessions", "rewind", &id, "no-such-checkpoint"]);
    assert_eq!(code, 2, "an unknown checkpoint is a usage error: {err}");
    assert!(err.contains("no checkpoint"), "{err}");
    let (code, _, err) = output(&h, &["sessions", "fork", "no-such-session"]);
    assert_eq!(code, 2, "{err}");
}
