//! A server shared by a team, over real HTTP: admins and grants decide who
//! may use which profile and model (checked on create, fork and every turn),
//! and the audit log says who did what.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::serve_harness::{Harness, Server, WAIT};

const CONFIG: &str = "[models.default]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\
    base_url = \"{URL}\"\n\
    [models.dear]\nprovider = \"anthropic\"\nmodel = \"claude-opus-4-1\"\nbase_url = \"{URL}\"\n\
    [access]\nmodels = [\"default\"]\nadmins = [\"carol\"]\n\
    [profiles.default]\n\
    [profiles.yolo]\nmode = \"bypass\"\n";

fn names(list: &Value, key: &str, field: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item[field].as_str().unwrap().to_string())
        .collect()
}

async fn create(server: &Server, body: Value) -> (StatusCode, Value) {
    server.post("/v1/sessions", body).await
}

async fn wait_pending(server: &Server, session: &str) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (_, pending) = server.get(&format!("/v1/sessions/{session}/pending")).await;
        if let Some(id) = pending["pending"][0]["request_id"].as_str() {
            return id.to_string();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no permission request"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn grants_decide_profiles_and_models_and_the_audit_log_names_each_actor() {
    let script = json!({"replies": [
        {"repeat": true, "when": {"last_tool_result_contains": "ran"},
         "content": [{"type": "text", "text": "it ran"}]},
        {"repeat": true, "when": {"last_user_contains": "run it"},
         "content": [{"type": "tool_use", "name": "Bash", "input": {"command": "echo ran"}}]},
        {"repeat": true, "content": [{"type": "text", "text": "ok"}]}
    ]});
    let h = Harness::new(script, CONFIG).await;
    let (code, admin_token, stderr) = h
        .cli(&["tokens", "create", "--user", "root", "--admin"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let alice_token = h.token("alice").await;
    let server = h.start().await;
    let root = server.as_user(admin_token.trim());
    let alice = server.as_user(&alice_token);

    // What alice sees: no admin-only profile, no model outside [access].
    let (_, profiles) = alice.get("/v1/profiles").await;
    assert_eq!(names(&profiles, "profiles", "name"), ["default"]);
    let (_, models) = alice.get("/v1/models").await;
    assert!(
        !names(&models, "models", "id").contains(&"dear".into()),
        "{models}"
    );
    let (_, profiles) = root.get("/v1/profiles").await;
    assert!(names(&profiles, "profiles", "name").contains(&"yolo".into()));
    let (_, models) = root.get("/v1/models").await;
    assert!(names(&models, "models", "id").contains(&"dear".into()));

    // Refused, and nothing made: no session, no workspace.
    for body in [json!({"profile": "yolo"}), json!({"model": "dear"})] {
        let (status, error) = create(&alice, body.clone()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}: {error}");
        assert_eq!(error["error"]["code"], "not_granted", "{error}");
    }
    let (_, mine) = alice.get("/v1/sessions").await;
    assert_eq!(mine["sessions"], json!([]));
    let workspaces = h.data().join("workspaces");
    let made = std::fs::read_dir(&workspaces).map_or(0, |dir| dir.count());
    assert_eq!(made, 0, "no workspace for a refused session");
    let (status, _) = create(&root, json!({"profile": "yolo", "model": "dear"})).await;
    assert_eq!(status, StatusCode::CREATED);

    // Admin routes are admins' only.
    let (status, error) = alice.get("/v1/admin/users").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(error["error"]["code"], "admin_only");

    // A grant opens the model; taking it back stops the next turn.
    let (status, changed) = root
        .post(
            "/v1/admin/users/alice/grants",
            json!({"kind": "model", "name": "dear"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["changed"], true);
    assert_eq!(changed["user"]["grants"]["models"], json!(["dear"]));
    let (_, models) = alice.get("/v1/models").await;
    assert!(names(&models, "models", "id").contains(&"dear".into()));
    let (status, session) = create(&alice, json!({"model": "dear"})).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let dear = session["id"].as_str().unwrap().to_string();
    alice.message(&dear, "hello").await;
    alice.wait_idle(&dear).await;
    // A turn queued while the grant holds, started after it was taken back,
    // is refused when it starts.
    alice.message(&dear, "run it").await;
    let request = wait_pending(&alice, &dear).await;
    let (status, queued) = alice
        .post(
            &format!("/v1/sessions/{dear}/messages"),
            json!({"content": "later", "queue": true}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(queued["state"], "queued");
    let (status, _) = root
        .send(root.request(Method::DELETE, "/v1/admin/users/alice/grants/model/dear"))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = alice
        .post(
            &format!("/v1/sessions/{dear}/permissions/{request}"),
            json!({"decision": "allow"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    alice.wait_idle(&dear).await;
    let events = alice.all_events(&dear).await;
    let ends: Vec<&Value> = events
        .iter()
        .filter(|e| e.event == "turn.finished")
        .map(|e| &e.data)
        .collect();
    assert_eq!(ends.len(), 3, "{ends:?}");
    assert_eq!(ends[1]["status"], "completed", "the running turn finishes");
    assert_eq!(ends[2]["status"], "failed", "{:?}", ends[2]);
    assert_eq!(ends[2]["turn_id"], queued["turn_id"]);
    assert_eq!(ends[2]["error"]["code"], "not_granted");
    let (status, error) = alice
        .post(
            &format!("/v1/sessions/{dear}/messages"),
            json!({"content": "again"}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{error}");
    assert_eq!(error["error"]["code"], "not_granted");
    assert!(
        error["error"]["message"].as_str().unwrap().contains("dear"),
        "the message names the model: {error}"
    );
    let before = alice.all_events(&dear).await.len();
    let (_, record) = alice.get(&format!("/v1/sessions/{dear}")).await;
    assert_eq!(record["status"], "idle", "no turn was started");
    assert_eq!(alice.all_events(&dear).await.len(), before);
    let (status, _) = alice
        .post(&format!("/v1/sessions/{dear}/fork"), json!({}))
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "a fork chooses the model too"
    );

    // The command line grants a profile by name.
    let (code, _, stderr) = h
        .cli(&["users", "grant", "alice", "--profile", "yolo"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let (status, _) = create(&alice, json!({"profile": "yolo"})).await;
    assert_eq!(status, StatusCode::CREATED);
    let (code, _, stderr) = h
        .cli(&["users", "revoke", "alice", "--profile", "yolo"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = h
        .cli(&["users", "grant", "alice", "--profile", "nope"])
        .await;
    assert_ne!(code, 0, "an unknown profile is not granted");
    assert!(stderr.contains("nope"), "{stderr}");

    // An approval, a fork and a delete, each in the log with its actor.
    let (_, session) = create(&alice, json!({})).await;
    let plain = session["id"].as_str().unwrap().to_string();
    alice.message(&plain, "run it").await;
    let request = wait_pending(&alice, &plain).await;
    let (status, _) = alice
        .post(
            &format!("/v1/sessions/{plain}/permissions/{request}"),
            json!({"decision": "allow"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    alice.wait_idle(&plain).await;
    let (status, fork) = alice
        .post(&format!("/v1/sessions/{plain}/fork"), json!({}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{fork}");
    let (status, _) = alice
        .send(alice.request(Method::DELETE, &format!("/v1/sessions/{plain}")))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // Signing the web UI in and out.
    let signed_in = server
        .request(Method::POST, "/v1/auth/login")
        .json(&json!({"token": alice_token}))
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), StatusCode::OK);
    let cookie = signed_in.headers()["set-cookie"].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_string();
    let (status, _) = server
        .send(
            server
                .request(Method::POST, "/v1/auth/logout")
                .header("cookie", &cookie)
                .header("origin", &server.url),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // An admin by the config alone; a token revoked on the command line.
    let carol = server.as_user(&h.token("carol").await);
    let (status, _) = carol.get("/v1/admin/users").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "[access] admins makes carol an admin"
    );
    let dave_token = h.token("dave").await;
    let (_, listed, _) = h.cli(&["tokens", "ls", "--user", "dave", "--json"]).await;
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let dave_token_id = listed[0]["id"].as_str().unwrap().to_string();
    let (code, _, stderr) = h.cli(&["tokens", "revoke", &dave_token_id]).await;
    assert_eq!(code, 0, "{stderr}");
    let (status, _) = server.as_user(&dave_token).get("/v1/sessions").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (status, page) = root.get("/v1/admin/audit?limit=1000").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let entries = page["entries"].as_array().unwrap().clone();
    let has = |actor: &str, action: &str, target: Option<&str>| {
        entries.iter().any(|e| {
            e["actor"] == actor && e["action"] == action && target.is_none_or(|t| e["target"] == t)
        })
    };
    for (actor, action, target) in [
        ("cli:operator", "token.create", Some("root")),
        ("cli:operator", "user.update", Some("root")),
        ("cli:operator", "token.create", Some("alice")),
        ("root", "session.create", None),
        ("root", "grant.add", Some("alice")),
        ("root", "grant.remove", Some("alice")),
        ("cli:operator", "grant.add", Some("alice")),
        ("cli:operator", "grant.remove", Some("alice")),
        ("alice", "session.create", Some(dear.as_str())),
        ("alice", "permission.answer", Some(plain.as_str())),
        ("alice", "session.fork", fork["id"].as_str()),
        ("alice", "session.delete", Some(plain.as_str())),
        ("alice", "login", Some("alice")),
        ("alice", "logout", Some("alice")),
        ("cli:operator", "token.revoke", None),
    ] {
        assert!(
            has(actor, action, target),
            "{actor} {action} {target:?} in {entries:#?}"
        );
    }
    let answer = entries
        .iter()
        .find(|e| e["action"] == "permission.answer")
        .unwrap();
    assert_eq!(answer["detail"]["decision"], "allow");
    let revoked = entries
        .iter()
        .find(|e| e["action"] == "token.revoke")
        .unwrap();
    assert_eq!(revoked["detail"]["token_id"], dave_token_id.as_str());
    let ids: Vec<i64> = entries.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "oldest first: {ids:?}");
    let (_, alices) = root.get("/v1/admin/audit?actor=alice").await;
    assert!(
        alices["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["actor"] == "alice")
    );

    // `agentd audit --json` exports the same entries, one per line.
    let (code, stdout, stderr) = h.cli(&["audit", "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let exported: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(exported.len(), entries.len());
    assert_eq!(exported[0]["id"], entries[0]["id"]);

    // Disabling alice stops her waiting turn and her token.
    let (_, session) = create(&alice, json!({})).await;
    let waiting = session["id"].as_str().unwrap().to_string();
    alice.message(&waiting, "run it").await;
    wait_pending(&alice, &waiting).await;
    let (status, _) = root
        .send(
            root.request(Method::PATCH, "/v1/admin/users/root")
                .json(&json!({"disabled": true})),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "an admin cannot disable themselves"
    );
    let disable = |disabled: bool| {
        root.request(Method::PATCH, "/v1/admin/users/alice")
            .json(&json!({"disabled": disabled}))
    };
    let (status, view) = root.send(disable(true)).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["disabled"], true);
    let (status, _) = alice.get("/v1/sessions").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = root.send(disable(false)).await;
    assert_eq!(status, StatusCode::OK);
    alice.wait_idle(&waiting).await;
    let events = alice.all_events(&waiting).await;
    let end = events.iter().rfind(|e| e.event == "turn.finished").unwrap();
    assert_eq!(end.data["status"], "interrupted", "{:?}", end.data);

    // Admins see users with grants and usage.
    let (_, users) = root.get("/v1/admin/users").await;
    let alice_view = users["users"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "alice")
        .unwrap()
        .clone();
    assert_eq!(alice_view["is_admin"], false);
    assert_eq!(alice_view["usage"]["sessions"], 4, "{alice_view}");
    let (code, stdout, _) = h.cli(&["users", "ls"]).await;
    assert_eq!(code, 0);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("root") && l.contains("admin")),
        "{stdout}"
    );
}

#[tokio::test]
async fn without_authentication_only_this_machines_names_are_answered() {
    let h = Harness::new(
        json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "ok"}]}]}),
        "[server]\nauth = \"none\"\nallowed_hosts = [\"devbox.lan\"]\n",
    )
    .await;
    let server = h.start().await;
    let port = server.url.rsplit(':').next().unwrap().to_string();
    let rebound = format!("rebind.attacker.example:{port}");
    let origin = format!("http://{rebound}");
    for (method, path) in [
        (Method::GET, "/v1/sessions"),
        (Method::POST, "/v1/sessions"),
        (Method::GET, "/"),
        (Method::GET, "/v1/auth/me"),
    ] {
        let request = server
            .request(method.clone(), path)
            .header("host", &rebound)
            .header("origin", &origin)
            .json(&json!({}));
        let (status, body) = server.send(request).await;
        assert_eq!(
            status,
            StatusCode::MISDIRECTED_REQUEST,
            "{method} {path}: {body}"
        );
    }
    let (_, sessions) = server.get("/v1/sessions").await;
    assert_eq!(
        sessions["sessions"],
        json!([]),
        "the forged POST made nothing"
    );
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("devbox.lan:{port}"),
    ] {
        let request = server
            .request(Method::POST, "/v1/sessions")
            .header("host", &host)
            .header("origin", format!("http://{host}"))
            .json(&json!({}));
        let (status, body) = server.send(request).await;
        assert_eq!(status, StatusCode::CREATED, "{host}: {body}");
    }
}
