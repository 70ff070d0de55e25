//! `agentd sessions checkpoints|rewind|fork` on a local session: the same
//! operations as the server's `…/rewind` and `…/fork`, on the command line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::run_harness;

use run_harness::{Harness, Wire};
use serde_json::{Value, json};

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

/// `sessions show --json`: the session and its transcript, as a user reads them.
fn show(h: &Harness, id: &str) -> (Value, Vec<Value>) {
    let (code, out, err) = output(h, &["sessions", "show", "--json", id]);
    assert_eq!(code, 0, "{err}");
    let value: Value = serde_json::from_str(&out).unwrap();
    let messages = value["messages"].as_array().unwrap().clone();
    (value["session"].clone(), messages)
}

/// The ids of `messages`, in order.
fn ids_of(messages: &[Value]) -> Vec<&str> {
    messages.iter().map(|m| m["id"].as_str().unwrap()).collect()
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

    let (_, all) = show(&h, &id);
    let first_turn_id = first.finished().turn_id.clone();
    let first_turn: Vec<&str> = ids_of(&all)
        .into_iter()
        .zip(&all)
        .filter(|(_, m)| m["turn_id"] == first_turn_id.as_str())
        .map(|(id, _)| id)
        .collect();
    assert_eq!(first_turn.len(), 4, "prompt, tool call, result, answer");
    assert_eq!(all.len(), 8);

    // A fork at the end of the first turn has its files and transcript as
    // they were then.
    let first_turn_end = *first_turn.last().unwrap();
    let (code, forked, err) = output(&h, &["sessions", "fork", &id, "--at", first_turn_end]);
    assert_eq!(code, 0, "{err}");
    let fork_id = forked.trim();
    assert_ne!(fork_id, id);
    let (fork, fork_messages) = show(&h, fork_id);
    let fork_notes = std::path::Path::new(fork["workspace"].as_str().unwrap()).join("notes.txt");
    assert_eq!(std::fs::read_to_string(fork_notes).unwrap(), "first\n");
    assert_eq!(fork_messages.len(), 4);
    assert_eq!(
        fork_messages.last().unwrap()["message"],
        all[3]["message"],
        "the fork ends with the first turn's last message"
    );

    // `--files-only`: the first turn's file comes back, the transcript stays.
    let (code, said, err) = output(&h, &["sessions", "rewind", &id, ids[1], "--files-only"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        said.contains("1 file(s) restored, 0 message(s) removed"),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "first\n");
    assert_eq!(show(&h, &id).1.len(), 8);

    // Both (the default): the file again, and the second turn leaves the
    // transcript.
    std::fs::write(&notes, "changed by hand\n").unwrap();
    let (code, said, err) = output(&h, &["sessions", "rewind", &id, ids[1]]);
    assert_eq!(code, 0, "{err}");
    assert!(
        said.contains("1 file(s) restored, 4 message(s) removed"),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "first\n");
    let (_, left) = show(&h, &id);
    assert_eq!(ids_of(&left), first_turn, "the second turn is gone");

    // `--history-only`: the transcript goes back to before the first turn,
    // the files stay as they are.
    let (code, said, err) = output(&h, &["sessions", "rewind", &id, ids[0], "--history-only"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        said.contains("0 file(s) restored, 4 message(s) removed"),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "first\n");
    assert!(show(&h, &id).1.is_empty());
    let (code, _, err) = output(
        &h,
        &[
            "sessions",
            "rewind",
            &id,
            ids[0],
            "--files-only",
            "--history-only",
        ],
    );
    assert_eq!(code, 2, "one of the two, or neither: {err}");

    let (code, _, err) = output(&h, &["sessions", "rewind", &id, "no-such-checkpoint"]);
    assert_eq!(code, 2, "an unknown checkpoint is a usage error: {err}");
    assert!(err.contains("no checkpoint"), "{err}");
    let (code, _, err) = output(&h, &["sessions", "fork", "no-such-session"]);
    assert_eq!(code, 2, "{err}");
}

#[tokio::test]
async fn sessions_rm_waits_for_a_turn_another_process_runs() {
    let h = Harness::new(Wire::Anthropic, two_turn_script()).await;
    let first = h.run("write notes", &[]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let id = first.session_id();
    // A turn another process (a server, another `agentd run`) is running.
    let store = h.store().await;
    agentd_store::TurnStore::start_turn(&store, &id, "t-elsewhere", None)
        .await
        .unwrap();
    let (code, _, err) = output(&h, &["sessions", "rm", &id]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("has a running turn"), "{err}");
    assert_eq!(show(&h, &id).1.len(), 4, "nothing was deleted");

    agentd_store::TurnStore::finish_turn(
        &store,
        "t-elsewhere",
        agentd_protocol::TurnStatus::Interrupted,
    )
    .await
    .unwrap();
    let (code, said, err) = output(&h, &["sessions", "rm", &id]);
    assert_eq!(code, 0, "{err}");
    assert!(said.contains("removed session"), "{said}");
    assert!(
        h.ws().join("notes.txt").exists(),
        "the project directory of a run session stays"
    );
    let (code, _, _) = output(&h, &["sessions", "show", &id]);
    assert_eq!(code, 2, "gone");
}
