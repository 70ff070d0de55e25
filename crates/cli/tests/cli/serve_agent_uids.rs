//! Least privilege: run as root (as the tests are), `agentd serve` runs each
//! user's agent as an unprivileged uid of that user's own, recorded in the
//! store, and one user's agent cannot reach another's workspace — not with a
//! shell, not with the file tools, not through a symlink. Run as another
//! user, agentd runs agents as itself, as it always did.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use agentd_store::sqlite::SqliteStore;
use serde_json::{Value, json};

use crate::serve_harness::{Harness, SseEvent};

/// The bypass profile is granted to everyone by name (admin-only otherwise).
const CONFIG: &str = "[server]\nauth = \"token\"\n[access]\nprofiles = [\"default\"]\n\
    [profiles.default]\nmode = \"bypass\"\n";
const SECRET: &str = "BOB-SECRET-42";
/// A file of Bob's that Alice's agent never names: only a listing could show it.
const UNNAMED: &str = "bob-only-listing.txt";

fn tool(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

fn bob_script() -> Value {
    json!({"replies": [
        {"when": {"last_user_contains": "bob: write"}, "content": [
            tool("bob_write", "Write", json!({"file_path": "secret", "content": SECRET})),
            tool("bob_bash", "Bash", json!({"command": format!("id -u; echo hidden > {UNNAMED}")}))]},
        {"when": {"last_tool_name": "Bash"}, "content": [{"type": "text", "text": "kept"}]}
    ]})
}

fn alice_script(bob_ws: &Path) -> Value {
    let bob = bob_ws.display();
    let command = format!(
        "id -u; ls -la {bob}; cat {bob}/secret; ln -s {bob} link; cat link/secret; ls link/; \
         echo made > made_by_bash.txt; echo ALICE-BASH-DONE"
    );
    json!({"replies": [
        {"when": {"last_user_contains": "alice: look"}, "content": [
            tool("alice_bash", "Bash", json!({"command": command}))]},
        {"when": {"last_tool_result_contains": "ALICE-BASH-DONE"}, "content": [
            tool("read_abs", "Read", json!({"file_path": format!("{bob}/secret")})),
            tool("ls_abs", "LS", json!({"path": bob.to_string()})),
            tool("read_link", "Read", json!({"file_path": "link/secret"})),
            tool("ls_link", "LS", json!({"path": "link"})),
            tool("alice_write", "Write", json!({"file_path": "written.txt", "content": "mine"}))]},
        {"when": {"last_tool_name": "Write"}, "content": [{"type": "text", "text": "looked"}]}
    ]})
}

/// `(uid, gid)` of `path` itself (a symlink is not followed).
fn owner(path: &Path) -> (u32, u32) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    (meta.uid(), meta.gid())
}

fn workspace(h: &Harness, session: &str) -> PathBuf {
    h.data()
        .join("workspaces")
        .join(session)
        .canonicalize()
        .unwrap()
}

/// The `tool.finished` event of each call, by call id.
fn results(events: &[SseEvent]) -> std::collections::BTreeMap<String, (bool, String)> {
    events
        .iter()
        .filter(|e| e.event == "tool.finished")
        .map(|e| {
            let output = e.data["output"].as_str().unwrap().to_string();
            let call = e.data["call_id"].as_str().unwrap().to_string();
            (call, (e.data["is_error"].as_bool().unwrap(), output))
        })
        .collect()
}

/// The uid the store recorded for `user`, if any.
async fn recorded_uid(store: &SqliteStore, user: &str) -> Option<u32> {
    let uid: Option<i64> = sqlx::query_scalar("SELECT uid FROM agent_uids WHERE user_name = ?")
        .bind(user)
        .fetch_optional(store.pool())
        .await
        .unwrap();
    uid.map(|uid| u32::try_from(uid).unwrap())
}

