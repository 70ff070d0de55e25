//! Each user's limits over real HTTP: turns at once and per hour answer 429
//! with `Retry-After`; spend, stored sessions and workspace bytes answer
//! `403 quota_exceeded`; a turn that spends the rest of a quota ends as
//! `budget_exceeded`; each recovers, and refusals are counted per user.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::serve_harness::{Harness, Server, WAIT};

/// $1 per model call of the SPEND-IT conversation (100 input tokens at
/// $10 000 per million); other conversations cost nothing.
const CONFIG: &str = "[models.default]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\
    base_url = \"{URL}\"\n\
    [models.default.price]\ninput_per_mtok = 10000.0\noutput_per_mtok = 0.0\n\
    [access]\nprofiles = [\"default\"]\n\
    [profiles.default]\nmode = \"bypass\"\nmax_identical_calls = 0\n\
    [users.carol.quotas]\nmax_running_turns = 1\n\
    [users.dave.quotas]\nturns_per_hour = 2\n\
    [users.erin.quotas]\nmax_sessions = 1\n\
    [users.frank.quotas]\nspend_usd_per_day = 2.5\n\
    [users.gina.quotas]\nworkspace_bytes = 1000000\n";

fn script() -> Value {
    let bash = |command: &str| json!([{"type": "tool_use", "name": "Bash", "input": {"command": command}}]);
    json!({"replies": [
        {"repeat": true, "when": {"last_user_contains": "wait"}, "content": bash("sleep 60")},
        {"repeat": true, "when": {"any_contains": "SPEND-IT"}, "usage": {"input_tokens": 100},
         "content": bash("echo SPEND-IT")},
        {"repeat": true, "when": {"last_user_contains": "fill"},
         "content": bash("head -c 3000000 /dev/urandom > big")},
        {"repeat": true, "content": [{"type": "text", "text": "ok"}]}
    ]})
}

async fn post_message(
    server: &Server,
    session: &str,
    content: &str,
) -> (StatusCode, Value, Option<u64>) {
    let request = server
        .request(Method::POST, &format!("/v1/sessions/{session}/messages"))
        .json(&json!({"content": content}));
    let response = request.send().await.unwrap();
    let status = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body, retry_after)
}

/// Start the server with `limits` (`key = value` lines of the config) set.
async fn start(h: &Harness, limits: &[(&str, &str)]) -> Server {
    let toml = std::fs::read_to_string(&h.config).unwrap();
    let toml: Vec<String> = toml
        .lines()
        .map(|line| {
            let set = limits
                .iter()
                .find(|(key, _)| line.starts_with(&format!("{key} =")));
            match set {
                Some((key, value)) => format!("{key} = {value}"),
                None => line.to_string(),
            }
        })
        .collect();
    std::fs::write(&h.config, toml.join("\n")).unwrap();
    h.start().await
}

