//! Sessions on existing directories over the real HTTP API: a directory
//! under a workspace root that the agent reads and changes, a project with a
//! greeting and one session per user, and the directories agentd refuses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use reqwest::StatusCode;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::serve_harness::{Harness, Server};

fn script() -> Value {
    json!({"replies": [
        {"repeat": true, "when": {"last_tool_name": "Bash"},
         "content": [{"type": "text", "text": "done"}]},
        {"repeat": true, "when": {"last_user_contains": "look"}, "content": [
            {"type": "tool_use", "name": "Bash",
             "input": {"command": "cat notes.txt && echo made > made.txt"}}]},
        {"repeat": true, "content": [{"type": "text", "text": "ok"}]}
    ]})
}

/// `<tmp>/roots/app` holding `notes.txt`, and `<tmp>/mine` (alice's own root).
struct Dirs {
    tmp: TempDir,
}

impl Dirs {
    fn new() -> Self {
        let tmp = TempDir::new().unwrap();
        let app = tmp.path().join("roots/app");
        std::fs::create_dir_all(app.join("sub")).unwrap();
        std::fs::write(app.join("notes.txt"), "hello notes\n").unwrap();
        std::fs::create_dir_all(tmp.path().join("mine/work")).unwrap();
        Self { tmp }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn config(&self) -> String {
        format!(
            "[models.default]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\
             base_url = \"{{URL}}\"\n\
             [profiles.default]\nallow = [\"Bash\"]\n\
             [workspaces]\nroots = [\"{roots}\"]\n\
             [users.alice.workspaces]\nroots = [\"{mine}\"]\n\
             [[projects]]\nname = \"app\"\npath = \"{app}\"\n\
             greeting = \"Hello! Ask me about app.\"\nsingle_session = true\n",
            roots = self.path("roots").display(),
            mine = self.path("mine").display(),
            app = self.path("roots/app").display(),
        )
    }
}

async fn started(dirs: &Dirs) -> (Harness, Server, Server, Server) {
    let h = Harness::new(script(), &dirs.config()).await;
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let bob = server.as_user(&h.token("bob").await);
    (h, server, alice, bob)
}

async fn create(server: &Server, body: Value) -> (StatusCode, Value) {
    server.post("/v1/sessions", body).await
}

async fn transcript(server: &Server, session: &str) -> Vec<Value> {
    let (status, body) = server
        .get(&format!("/v1/sessions/{session}/messages"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["messages"].as_array().unwrap().clone()
}

fn at(path: &Path) -> Value {
    json!({"workspace": path.display().to_string()})
}

#[tokio::test]
async fn a_session_works_in_a_directory_under_a_root_and_its_delete_leaves_the_directory() {
    let dirs = Dirs::new();
    let (_h, _server, alice, _bob) = started(&dirs).await;
    let app = dirs.path("roots/app");
    let (status, session) = create(&alice, at(&app)).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let id = session["id"].as_str().unwrap();

    alice.message(id, "look at the notes").await;
    alice.wait_idle(id).await;
    let messages = transcript(&alice, id).await;
    assert!(
        messages
            .iter()
            .any(|m| m.to_string().contains("hello notes")),
        "the agent read the directory's file: {messages:?}"
    );
    assert_eq!(
        std::fs::read_to_string(app.join("made.txt")).unwrap(),
        "made\n"
    );

    let response = alice
        .send(alice.request(reqwest::Method::DELETE, &format!("/v1/sessions/{id}")))
        .await;
    assert_eq!(response.0, StatusCode::NO_CONTENT, "{:?}", response.1);
    assert!(app.join("notes.txt").is_file(), "the directory stays");
    assert!(
        app.join("made.txt").is_file(),
        "and what the agent made in it"
    );

    // A user's own root is theirs alone.
    let work = dirs.path("mine/work");
    let (status, body) = create(&alice, at(&work)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn directories_outside_the_roots_or_badly_placed_are_refused() {
    let dirs = Dirs::new();
    let (_h, _server, alice, bob) = started(&dirs).await;
    let forbidden = [
        PathBuf::from("/etc"),
        dirs.path("roots"),
        dirs.path("roots/app/sub"),
    ];
    for path in &forbidden {
        let (status, body) = create(&alice, at(path)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{}: {body}", path.display());
        assert_eq!(body["error"]["code"], "forbidden");
    }
    // A link under a root to elsewhere is where it leads.
    std::os::unix::fs::symlink("/etc", dirs.path("roots/link")).unwrap();
    let (status, body) = create(&alice, at(&dirs.path("roots/link"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    // Alice's own root is not Bob's.
    let (status, body) = create(&bob, at(&dirs.path("mine/work"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");

    for body in [
        at(&dirs.path("roots/missing")),
        json!({"workspace": "roots/app"}),
        json!({"workspace": dirs.path("roots/app"), "project": "app"}),
        json!({"project": "nope"}),
    ] {
        let (status, answer) = create(&alice, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], "invalid_request");
    }
    let (_, list) = alice.get("/v1/sessions").await;
    assert_eq!(list["sessions"], json!([]), "nothing was created");
}

#[tokio::test]
async fn a_root_others_can_change_is_refused() {
    let dirs = Dirs::new();
    // Anyone may rename what is in `open`, `roots` included.
    let open = dirs.path("open");
    std::fs::create_dir_all(open.join("roots/app")).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let config = dirs.config().replace(
        &format!("roots = [\"{}\"]", dirs.path("roots").display()),
        &format!("roots = [\"{}\"]", open.join("roots").display()),
    );
    let h = Harness::new(script(), &config).await;
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let (status, body) = create(&alice, at(&open.join("roots/app"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("others may rename"), "{message}");
}

#[tokio::test]
async fn a_project_greets_and_keeps_one_session_per_user() {
    let dirs = Dirs::new();
    let (h, _server, alice, bob) = started(&dirs).await;
    let (status, projects) = alice.get("/v1/projects").await;
    assert_eq!(status, StatusCode::OK, "{projects}");
    assert_eq!(projects["projects"][0]["name"], "app");
    assert_eq!(projects["projects"][0]["single_session"], true);

    let (status, first) = create(&alice, json!({"project": "app"})).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(first["title"], "app");
    let id = first["id"].as_str().unwrap();
    let (status, again) = create(&alice, json!({"project": "app"})).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["id"], id, "the live one, not a second");
    let (status, theirs) = create(&bob, json!({"project": "app"})).await;
    assert_eq!(status, StatusCode::CREATED, "{theirs}");
    assert_ne!(theirs["id"], id, "one per user");

    let messages = transcript(&alice, id).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["message"]["role"], "assistant");
    assert_eq!(
        messages[0]["message"]["content"][0]["text"],
        "Hello! Ask me about app."
    );

    alice.message(id, "look at the notes").await;
    alice.wait_idle(id).await;
    let messages = transcript(&alice, id).await;
    assert!(
        messages
            .iter()
            .any(|m| m.to_string().contains("hello notes")),
        "{messages:?}"
    );
    // The greeting is the session's, not the model's: requests open with the user.
    let requests = h.model_requests();
    assert!(!requests.is_empty());
    for request in requests {
        assert_eq!(
            request.body["messages"][0]["role"], "user",
            "{}",
            request.body
        );
    }
}