#[tokio::test]
async fn each_user_s_agent_is_its_own_uid_and_cannot_reach_another_s_workspace() {
    let h = Harness::new(bob_script(), CONFIG).await;
    // The test's own uid and gid: what a data dir it made has.
    let (me, my_gid) = owner(h.data());
    let root = me == 0;
    let alice_token = h.token("alice").await;
    let bob_token = h.token("bob").await;
    let server = h.start().await;
    let alice = server.as_user(&alice_token);
    let bob = server.as_user(&bob_token);

    // Bob's agent leaves a secret and a file Alice's never names.
    let b = bob.session().await;
    bob.message(&b, "bob: write the secret").await;
    let finished = bob.wait_idle(&b).await;
    assert_eq!(finished["totals"]["turns"], 1, "{finished}");
    let bob_events = bob.all_events(&b).await;
    let bob_results = results(&bob_events);
    let bob_ws = workspace(&h, &b);
    assert_eq!(
        std::fs::read_to_string(bob_ws.join("secret")).unwrap(),
        SECRET
    );

    let a = alice.session().await;
    h.model
        .set_script(serde_json::from_value(alice_script(&bob_ws)).unwrap());
    alice.message(&a, "alice: look around").await;
    alice.wait_idle(&a).await;
    let alice_events = alice.all_events(&a).await;
    let finished = alice_events.last().unwrap();
    assert_eq!(finished.event, "turn.finished");
    assert_eq!(finished.data["status"], "completed", "{:?}", finished.data);
    let alice_results = results(&alice_events);
    let alice_ws = workspace(&h, &a);

    // Whom each agent ran as: `id -u` in its sandbox, the owner of its
    // workspace and of what it made, and the store's record.
    let shown_uid = |results: &std::collections::BTreeMap<String, (bool, String)>, call: &str| {
        let (_, output) = &results[call];
        let line = output.lines().next().unwrap_or_default();
        line.trim()
            .parse::<u32>()
            .unwrap_or_else(|_| panic!("no uid first in {output:?}"))
    };
    let alice_uid = shown_uid(&alice_results, "alice_bash");
    let bob_uid = shown_uid(&bob_results, "bob_bash");
    let store = SqliteStore::open(&h.data().join("agentd.db"))
        .await
        .unwrap();
    if root {
        assert_ne!(alice_uid, 0, "Alice's agent must not run as root");
        assert_ne!(bob_uid, 0, "Bob's agent must not run as root");
        assert_ne!(alice_uid, bob_uid, "each user has a uid of their own");
        assert_eq!(recorded_uid(&store, "alice").await, Some(alice_uid));
        assert_eq!(recorded_uid(&store, "bob").await, Some(bob_uid));
        for uid in [alice_uid, bob_uid] {
            assert!((200_000..=299_999).contains(&uid), "{uid}");
        }
        let data_mode = std::fs::metadata(h.data()).unwrap().permissions().mode();
        assert_eq!(data_mode & 0o777, 0o700, "the data dir is root's alone");
        assert_eq!(owner(h.data()).0, 0);
    } else {
        // Not root: agents run as the server's own uid, and nothing is allocated.
        assert_eq!((alice_uid, bob_uid), (me, me));
        assert_eq!(recorded_uid(&store, "alice").await, None);
        assert_eq!(recorded_uid(&store, "bob").await, None);
    }
    let (alice_gid, bob_gid) = if root {
        (alice_uid, bob_uid)
    } else {
        (my_gid, my_gid)
    };
    assert_eq!(owner(&alice_ws), (alice_uid, alice_gid));
    assert_eq!(owner(&bob_ws), (bob_uid, bob_gid));
    for ws in [&alice_ws, &bob_ws] {
        let mode = std::fs::metadata(ws).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", ws.display());
    }
    for made in ["made_by_bash.txt", "link", "written.txt"] {
        assert_eq!(
            owner(&alice_ws.join(made)),
            (alice_uid, alice_gid),
            "{made} is Alice's agent's"
        );
    }
    for made in ["secret", UNNAMED] {
        assert_eq!(owner(&bob_ws.join(made)), (bob_uid, bob_gid), "{made}");
    }

    // Alice's agent never saw Bob's secret or the names of his files.
    for (call, (_, output)) in &alice_results {
        assert!(!output.contains(SECRET), "{call}: {output}");
        assert!(!output.contains(UNNAMED), "{call}: {output}");
    }
    for call in ["read_abs", "ls_abs", "read_link", "ls_link"] {
        let (is_error, output) = &alice_results[call];
        assert!(is_error, "{call} must fail: {output}");
    }
    assert!(
        !alice_results["alice_write"].0,
        "{:?}",
        alice_results["alice_write"]
    );
    for request in h.model_requests() {
        let body = request.body_text();
        if body.contains("alice: look") {
            assert!(!body.contains(SECRET) && !body.contains(UNNAMED), "{body}");
        }
    }
    assert_eq!(
        std::fs::read_to_string(bob_ws.join("secret")).unwrap(),
        SECRET
    );
}
