//! A repository set up for Claude Code, opened as a session's workspace:
//! its `CLAUDE.md` (with imports), `AGENTS.md`, the user's own file and the
//! one above the workspace reach the system prompt; `.claude/settings.json`
//! adds a deny rule and a hook (run in the sandbox) but its allow rule cannot
//! beat the operator's deny; `.mcp.json`, an agent file, a command and a
//! skill each show in the model request or the transcript.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tempfile::TempDir;

use agentd_testkit::processes::{assert_none_left, processes_mentioning};

use crate::serve_harness::{Harness, Server};

const ALICE_UID: u32 = 61101;
const ALICE_GID: u32 = 61101;

const MCP_SERVER: &str = r#"import json, os, sys
started = os.urandom(4).hex()
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"].get("protocolVersion", "2025-03-26"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "proj", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "ping", "description": "Ping the project KAPPA",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "pong " + started}]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `<tmp>/roots/CLAUDE.md` above `<tmp>/roots/repo`, a repository with every
/// file Claude Code reads, owned by alice's agent.
fn repository(tmp: &Path) -> std::path::PathBuf {
    let roots = tmp.join("roots");
    let repo = roots.join("repo");
    write(&roots, "CLAUDE.md", "Organisation rule OMEGA.");
    // Another user's agent wrote this one: it does not speak to alice's.
    write(&roots, "AGENTS.md", "Foreign rule PHI.");
    std::os::unix::fs::chown(roots.join("AGENTS.md"), Some(61999), Some(61999)).unwrap();
    write(
        &repo,
        "CLAUDE.md",
        "Project rule ALPHA.\nStyle: @docs/style.md\nLoop: @loop.md\n`@not/an/import.md`\n\
         Keys: @keys.md\n",
    );
    write(&repo, "docs/style.md", "Style rule BETA.");
    write(&repo, "not/an/import.md", "CODE RULE");
    // A Read deny rule protects `secret.txt`, also behind a link.
    write(&repo, "secret.txt", "SECRET SIGMA");
    std::os::unix::fs::symlink("secret.txt", repo.join("keys.md")).unwrap();
    write(&repo, "loop.md", "Loop rule MU, back to @CLAUDE.md");
    write(&repo, "AGENTS.md", "Agents rule GAMMA.");
    write(&repo, "app_spec.txt", "SPEC DELTA");
    write(
        &repo,
        ".claude/settings.json",
        &json!({
            "permissions": {"deny": ["Bash(rm *)"], "allow": ["Bash(curl *)"]},
            "hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": "echo \"hooked $CLAUDE_PROJECT_DIR\" > hook-ran.txt"}
            ]}]}
        })
        .to_string(),
    );
    write(
        &repo,
        ".mcp.json",
        &json!({"mcpServers": {"proj": {"command": "python3",
            "args": [repo.join("tools/mcp_server.py")]}}})
        .to_string(),
    );
    write(&repo, "tools/mcp_server.py", MCP_SERVER);
    write(
        &repo,
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews changes EPSILON\ntools: Read, Grep\n---\nYou review code.\n",
    );
    write(
        &repo,
        ".claude/commands/greet.md",
        "---\ndescription: Greets\n---\nSay hello to $ARGUMENTS, ZETA.\n",
    );
    write(
        &repo,
        ".claude/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Deploys the app ETA\n---\nTHETA: run the deploy steps.\n",
    );
    for dir in [tmp, &roots] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    chown_all(&repo);
    repo
}

fn chown_all(dir: &Path) {
    std::os::unix::fs::chown(dir, Some(ALICE_UID), Some(ALICE_GID)).unwrap();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            chown_all(&path);
        } else {
            std::os::unix::fs::chown(&path, Some(ALICE_UID), Some(ALICE_GID)).unwrap();
        }
    }
}

