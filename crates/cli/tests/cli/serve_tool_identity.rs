//! Identity for tools in a real `agentd serve`: `{user}`, `{session}` and
//! `{user_token}` filled into a stdio MCP server's `env`, an HTTP MCP
//! server's `headers` and a command's `env`, per session; the token
//! verified with a JWT library against the unauthenticated
//! `GET /v1/identity/jwks`, for its server's audience alone; never on a
//! command line nor in a command's output; the signing key kept in the
//! store across a restart (SQLite and PostgreSQL).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::serve_harness::{Harness, Server, fresh_database_url};

/// An MCP server with one tool, `whoami`, answering what identifies the
/// caller: in `stdio` mode its `WHO_*` variables and a random id of the process, in `http` mode
/// (plain JSON answers of the streamable HTTP transport) the request's
/// `Authorization` and `X-Who-User` headers.
const WHO: &str = r#"import json, os, sys
def handle(msg, who):
    method = msg.get("method")
    if method == "initialize":
        return {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "who", "version": "1"}}
    if method == "tools/list":
        return {"tools": [{"name": "whoami", "description": "who asks",
                           "inputSchema": {"type": "object", "properties": {}}}]}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": json.dumps(who())}]}
    return {}
if sys.argv[1] == "stdio":
    instance = os.urandom(8).hex()
    env = lambda: dict({k: v for k, v in os.environ.items() if k.startswith("WHO_")}, instance=instance)
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" in msg:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": handle(msg, env)}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
else:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if "id" not in msg:
                self.send_response(202)
                self.end_headers()
                return
            who = lambda: {"authorization": self.headers.get("Authorization"),
                           "user": self.headers.get("X-Who-User")}
            body = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": handle(msg, who)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def do_GET(self):
            self.send_response(405)
            self.end_headers()
        def do_DELETE(self):
            self.send_response(200)
            self.end_headers()
        def log_message(self, *args):
            pass
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
"#;

/// The script in a directory the agents' users can read.
fn who_script() -> (TempDir, String) {
    let dir = TempDir::new().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join("who.py");
    std::fs::write(&path, WHO).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let path = path.display().to_string();
    (dir, path)
}

/// The HTTP mode of the script, running; its port.
async fn who_http(script: &str) -> (tokio::process::Child, u16) {
    let mut child = tokio::process::Command::new("python3")
        .args([script, "http"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 is needed for this test");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port = lines.next_line().await.unwrap().unwrap().parse().unwrap();
    (child, port)
}

fn stdio_server_toml(script: &str, dir: &TempDir) -> String {
    format!(
        "[[mcp_servers]]\nname = \"who\"\ncommand = \"python3\"\nargs = [\"{script}\", \"stdio\"]\n\
         read_only_paths = [\"{dir}\"]\nstartup_timeout_s = 60\n\
         env = {{ WHO_USER = \"{{user}}\", WHO_SESSION = \"{{session}}\", \
         WHO_TOKEN = \"{{user_token}}\", WHO_LITERAL = \"{{{{user}}}} ${{HOME}}\" }}\n",
        dir = dir.path().display()
    )
}

/// A reply calling `whoami` of each server in `servers` for a message
/// containing `word`, with call ids `<word>_<server>`.
fn who_reply(word: &str, servers: &[&str]) -> Value {
    let calls: Vec<Value> = servers
        .iter()
        .map(|server| {
            json!({"type": "tool_use", "id": format!("{word}_{server}"),
                   "name": format!("mcp__{server}__whoami"), "input": {}})
        })
        .collect();
    json!({"when": {"last_user_contains": word}, "content": calls})
}

/// The output of call `call_id` in the session, as JSON.
async fn call_output(server: &Server, session: &str, call_id: &str) -> Value {
    let events = server.all_events(session).await;
    let finished = events
        .iter()
        .find(|e| e.event == "tool.finished" && e.data["call_id"] == call_id)
        .unwrap_or_else(|| panic!("no result of {call_id}: {events:?}"));
    assert_eq!(finished.data["is_error"], false, "{:?}", finished.data);
    let output = finished.data["output"].as_str().unwrap();
    serde_json::from_str(output).unwrap_or_else(|_| panic!("{output}"))
}

#[derive(Debug, Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    sid: String,
    jti: String,
    iat: i64,
    nbf: i64,
    exp: i64,
}

/// The server's key set, fetched without credentials.
async fn jwks(server: &Server) -> jsonwebtoken::jwk::JwkSet {
    let response = reqwest::get(format!("{}/v1/identity/jwks", server.url))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["cache-control"], "public, max-age=300");
    response.json().await.unwrap()
}

