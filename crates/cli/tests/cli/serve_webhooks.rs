//! `[[webhooks]]` over real HTTP: a receiver on loopback gets signed
//! `permission.requested`, `question.asked` and `turn.finished` deliveries,
//! retried after a dropped connection and a 500, a session's deliveries in
//! order even when an earlier one needed retries, the admin delivery log
//! showing the attempts; on SQLite and PostgreSQL, and across a restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod receiver;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::serve_harness::{Harness, SseEvent, fresh_database_url};
use receiver::{Answer, Receiver};

const SECRET: &str = "hook-s3cret";

fn tool_use(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn script() -> Value {
    json!({"replies": [
        {"when": {"last_tool_name": "AskUserQuestion"}, "content": [text("Blue it is.")]},
        {"when": {"last_user_contains": "ask me"}, "content": [
            tool_use("toolu_ask_1", "AskUserQuestion", json!({"questions": [{
                "question": "Which colour?", "header": "Colour", "multiSelect": false,
                "options": [{"label": "Blue", "description": "calm"},
                            {"label": "Red", "description": "bold"}]}]}))]},
        {"when": {"last_tool_name": "Bash"}, "content": [text("Touched.")]},
        {"when": {"last_user_contains": "touch"}, "content": [
            tool_use("toolu_bash_1", "Bash", json!({"command": "touch approved.txt"}))]},
    ]})
}

/// The config: a webhook for every event (secret from the environment,
/// fast retries) and one for another user's sessions only.
fn config(receiver: &Receiver, database: &str) -> String {
    format!(
        "[server]\nauth = \"none\"\n{database}\n\
         [[webhooks]]\nname = \"team\"\nurl = \"{url}/hook\"\n\
         events = [\"turn.finished\", \"permission.requested\", \"question.asked\", \"budget\"]\n\
         secret_env = \"HOOK_SECRET\"\npublic_url = \"https://agentd.example\"\n\
         retry_first_s = 0.2\nretry_max_s = 0.5\ntimeout_s = 5\n\
         [[webhooks]]\nname = \"others\"\nurl = \"{url}/others\"\n\
         events = [\"turn.finished\"]\nsecret = \"x\"\nusers = [\"someone-else\"]\n",
        url = receiver.url
    )
}

async fn next_of(stream: &mut crate::serve_harness::EventStream, kind: &str) -> SseEvent {
    loop {
        let event = stream.next().await.expect("the stream ended");
        if event.event == kind {
            return event;
        }
    }
}

fn delivered_events(received: &[receiver::Received], session: &str) -> Vec<String> {
    received
        .iter()
        .filter(|r| r.answer == Answer::Ok && r.json()["session_id"] == session)
        .map(receiver::Received::event)
        .collect()
}

async fn signed_in_order_with_retries(database: &str) {
    let receiver = Receiver::start().await;
    // The permission request fails (connection dropped, then 500) until the
    // test has seen the turn end: its `turn.finished` must wait meanwhile.
    let release = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let released = release.clone();
    receiver.answer_with(move |request, earlier| {
        let tries = earlier
            .iter()
            .filter(|r| r.event() == request.event())
            .count();
        match request.event().as_str() {
            "permission.requested" if tries == 0 => Answer::Close,
            "permission.requested" if !released.load(std::sync::atomic::Ordering::SeqCst) => {
                Answer::Status500
            }
            _ => Answer::Ok,
        }
    });
    let h = Harness::new(script(), &config(&receiver, database)).await;
    let server = h.start_with_env(&[("HOOK_SECRET", SECRET)]).await;

    let session = server.session().await;
    let mut stream = server.events(&session, None).await;
    server.message(&session, "touch it").await;
    let requested = next_of(&mut stream, "permission.requested").await;
    let request_id = requested.data["request_id"].as_str().unwrap().to_string();
    let path = format!("/v1/sessions/{session}/permissions/{request_id}");
    let (status, body) = server.post(&path, json!({"decision": "allow"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    next_of(&mut stream, "turn.finished").await;
    // The end is queued; give a wrong sender time to send it out of order.
    receiver
        .wait_for("a retry of the permission request", |r| {
            r.iter()
                .filter(|r| r.event() == "permission.requested")
                .count()
                >= 3
        })
        .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(
        !receiver
            .received()
            .iter()
            .any(|r| r.event() == "turn.finished"),
        "turn.finished went out before the permission request was delivered"
    );
    release.store(true, std::sync::atomic::Ordering::SeqCst);
    let received = receiver
        .wait_for("the turn's end", |r| {
            delivered_events(r, &session).contains(&"turn.finished".to_string())
        })
        .await;
    assert_eq!(
        delivered_events(&received, &session),
        ["permission.requested", "turn.finished"]
    );
    let attempts: Vec<Answer> = received
        .iter()
        .filter(|r| r.event() == "permission.requested")
        .map(|r| r.answer)
        .collect();
    assert_eq!(
        attempts[..2],
        [Answer::Close, Answer::Status500],
        "{attempts:?}"
    );
    assert_eq!(attempts.last(), Some(&Answer::Ok));

    // Every attempt is signed; the body says what happened and where to answer.
    for request in &received {
        assert!(request.signed_with(SECRET), "bad signature: {request:?}");
        assert_eq!(request.path, "/hook", "the users filter let it through");
        assert_eq!(
            request.json()["delivery_id"],
            request.headers["x-agentd-delivery"]
        );
    }
    let delivered = |event: &str| {
        received
            .iter()
            .find(|r| r.event() == event && r.answer == Answer::Ok)
            .unwrap()
            .json()
    };
    let permission = delivered("permission.requested");
    assert_eq!(permission["session_id"], session.as_str());
    assert_eq!(permission["owner"], "local");
    assert!(
        permission["turn_id"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
    );
    assert_eq!(permission["data"]["tool"], "Bash");
    assert!(
        permission["data"]["expires_at"]
            .as_str()
            .is_some_and(|t| t > permission["timestamp"].as_str().unwrap()),
        "{permission}"
    );
    assert!(
        permission["data"]["input_summary"]
            .as_str()
            .unwrap()
            .contains("touch approved.txt")
    );
    assert_eq!(
        permission["data"]["answer"]["url"],
        format!("https://agentd.example{path}")
    );
    let finished = delivered("turn.finished");
    assert_eq!(finished["data"]["status"], "completed");
    assert_eq!(finished["data"]["result"], "Touched.");
    assert_eq!(finished["turn_id"], permission["turn_id"]);

    // A question goes out too, and its answer route works.
    let asking = server.session().await;
    let mut stream = server.events(&asking, None).await;
    server.message(&asking, "ask me a colour").await;
    let asked = next_of(&mut stream, "question.asked").await;
    let received = receiver
        .wait_for("the question", |r| {
            delivered_events(r, &asking).contains(&"question.asked".into())
        })
        .await;
    let question = received
        .iter()
        .find(|r| r.event() == "question.asked")
        .unwrap();
    assert!(question.signed_with(SECRET));
    let question = question.json();
    assert_eq!(
        question["data"]["questions"][0]["question"],
        "Which colour?"
    );
    let answer = question["data"]["answer"]["path"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        answer.ends_with(asked.data["request_id"].as_str().unwrap()),
        "{answer}"
    );
    let (status, body) = server
        .post(&answer, json!({"answers": {"Which colour?": "Blue"}}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    next_of(&mut stream, "turn.finished").await;
    receiver
        .wait_for("the second turn's end", |r| {
            delivered_events(r, &asking) == ["question.asked", "turn.finished"]
        })
        .await;

    // The admin log shows each delivery's attempts, once the sender has
    // recorded the last answer (the receiver saw it a moment before).
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let log = loop {
        let (status, log) = server.get("/v1/admin/webhooks/deliveries?limit=50").await;
        assert_eq!(status, StatusCode::OK, "{log}");
        let done = log["deliveries"]
            .as_array()
            .is_some_and(|all| all.iter().all(|d| d["status"] == "delivered"));
        if done || tokio::time::Instant::now() > deadline {
            break log;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let deliveries = log["deliveries"].as_array().unwrap();
    let permission_row = deliveries
        .iter()
        .find(|d| d["event"] == "permission.requested")
        .unwrap();
    assert_eq!(permission_row["status"], "delivered");
    assert_eq!(permission_row["webhook"], "team");
    assert!(
        permission_row["attempts"].as_u64().unwrap() >= 3,
        "{permission_row}"
    );
    assert_eq!(permission_row["last_status"], 204);
    assert!(
        deliveries.iter().all(|d| d["status"] == "delivered"),
        "{log}"
    );
    assert_eq!(deliveries.len(), 4, "{log}");
    let (status, none) = server
        .get("/v1/admin/webhooks/deliveries?status=pending")
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(none["deliveries"], json!([]));
    let (status, _) = server
        .get("/v1/admin/webhooks/deliveries?status=lost")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn signed_deliveries_retried_and_in_order_on_sqlite() {
    signed_in_order_with_retries("").await;
}

#[tokio::test]
async fn signed_deliveries_retried_and_in_order_on_postgres() {
    let url = fresh_database_url().await;
    signed_in_order_with_retries(&format!("[database]\nurl = \"{url}\"\n")).await;
}

/// A delivery queued while the receiver is down is still sent after the
/// server is killed and started again.
#[tokio::test]
async fn the_outbox_survives_a_restart() {
    let receiver = Receiver::start().await;
    receiver.answer_with(|_, _| Answer::Status500);
    let toml = format!(
        "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n\
         [[webhooks]]\nurl = \"{}/hook\"\nevents = [\"turn.finished\"]\nsecret = \"{SECRET}\"\n\
         retry_first_s = 0.2\nretry_max_s = 0.2\nmax_attempts = 1000\n",
        receiver.url
    );
    let h = Harness::new(json!({"replies": [{"content": [text("hello")]}]}), &toml).await;
    let server = h.start().await;
    let session = server.session().await;
    server.message(&session, "hi").await;
    server.wait_idle(&session).await;
    receiver
        .wait_for("a failed attempt", |r| !r.is_empty())
        .await;
    server.kill9().await;

    receiver.answer_with(|_, _| Answer::Ok);
    let server = h.start().await;
    let received = receiver
        .wait_for("the delivery after the restart", |r| {
            delivered_events(r, &session) == ["turn.finished"]
        })
        .await;
    assert!(received.iter().all(|r| r.signed_with(SECRET)));
    let (_, log) = server.get("/v1/admin/webhooks/deliveries").await;
    assert_eq!(log["deliveries"][0]["status"], "delivered", "{log}");
}

/// A turn cut short by the server's death is finished as `interrupted` when
/// it starts again, and that end goes to the webhook like any other.
#[tokio::test]
async fn a_turn_ended_by_a_restart_is_sent() {
    let receiver = Receiver::start().await;
    let toml = format!(
        "[server]\nauth = \"none\"\n\
         [[webhooks]]\nurl = \"{}/hook\"\nevents = [\"turn.finished\"]\nsecret = \"{SECRET}\"\n",
        receiver.url
    );
    let h = Harness::new(script(), &toml).await;
    let server = h.start().await;
    let session = server.session().await;
    let mut stream = server.events(&session, None).await;
    server.message(&session, "touch it").await;
    // The turn waits for an answer that never comes: the server dies.
    next_of(&mut stream, "permission.requested").await;
    server.kill9().await;

    let _server = h.start().await;
    let received = receiver
        .wait_for("the interrupted turn's end", |r| {
            delivered_events(r, &session) == ["turn.finished"]
        })
        .await;
    let finished = received[0].json();
    assert!(received[0].signed_with(SECRET));
    assert_eq!(finished["data"]["status"], "interrupted", "{finished}");
    assert_eq!(
        finished["data"]["error"]["code"], "server_restarted",
        "{finished}"
    );
    assert!(finished["turn_id"].as_str().is_some_and(|t| !t.is_empty()));
}

/// A turn stopped by its budget sends `budget` (and only what was asked for).
#[tokio::test]
async fn a_spent_budget_is_sent() {
    let receiver = Receiver::start().await;
    // $1 per model call (100 input tokens at $10 000 per million).
    let toml = format!(
        "[server]\nauth = \"none\"\n[models.default]\nprovider = \"anthropic\"\n\
         model = \"claude-sonnet-4-5\"\nbase_url = \"{{URL}}\"\n\
         [models.default.price]\ninput_per_mtok = 10000.0\noutput_per_mtok = 0.0\n\
         [profiles.default]\nmode = \"bypass\"\nmax_budget_usd = 1.5\nmax_identical_calls = 0\n\
         [[webhooks]]\nurl = \"{}/hook\"\nevents = [\"budget\"]\nsecret = \"{SECRET}\"\n",
        receiver.url
    );
    let script = json!({"replies": [{"repeat": true, "usage": {"input_tokens": 100},
        "content": [tool_use("toolu_spend", "Bash", json!({"command": "echo spend"}))]}]});
    let h = Harness::new(script, &toml).await;
    let server = h.start().await;
    let session = server.session().await;
    server.message(&session, "spend").await;
    server.wait_idle(&session).await;
    let received = receiver
        .wait_for("the budget delivery", |r| {
            !delivered_events(r, &session).is_empty()
        })
        .await;
    assert_eq!(delivered_events(&received, &session), ["budget"]);
    let budget = received[0].json();
    assert!(received[0].signed_with(SECRET));
    assert_eq!(budget["data"]["limit"], "max_budget_usd", "{budget}");
    assert_eq!(budget["data"]["status"], "budget_exceeded");
    assert_eq!(budget["data"]["code"], "budget_exceeded");
    assert_eq!(budget["data"]["cost_usd"], 2.0);
}

#[tokio::test]
async fn bad_webhook_config_is_refused_at_start() {
    let cases = [
        ("events = [\"turn.done\"]\nsecret = \"s\"", "turn.done"),
        ("events = [\"budget\"]", "secret"),
        ("events = []\nsecret = \"s\"", "events is empty"),
    ];
    for (rest, expected) in cases {
        let toml = format!("[[webhooks]]\nurl = \"http://127.0.0.1:9/h\"\n{rest}\n");
        let h = Harness::new(json!({"replies": []}), &toml).await;
        let (code, _, stderr) = h.cli(&["serve", "--bind", "127.0.0.1:0"]).await;
        assert_ne!(code, 0);
        assert!(stderr.contains(expected), "{expected:?} not in {stderr}");
    }
    let toml =
        "[[webhooks]]\nurl = \"ftp://example.com/h\"\nevents = [\"budget\"]\nsecret = \"s\"\n";
    let h = Harness::new(json!({"replies": []}), toml).await;
    let (code, _, stderr) = h.cli(&["serve", "--bind", "127.0.0.1:0"]).await;
    assert_ne!(code, 0);
    assert!(stderr.contains("http:// or https://"), "{stderr}");
    // A secret named by the environment must be there.
    let toml = "[[webhooks]]\nurl = \"http://127.0.0.1:9/h\"\nevents = [\"budget\"]\nsecret_env = \"NOPE\"\n";
    let h = Harness::new(json!({"replies": []}), toml).await;
    let (code, _, stderr) = h.cli(&["serve", "--bind", "127.0.0.1:0"]).await;
    assert_ne!(code, 0);
    assert!(stderr.contains("NOPE is not set"), "{stderr}");
}