fn config(tmp: &Path, trust: bool) -> String {
    format!(
        "[models.default]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\
         base_url = \"{{URL}}\"\n\
         [profiles.default]\nallow = [\"Bash(echo *)\", \"Skill\"]\n\
         deny = [\"Bash(curl *)\", \"Read(secret.txt)\"]\n\
         trust_project = {trust}\nappend_system_prompt = \"Spec: {{{{file:app_spec.txt}}}}\"\n\
         [profiles.plain]\nproject_config = false\n\
         [profiles.open]\nallow = [\"Bash\", \"mcp__proj__ping\"]\ntrust_project = true\n\
         [workspaces]\nroots = [\"{roots}\"]\n\
         [users.alice]\nuid = {ALICE_UID}\ngid = {ALICE_GID}\n",
        roots = tmp.join("roots").display()
    )
}

fn script() -> Value {
    json!({"replies": [
        {"content": [{"type": "tool_use", "id": "echo_call", "name": "Bash",
                      "input": {"command": "echo hi"}}]},
        {"content": [{"type": "tool_use", "id": "curl_call", "name": "Bash",
                      "input": {"command": "curl http://example.invalid/"}}]},
        {"content": [{"type": "tool_use", "id": "rm_call", "name": "Bash",
                      "input": {"command": "rm -rf docs"}}]},
        {"content": [{"type": "tool_use", "id": "skill_call", "name": "Skill",
                      "input": {"skill": "deploy"}}]},
        {"repeat": true, "content": [{"type": "text", "text": "done"}]}
    ]})
}

async fn session_at(server: &Server, path: &Path, profile: &str) -> String {
    let body = json!({"workspace": path.display().to_string(), "profile": profile});
    let (status, session) = server.post("/v1/sessions", body).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    session["id"].as_str().unwrap().to_string()
}

/// The tool result of `call_id` in the recorded requests.
fn tool_result(requests: &[Value], call_id: &str) -> Value {
    requests
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == call_id)
        .unwrap_or_else(|| panic!("no result of {call_id}"))
}

#[tokio::test]
async fn a_claude_code_repository_works_as_written() {
    let tmp = TempDir::new().unwrap();
    let repo = repository(tmp.path());
    let h = Harness::new(script(), &config(tmp.path(), true)).await;
    write(h.data(), "users/alice/CLAUDE.md", "User rule IOTA.");
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let id = session_at(&alice, &repo, "default").await;

    alice.message(&id, "/greet Bob").await;
    let finished = alice.wait_idle(&id).await;
    assert_eq!(finished["status"], "idle", "{finished}");
    let requests: Vec<Value> = h.model_requests().into_iter().map(|r| r.body).collect();
    let first = &requests[0];
    let system = first["system"].to_string();

    // Instructions, in order: the user's, the directory above, the workspace's.
    let order: Vec<usize> = [
        "User rule IOTA",
        "rule OMEGA",
        "rule ALPHA",
        "rule BETA",
        "rule MU",
        "rule GAMMA",
    ]
    .iter()
    .map(|word| {
        system
            .find(word)
            .unwrap_or_else(|| panic!("{word} missing: {system}"))
    })
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}: {system}");
    assert!(system.contains("import cycle"), "{system}");
    assert!(
        !system.contains("SIGMA"),
        "a denied file stays out: {system}"
    );
    assert!(system.contains("a Read deny rule protects it"), "{system}");
    assert!(
        !system.contains("PHI"),
        "another user's file stays out: {system}"
    );
    assert!(
        !system.contains("CODE RULE"),
        "an import in code is not followed"
    );
    assert!(system.contains("Spec: SPEC DELTA"), "{{file:}}: {system}");
    // The agent file, the skill, the MCP server's tool.
    assert!(
        system.contains("reviewer") && system.contains("EPSILON"),
        "{system}"
    );
    assert!(
        system.contains("deploy") && system.contains("ETA"),
        "{system}"
    );
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(tools.contains(&"mcp__proj__ping"), "{tools:?}");
    assert!(tools.contains(&"Task"), "{tools:?}");

    // The command, expanded.
    let user = first["messages"][0].to_string();
    assert!(user.contains("Say hello to Bob, ZETA."), "{user}");

    // The hook ran, in the sandbox, as the agent.
    let hooked = std::fs::read_to_string(repo.join("hook-ran.txt")).unwrap();
    assert_eq!(hooked.trim(), format!("hooked {}", repo.display()));
    let meta = std::fs::metadata(repo.join("hook-ran.txt")).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), ALICE_UID);

    // The project's allow rule does not beat the operator's deny; its own
    // deny holds; the skill loads through the workspace.
    let curl = tool_result(&requests, "curl_call");
    assert_eq!(curl["is_error"], true, "{curl}");
    assert!(curl.to_string().contains("denied"), "{curl}");
    let rm = tool_result(&requests, "rm_call");
    assert_eq!(rm["is_error"], true, "{rm}");
    assert!(repo.join("docs/style.md").exists());
    let skill = tool_result(&requests, "skill_call");
    assert!(skill.to_string().contains("THETA"), "{skill}");

    // The project's MCP server lives as long as the session.
    let marker = repo.join("tools/mcp_server.py").display().to_string();
    assert!(processes_mentioning(&marker) > 0, "{marker}");
    let request = alice.request(reqwest::Method::DELETE, &format!("/v1/sessions/{id}"));
    let (status, body) = alice.send(request).await;
    assert!(status.is_success(), "{status}: {body}");
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn an_untrusted_project_adds_no_hooks_allows_or_servers_and_a_plain_profile_reads_nothing() {
    let tmp = TempDir::new().unwrap();
    let repo = repository(tmp.path());
    let script =
        json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "ok"}]}]});
    let h = Harness::new(script, &config(tmp.path(), false)).await;
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);

    let id = session_at(&alice, &repo, "default").await;
    alice.message(&id, "hello").await;
    alice.wait_idle(&id).await;
    let request = h.model_requests().last().unwrap().body.clone();
    let system = request["system"].to_string();
    assert!(
        system.contains("ALPHA") && system.contains("EPSILON"),
        "{system}"
    );
    assert!(
        system.contains("Bash(rm *)"),
        "project deny rules still count: {system}"
    );
    let tools = request["tools"].to_string();
    assert!(!tools.contains("mcp__proj"), "{tools}");
    assert!(!repo.join("hook-ran.txt").exists());

    let plain = session_at(&alice, &repo, "plain").await;
    alice.message(&plain, "/greet Bob").await;
    alice.wait_idle(&plain).await;
    let request = h.model_requests().last().unwrap().body.clone();
    let system = request["system"].to_string();
    assert!(
        !system.contains("ALPHA") && !system.contains("EPSILON"),
        "{system}"
    );
    assert!(request["messages"][0].to_string().contains("/greet Bob"));
}