/// `token` verified as a tool would: EdDSA, its `kid` in the key set,
/// audience `audience`, issuer `agentd`.
fn verify_for(
    audience: &str,
    token: &str,
    keys: &jsonwebtoken::jwk::JwkSet,
) -> Result<Claims, String> {
    let kid = decode_header(token)
        .map_err(|e| e.to_string())?
        .kid
        .ok_or("no kid")?;
    let jwk = keys.find(&kid).ok_or("unknown kid")?;
    let key = DecodingKey::from_jwk(jwk).map_err(|e| e.to_string())?;
    let mut validation = Validation::new(Algorithm::EdDSA);
    validation.set_audience(&[audience]);
    validation.set_issuer(&["agentd"]);
    decode::<Claims>(token, &key, &validation)
        .map(|data| data.claims)
        .map_err(|e| e.to_string())
}

/// `token` verified as the stdio server `who` would.
fn verify(token: &str, keys: &jsonwebtoken::jwk::JwkSet) -> Result<Claims, String> {
    verify_for("agentd-tool:who", token, keys)
}

fn assert_fresh_token_of(claims: &Claims, user: &str, session: &str) {
    assert_eq!((claims.sub.as_str(), claims.sid.as_str()), (user, session));
    assert_eq!(claims.iss, "agentd");
    assert_eq!(claims.exp - claims.iat, 3600);
    assert_eq!(claims.nbf, claims.iat);
    assert!(!claims.jti.is_empty());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((now - 120..=now + 5).contains(&claims.iat), "{claims:?}");
}

#[tokio::test]
async fn two_users_sessions_get_their_own_identity_in_env_and_headers() {
    let (dir, script) = who_script();
    let (_http, port) = who_http(&script).await;
    let model_script = json!({"replies": [
        {"repeat": true, "when": {"last_tool_name": "mcp__whohttp__whoami"},
         "content": [{"type": "text", "text": "done"}]},
        who_reply("again", &["who", "whohttp"]),
        who_reply("alice", &["who", "whohttp"]),
        who_reply("bob", &["who", "whohttp"]),
    ]});
    let toml = format!(
        "[profiles.default]\nallow = [\"mcp__who__*\", \"mcp__whohttp__*\"]\n{stdio}\
         [[mcp_servers]]\nname = \"whohttp\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n\
         headers = {{ Authorization = \"Bearer {{user_token}}\", X-Who-User = \"{{user}}\" }}\n",
        stdio = stdio_server_toml(&script, &dir)
    );
    let h = Harness::new(model_script, &toml).await;
    let (alice, bob) = (h.token("alice").await, h.token("bob").await);
    let server = h.start().await;
    let mut seen = Vec::new();
    for (user, token) in [("alice", &alice), ("bob", &bob)] {
        let as_user = server.as_user(token);
        let session = as_user.session().await;
        as_user.message(&session, &format!("who is {user}")).await;
        assert_eq!(as_user.wait_idle(&session).await["status"], "idle");
        let env = call_output(&as_user, &session, &format!("{user}_who")).await;
        let headers = call_output(&as_user, &session, &format!("{user}_whohttp")).await;
        seen.push((user, session, env, headers));
    }
    // The token is in no process's command line (bubblewrap's included)
    // while the servers run.
    for (_, _, env, _) in &seen {
        let token = env["WHO_TOKEN"].as_str().unwrap();
        assert_eq!(command_lines_holding(token), Vec::<String>::new());
    }
    // Alice's session keeps its own server and token for its next turn.
    let as_alice = server.as_user(&alice);
    let session = &seen[0].1;
    as_alice.message(session, "again").await;
    as_alice.wait_idle(session).await;
    let again = call_output(&as_alice, session, "again_who").await;
    assert_eq!(again["instance"], seen[0].2["instance"]);
    assert_eq!(again["WHO_TOKEN"], seen[0].2["WHO_TOKEN"]);

    let keys = jwks(&server).await;
    assert_eq!(keys.keys.len(), 1, "{keys:?}");
    for (user, session, env, headers) in &seen {
        assert_eq!(env["WHO_USER"], *user, "{env}");
        assert_eq!(env["WHO_SESSION"], *session, "{env}");
        // The escape gives the literal text; a shell-style `${...}` stays.
        assert_eq!(env["WHO_LITERAL"], "{user} ${HOME}", "{env}");
        let token = env["WHO_TOKEN"].as_str().unwrap();
        assert_fresh_token_of(&verify(token, &keys).unwrap(), user, session);

        assert_eq!(headers["user"], *user, "{headers}");
        let bearer = headers["authorization"].as_str().unwrap();
        let token = bearer.strip_prefix("Bearer ").unwrap();
        assert_fresh_token_of(
            &verify_for("agentd-tool:whohttp", token, &keys).unwrap(),
            user,
            session,
        );
        // A server's token is good for that server alone: the HTTP
        // server's is refused by the stdio one, and the other way round.
        let err = verify(token, &keys).unwrap_err();
        assert!(err.contains("InvalidAudience"), "{err}");
        let stdio_token = env["WHO_TOKEN"].as_str().unwrap();
        assert!(verify_for("agentd-tool:whohttp", stdio_token, &keys).is_err());
    }
    // Each session had its own server process and its own token.
    let (a, b) = (&seen[0].2, &seen[1].2);
    assert_ne!(a["instance"], b["instance"]);
    assert_ne!(a["WHO_TOKEN"], b["WHO_TOKEN"]);

    // A token whose claims were changed (alice's signature on bob's name)
    // is refused, as is one checked against another server's keys.
    let token = a["WHO_TOKEN"].as_str().unwrap();
    let bob_token = b["WHO_TOKEN"].as_str().unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    let bob_parts: Vec<&str> = bob_token.split('.').collect();
    let forged = format!("{}.{}.{}", parts[0], bob_parts[1], parts[2]);
    let err = verify(&forged, &keys).unwrap_err();
    assert!(err.contains("InvalidSignature"), "{err}");
    let other = Harness::new(json!({"replies": []}), &toml).await;
    let other_server = other.start().await;
    let err = verify(token, &jwks(&other_server).await).unwrap_err();
    assert!(err.contains("unknown kid"), "{err}");
}