#[tokio::test]
async fn each_quota_trips_with_its_status_and_recovers() {
    let h = Harness::new(script(), CONFIG).await;
    let tokens: Vec<(&str, String)> = {
        let mut tokens = Vec::new();
        for user in ["root", "carol", "dave", "erin", "frank", "gina"] {
            tokens.push((user, String::new()));
        }
        for (user, token) in &mut tokens {
            *token = if *user == "root" {
                let (_, out, _) = h
                    .cli(&["tokens", "create", "--user", "root", "--admin"])
                    .await;
                out.trim().to_string()
            } else {
                h.token(user).await
            };
        }
        tokens
    };
    let token = |name: &str| tokens.iter().find(|(u, _)| *u == name).unwrap().1.clone();
    let server = start(&h, &[]).await;
    let root = server.as_user(&token("root"));

    // Turns at once: the second waits for the first (429), then goes.
    let carol = server.as_user(&token("carol"));
    let first = carol.session().await;
    let second = carol.session().await;
    // Refused at once: counted from the 202, not from when it starts.
    let waiting = json!({"content": "wait for me", "client_request_id": "r-1"});
    let path = format!("/v1/sessions/{first}/messages");
    let (status, accepted) = carol.post(&path, waiting.clone()).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, error, retry_after) = post_message(&carol, &second, "hello").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{error}");
    assert_eq!(error["error"]["code"], "rate_limited");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_running_turns")
    );
    assert!(
        retry_after.is_some_and(|s| s >= 1),
        "Retry-After: {retry_after:?}"
    );
    // A retry of the accepted request is its turn, whatever the limit says.
    let (status, again) = carol.post(&path, waiting).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{again}");
    assert_eq!(again["state"], "duplicate");
    assert_eq!(again["turn_id"], accepted["turn_id"]);
    let (status, _) = carol
        .post(&format!("/v1/sessions/{first}/interrupt"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    carol.wait_idle(&first).await;
    let (status, body, _) = post_message(&carol, &second, "hello").await;
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "recovers once the turn ended: {body}"
    );
    carol.wait_idle(&second).await;

    // Turns per hour: queued turns count; the third is refused until the
    // first is an hour old.
    let dave = server.as_user(&token("dave"));
    let session = dave.session().await;
    let queue = |content: &str| {
        dave.request(Method::POST, &format!("/v1/sessions/{session}/messages"))
            .json(&json!({"content": content, "queue": true}))
    };
    for content in ["one", "two"] {
        let (status, body) = dave.send(queue(content)).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    let (status, error) = dave.send(queue("three")).await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "queued turns count: {error}"
    );
    dave.wait_idle(&session).await;
    let (status, error, retry_after) = post_message(&dave, &session, "hi").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{error}");
    let wait = retry_after.unwrap();
    assert!((3000..=3600).contains(&wait), "about an hour: {wait}");

    // Stored sessions: the second is refused until the first is deleted.
    let erin = server.as_user(&token("erin"));
    let kept = erin.session().await;
    let (status, error) = erin.post("/v1/sessions", json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(error["error"]["code"], "quota_exceeded");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_sessions")
    );
    let (status, _) = erin
        .post(&format!("/v1/sessions/{kept}/fork"), json!({}))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a fork is a session too");
    let (status, _) = erin
        .send(erin.request(Method::DELETE, &format!("/v1/sessions/{kept}")))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    erin.session().await;

    // Workspace bytes: over the quota no turn starts; deleting recovers.
    let gina = server.as_user(&token("gina"));
    let full = gina.session().await;
    gina.message(&full, "fill it").await;
    gina.wait_idle(&full).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, error, _) = post_message(&gina, &full, "more").await;
        if status == StatusCode::FORBIDDEN {
            assert_eq!(error["error"]["code"], "quota_exceeded");
            assert!(
                error["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("workspace_bytes")
            );
            break;
        }
        // Sizes are remembered a few seconds; until then turns still run.
        assert_eq!(status, StatusCode::ACCEPTED, "{error}");
        gina.wait_idle(&full).await;
        assert!(
            tokio::time::Instant::now() < deadline,
            "never over the quota"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (_, usage) = gina.get("/v1/usage").await;
    assert!(
        usage["workspace_bytes"].as_u64().unwrap() >= 3_000_000,
        "{usage}"
    );
    assert_eq!(usage["limits"]["workspace_bytes"], 1_000_000);
    let (status, _) = gina.post("/v1/sessions", json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "no new session either");
    let (status, _) = gina
        .send(gina.request(Method::DELETE, &format!("/v1/sessions/{full}")))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, body) = gina.post("/v1/sessions", json!({})).await;
        if status == StatusCode::CREATED {
            break;
        }
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(tokio::time::Instant::now() < deadline, "never recovered");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // Spend: the turn that reaches the day's cap ends as budget_exceeded,
    // the next is refused.
    let frank = server.as_user(&token("frank"));
    let spender = frank.session().await;
    frank.message(&spender, "SPEND-IT").await;
    frank.wait_idle(&spender).await;
    let events = frank.all_events(&spender).await;
    let done = events.iter().rfind(|e| e.event == "turn.finished").unwrap();
    assert_eq!(done.data["status"], "budget_exceeded", "{:?}", done.data);
    assert_eq!(done.data["error"]["code"], "spend_quota_exceeded");
    assert_eq!(
        done.data["cost_usd"], 3.0,
        "stopped at the call that crossed $2.50"
    );
    let (status, error, _) = post_message(&frank, &spender, "SPEND-IT again").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{error}");
    assert_eq!(error["error"]["code"], "quota_exceeded");
    let (_, usage) = frank.get("/v1/usage").await;
    assert_eq!(usage["spend_today_usd"], 3.0, "{usage}");

    // Everything above, counted per user for admins.
    let response = root
        .request(Method::GET, "/v1/admin/metrics")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let metrics = response.text().await.unwrap();
    for series in [
        "agentd_user_refusals_total{user=\"carol\",limit=\"max_running_turns\"} 1",
        "agentd_user_refusals_total{user=\"dave\",limit=\"turns_per_hour\"} 2",
        "agentd_user_refusals_total{user=\"frank\",limit=\"spend_usd_per_day\"} 1",
        "agentd_user_turns_total{user=\"dave\"} 2",
        "agentd_user_spend_usd_total{user=\"frank\"} 3",
    ] {
        assert!(metrics.contains(series), "{series} in\n{metrics}");
    }
    let (status, _) = server.get("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    let public = server
        .request(Method::GET, "/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !public.contains("frank"),
        "no user names on the open /metrics"
    );

    // Raising the cap (a restart with the new config) lets frank go on;
    // dave's hour is still counted after the restart, from the store.
    let mut old = server;
    old.signal("TERM").await;
    old.exit_code().await;
    let server = start(&h, &[("spend_usd_per_day", "100")]).await;
    let frank = server.as_user(&token("frank"));
    let (status, body, _) = post_message(&frank, &spender, "hello").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    frank.wait_idle(&spender).await;
    let dave = server.as_user(&token("dave"));
    let (status, _, _) = post_message(&dave, &session, "hi").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);

    // A larger hourly limit lets dave go on.
    let mut old = server;
    old.signal("TERM").await;
    old.exit_code().await;
    let server = start(&h, &[("turns_per_hour", "10")]).await;
    let dave = server.as_user(&token("dave"));
    let (status, body, _) = post_message(&dave, &session, "hi").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    dave.wait_idle(&session).await;
}