/// The project's MCP server started before `.git` existed could rename what
/// a sandbox started after `git init` pins while it is set up: that start
/// stops it rather than run beside it (or wait for it), and the server's
/// next call starts it again.
#[tokio::test]
async fn a_project_mcp_server_started_before_git_init_is_restarted_not_raced() {
    let tmp = TempDir::new().unwrap();
    let repo = repository(tmp.path());
    let call = |id: &str, name: &str, input: Value| json!({"content": [{"type": "tool_use", "id": id, "name": name, "input": input}]});
    let script = json!({"replies": [
        call("ping_before", "mcp__proj__ping", json!({})),
        call("git_init", "Bash", json!({"command": "mkdir .git && echo made"})),
        call("pinned_call", "Bash", json!({"command": "echo pinned"})),
        call("ping_after", "mcp__proj__ping", json!({})),
        {"repeat": true, "content": [{"type": "text", "text": "done"}]}
    ]});
    let h = Harness::new(script, &config(tmp.path(), true)).await;
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let id = session_at(&alice, &repo, "open").await;

    alice.message(&id, "go").await;
    let finished = alice.wait_idle(&id).await;
    assert_eq!(finished["status"], "idle", "{finished}");
    let requests: Vec<Value> = h.model_requests().into_iter().map(|r| r.body).collect();
    let text = |call_id: &str| {
        let result = tool_result(&requests, call_id);
        assert_ne!(result["is_error"], true, "{call_id}: {result}");
        result["content"].to_string()
    };
    assert!(text("git_init").contains("made"));
    assert!(text("pinned_call").contains("pinned"));
    let (before, after) = (text("ping_before"), text("ping_after"));
    assert!(
        before.contains("pong ") && after.contains("pong "),
        "{before} {after}"
    );
    assert_ne!(
        before, after,
        "the server started before .git ran on beside the pinned start"
    );
}