/// The processes whose command line holds `text`.
fn command_lines_holding(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(bytes) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let line = String::from_utf8_lossy(&bytes).replace('\0', " ");
        if line.contains(text) {
            found.push(line);
        }
    }
    found
}

/// Writes its `WHO_*` variables to `$HOME/who.env` (the workspace) and
/// prints them, and the token again on stderr.
const WHO_COMMAND: &str = "#!/bin/sh\n\
env | grep '^WHO_' | sort > \"$HOME/who.env\"\n\
env | grep '^WHO_' | sort\n\
echo \"token: $WHO_TOKEN\" >&2\n";

/// `WHO_*` variables as the command wrote them.
fn who_env(workspace: &std::path::Path) -> std::collections::BTreeMap<String, String> {
    let text = std::fs::read_to_string(workspace.join("who.env")).unwrap();
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn a_command_env_gets_the_identity_and_its_token_is_masked() {
    let model_script = json!({"replies": [
        {"when": {"last_user_contains": "run it"}, "content": [
            {"type": "tool_use", "id": "toolu_who", "name": "whocmd", "input": {}}
        ]},
        {"repeat": true, "content": [{"type": "text", "text": "done"}]}
    ]});
    let toml = "[server]\nauth = \"none\"\n[profiles.default]\nmode = \"bypass\"\n\
        [[commands]]\nname = \"whocmd\"\ndescription = \"Who am I\"\nargv = [\"./who.sh\"]\n\
        mutating = false\n\
        env = { WHO_USER = \"{user}\", WHO_SESSION = \"{session}\", WHO_TOKEN = \"{user_token}\", \
        WHO_LITERAL = \"{{user}} {time}\" }\n";
    let h = Harness::new(model_script, toml).await;
    let server = h.start().await;
    let session = server.session().await;
    let workspace = h.data().join("workspaces").join(&session);
    let script = workspace.join("who.sh");
    std::fs::write(&script, WHO_COMMAND).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();

    // The model's call.
    server.message(&session, "run it").await;
    server.wait_idle(&session).await;
    let env = who_env(&workspace);
    assert_eq!(env["WHO_USER"], "local");
    assert_eq!(env["WHO_SESSION"], session);
    assert_eq!(env["WHO_LITERAL"], "{user} {time}");
    let token = env["WHO_TOKEN"].clone();
    let keys = jwks(&server).await;
    let claims = verify_for("agentd-command:whocmd", &token, &keys).unwrap();
    assert_fresh_token_of(&claims, "local", &session);
    assert!(verify(&token, &keys).is_err(), "an MCP server's audience");
    let events = server.all_events(&session).await;
    let finished = events
        .iter()
        .find(|e| e.event == "tool.finished" && e.data["call_id"] == "toolu_who")
        .unwrap();
    let output = finished.data["output"].as_str().unwrap();
    assert!(
        output.contains(&format!("WHO_SESSION={session}")),
        "{output}"
    );
    assert!(output.contains("WHO_TOKEN=[secret WHO_TOKEN]"), "{output}");
    assert!(!output.contains(&token), "{output}");
    let model_saw = h.model_requests().last().unwrap().body.to_string();
    assert!(model_saw.contains("[secret WHO_TOKEN]"), "{model_saw}");
    assert!(!model_saw.contains(&token));

    // The user's run: a fresh token, masked in stdout, stderr and the
    // transcript alike.
    let (status, ran) = server
        .post(
            &format!("/v1/sessions/{session}/commands/whocmd"),
            json!({"arguments": {}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{ran}");
    let token = who_env(&workspace)["WHO_TOKEN"].clone();
    assert_fresh_token_of(
        &verify_for("agentd-command:whocmd", &token, &keys).unwrap(),
        "local",
        &session,
    );
    assert!(
        ran["stdout"]
            .as_str()
            .unwrap()
            .contains("[secret WHO_TOKEN]"),
        "{ran}"
    );
    assert!(
        ran["stderr"]
            .as_str()
            .unwrap()
            .contains("token: [secret WHO_TOKEN]"),
        "{ran}"
    );
    assert!(!ran.to_string().contains(&token), "{ran}");
    let events = serde_json::to_string(
        &server
            .all_events(&session)
            .await
            .iter()
            .map(|e| e.data.clone())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    assert!(!events.contains(&token));
}

/// A new session's turn saying `word`: the session and the `WHO_TOKEN` the
/// stdio server got.
async fn token_of_a_turn(server: &Server, word: &str) -> (String, String) {
    let session = server.session().await;
    server.message(&session, word).await;
    server.wait_idle(&session).await;
    let env = call_output(server, &session, &format!("{word}_who")).await;
    (session, env["WHO_TOKEN"].as_str().unwrap().to_string())
}

/// A token from a turn on `h`, then a restart: the same key is published,
/// the old token still verifies and the next one has the same `kid`.
async fn the_key_survives_a_restart(toml: &str) {
    let (dir, script) = who_script();
    let model_script = json!({"replies": [
        {"repeat": true, "when": {"last_tool_name": "mcp__who__whoami"},
         "content": [{"type": "text", "text": "done"}]},
        who_reply("first", &["who"]),
        who_reply("second", &["who"]),
    ]});
    let toml = format!(
        "[server]\nauth = \"none\"\n[profiles.default]\nallow = [\"mcp__who__*\"]\n{toml}{}",
        stdio_server_toml(&script, &dir)
    );
    let h = Harness::new(model_script, &toml).await;
    let server = h.start().await;
    let (session, first) = token_of_a_turn(&server, "first").await;
    let keys = jwks(&server).await;
    server.terminate().await;

    let server = h.start().await;
    let again = jwks(&server).await;
    assert_eq!(again, keys);
    assert_fresh_token_of(&verify(&first, &again).unwrap(), "local", &session);
    let (session2, second) = token_of_a_turn(&server, "second").await;
    let kid = |token: &str| decode_header(token).unwrap().kid.unwrap();
    assert_eq!(kid(&second), kid(&first));
    assert_fresh_token_of(&verify(&second, &again).unwrap(), "local", &session2);
}

#[tokio::test]
async fn the_signing_key_survives_a_restart_on_sqlite() {
    the_key_survives_a_restart("").await;
}

#[tokio::test]
async fn the_signing_key_survives_a_restart_on_postgres() {
    let url = fresh_database_url().await;
    the_key_survives_a_restart(&format!("[database]\nurl = \"{url}\"\n")).await;
}
