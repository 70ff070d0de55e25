//! Host mounts against someone changing the host under them: a configured
//! host's path swapped for a link after the server resolved it, a thread
//! swapping a component of the hosts' paths while sessions run turns, and
//! a mountable root taken out of the config between turns.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use agentd_testkit::swapper::Swapper;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::serve_harness::Harness;
use crate::serve_mounts::{after_tools, config, dir, shown, tool, turn};

const SECRET: &str = "SECRET-91c2: behind the swapped link";

fn script() -> Value {
    let mut replies = after_tools();
    replies.extend([
        json!({"repeat": true, "when": {"last_user_contains": "look"}, "content": [
            tool("Bash", json!({"command": "cat /mnt/data/file.txt /mnt/asked/file.txt"})),
            tool("Read", json!({"file_path": "/mnt/data/file.txt"}))]}),
        json!({"repeat": true, "when": {"last_user_contains": "data-only"}, "content": [
            tool("Bash", json!({"command": "cat /mnt/data/file.txt"}))]}),
        json!({"repeat": true, "content": [{"type": "text", "text": "ok"}]}),
    ]);
    json!({ "replies": replies })
}

/// `<tmp>/pub/m/{data,asked}/file.txt` (public) and the same under
/// `<tmp>/secret`; `<tmp>/pub/link` leads to the secret one.
fn hosts(tmp: &Path) {
    for (top, text) in [("pub/m", "public-side\n"), ("secret", SECRET)] {
        for sub in ["data", "asked"] {
            let dir = dir(tmp.join(top).join(sub), 0o755);
            std::fs::write(dir.join("file.txt"), text).unwrap();
        }
    }
    dir(tmp.join("pub"), 0o755);
    dir(tmp.join("pub/m"), 0o755);
    std::os::unix::fs::symlink(tmp.join("secret"), tmp.join("pub/link")).unwrap();
}

fn mounts_config(tmp: &Path) -> String {
    config(&format!(
        "[profiles.default]\nallow = [\"Bash\", \"Read\"]\n\
         mounts = [{{ host = \"{}\", path = \"/mnt/data\" }}]\n\
         [users.alice]\nmountable = [\"{}\"]\n",
        shown(&tmp.join("pub/m/data")),
        shown(&tmp.join("pub"))
    ))
}

/// Before the fix a configured host was resolved again every turn: a link
/// swapped in after the start redirected the mount.
#[tokio::test]
async fn a_configured_host_swapped_for_a_link_after_the_start_is_refused() {
    let tmp = TempDir::new().unwrap();
    let tmp = tmp.path().canonicalize().unwrap();
    hosts(&tmp);
    let h = Harness::new(script(), &mounts_config(&tmp)).await;
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let session = alice.session().await;
    let text = turn(&alice, &session, "data-only").await;
    assert!(text.contains("public-side"), "{text}");

    std::fs::rename(tmp.join("pub/m"), tmp.join("pub/parked")).unwrap();
    std::fs::rename(tmp.join("pub/link"), tmp.join("pub/m")).unwrap();
    let text = turn(&alice, &session, "data-only").await;
    assert!(!text.contains(SECRET), "{text}");
    assert!(text.contains("turn_not_started"), "{text}");
    assert!(text.contains("symbolic link"), "{text}");
}

/// The race: a thread exchanging `pub/m` (on the way to both hosts) with a
/// link to the secret twin while two users' sessions run turns that `cat`
/// and Read the mounts. Each turn sees the public side or is refused.
#[tokio::test]
async fn a_component_swapped_for_a_link_during_turns_never_shows_the_secret() {
    let tmp = TempDir::new().unwrap();
    let tmp = tmp.path().canonicalize().unwrap();
    hosts(&tmp);
    let h = Harness::new(script(), &mounts_config(&tmp)).await;
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let bob = server.as_user(&h.token("bob").await);
    let asked =
        json!({"mounts": [{"host": shown(&tmp.join("pub/m/asked")), "path": "/mnt/asked"}]});
    let (status, body) = alice.post("/v1/sessions", asked).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let hers = body["id"].as_str().unwrap().to_string();
    let his = bob.session().await;

    let swapper = Swapper::start(vec![(tmp.join("pub/m"), tmp.join("pub/link"))]);
    let (mut seen, mut refused) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(90);
    while (seen < 4 || refused < 4) && Instant::now() < deadline {
        for (server, session) in [(&alice, &hers), (&bob, &his)] {
            let text = turn(server, session, "look").await;
            assert!(!text.contains("SECRET-91c2"), "{text}");
            if text.contains("public-side") {
                seen += 1;
            }
            if text.contains("turn_not_started") || text.contains("is_error\":true") {
                refused += 1;
            }
        }
    }
    let swaps = swapper.finish();
    assert!(swaps > 0, "the swapper never swapped");
    assert!(seen > 0 && refused > 0, "seen {seen}, refused {refused}");
}

/// Grants are those of now: a session's mount from a root since taken out
/// of the config refuses its next turn, saying why, and is not bound.
#[tokio::test]
async fn a_session_mount_is_refused_once_its_root_is_no_longer_granted() {
    let tmp = TempDir::new().unwrap();
    let tmp = tmp.path().canonicalize().unwrap();
    hosts(&tmp);
    let h = Harness::new(script(), &mounts_config(&tmp)).await;
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let asked =
        json!({"mounts": [{"host": shown(&tmp.join("pub/m/asked")), "path": "/mnt/asked"}]});
    let (status, body) = alice.post("/v1/sessions", asked).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let session = body["id"].as_str().unwrap().to_string();
    let text = turn(&alice, &session, "look").await;
    assert!(text.contains("public-side"), "{text}");

    server.terminate().await;
    let without = mounts_config(&tmp).replace(
        &format!(
            "[users.alice]\nmountable = [\"{}\"]\n",
            shown(&tmp.join("pub"))
        ),
        "",
    );
    assert_ne!(without, mounts_config(&tmp));
    std::fs::write(&h.config, without).unwrap();
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let text = turn(&alice, &session, "look").await;
    assert!(text.contains("turn_not_started"), "{text}");
    assert!(text.contains("mountable roots"), "{text}");
    assert!(!text.contains("public-side"), "{text}");
}
