//! Sessions on existing directories over the real HTTP API: a directory
//! under a workspace root that the agent reads and changes, a project with a
//! greeting and one session per user, and the directories agentd refuses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
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
             "input": {"command": "cat notes.txt; cat secret.txt; cat private.txt; echo made > made.txt"}}]},
        {"repeat": true, "content": [{"type": "text", "text": "ok"}]}
    ]})
}

/// Alice's and Bob's agents: their own uids, one group, which the shared
/// directories give write access to (agentd changes no owner or mode there).
const ALICE_UID: u32 = 61001;
const BOB_UID: u32 = 61002;
const TEAM_GID: u32 = 61000;
const SECRET: &str = "TOP SECRET 7f3a";

/// `<tmp>/roots/app` holding `notes.txt` (the team's) and `private.txt`
/// (root's, unreadable to agents), `<tmp>/mine/work` (alice's own root) and
/// `<tmp>/secret` (no session's: holding `secret.txt`).
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
        std::fs::create_dir_all(tmp.path().join("secret")).unwrap();
        std::fs::write(tmp.path().join("secret/secret.txt"), SECRET).unwrap();
        for dir in ["roots/app", "roots/app/sub", "mine/work"] {
            let dir = tmp.path().join(dir);
            std::os::unix::fs::chown(&dir, Some(ALICE_UID), Some(TEAM_GID)).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o2775)).unwrap();
        }
        std::os::unix::fs::chown(app.join("notes.txt"), Some(ALICE_UID), Some(TEAM_GID)).unwrap();
        std::fs::write(app.join("private.txt"), SECRET).unwrap();
        std::fs::set_permissions(
            app.join("private.txt"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
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
             [users.alice]\nuid = {ALICE_UID}\ngid = {TEAM_GID}\n\
             [users.alice.workspaces]\nroots = [\"{mine}\"]\n\
             [users.bob]\nuid = {BOB_UID}\ngid = {TEAM_GID}\n\
             [users.bob.workspaces]\nroots = [\"{{DATA}}\"]\n\
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

/// A session of `server`'s user on `path`, created.
async fn session_at(server: &Server, path: &Path) -> String {
    let (status, session) = create(server, at(path)).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    session["id"].as_str().unwrap().to_string()
}

/// One turn of `text`, waited for.
async fn turn(server: &Server, session: &str, text: &str) {
    server.message(session, text).await;
    server.wait_idle(session).await;
}

fn owner(path: &Path) -> (u32, u32) {
    let meta = std::fs::metadata(path).unwrap();
    (meta.uid(), meta.gid())
}

/// Everything the session's clients could ever see, as one string.
async fn seen(server: &Server, session: &str) -> String {
    let events = server.all_events(session).await;
    let messages = transcript(server, session).await;
    format!(
        "{:?}{messages:?}",
        events.iter().map(|e| &e.data).collect::<Vec<_>>()
    )
}

#[tokio::test]
async fn a_session_works_in_a_directory_under_a_root_and_its_delete_leaves_the_directory() {
    let dirs = Dirs::new();
    let (_h, _server, alice, _bob) = started(&dirs).await;
    let app = dirs.path("roots/app");
    let id = &session_at(&alice, &app).await;

    turn(&alice, id, "look at the notes").await;
    let seen = seen(&alice, id).await;
    assert!(
        seen.contains("hello notes"),
        "the agent read the directory's file: {seen}"
    );
    assert!(
        !seen.contains(SECRET),
        "nor what its user may not read: {seen}"
    );
    assert_eq!(
        std::fs::read_to_string(app.join("made.txt")).unwrap(),
        "made\n"
    );
    // The directory keeps its owners: what the agent made is its user's.
    assert_eq!(owner(&app), (ALICE_UID, TEAM_GID));
    assert_eq!(owner(&app.join("private.txt")).0, 0);
    assert_eq!(owner(&app.join("made.txt")).0, ALICE_UID);

    let response = alice
        .send(alice.request(reqwest::Method::DELETE, &format!("/v1/sessions/{id}")))
        .await;
    assert_eq!(response.0, StatusCode::NO_CONTENT, "{:?}", response.1);
    assert!(app.join("notes.txt").is_file(), "the directory stays");
    assert!(
        app.join("made.txt").is_file(),
        "and what the agent made in it"
    );

    // Any depth inside a root; a user's own root is theirs alone.
    for dir in ["roots/app/sub", "mine/work"] {
        let (status, body) = create(&alice, at(&dirs.path(dir))).await;
        assert_eq!(status, StatusCode::CREATED, "{dir}: {body}");
    }
}

#[tokio::test]
async fn directories_outside_the_roots_or_badly_placed_are_refused() {
    let dirs = Dirs::new();
    let (h, _server, alice, bob) = started(&dirs).await;
    let forbidden = [
        PathBuf::from("/etc"),
        dirs.path("roots"),
        // Whether a path outside the roots exists is not told.
        PathBuf::from("/nonexistent/dir"),
        dirs.path("roots/../secret"),
    ];
    for path in &forbidden {
        let (status, body) = create(&alice, at(path)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{}: {body}", path.display());
        assert_eq!(body["error"]["code"], "forbidden");
    }
    // A link under a root to elsewhere is where it leads.
    std::os::unix::fs::symlink(dirs.path("secret"), dirs.path("roots/link")).unwrap();
    let (status, body) = create(&alice, at(&dirs.path("roots/link"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    // Alice's own root is not Bob's.
    let (status, body) = create(&bob, at(&dirs.path("mine/work"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    // Bob's root is agentd's data dir: nothing in it is a workspace.
    for path in [h.data().join("workspaces"), h.data().join("workspaces/x")] {
        std::fs::create_dir_all(&path).unwrap();
        let (status, body) = create(&bob, at(&path)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{}: {body}", path.display());
        assert_eq!(body["error"]["code"], "forbidden");
    }

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
async fn a_link_planted_in_the_path_is_refused_and_never_followed() {
    let dirs = Dirs::new();
    let (_h, _server, alice, _bob) = started(&dirs).await;
    let app = dirs.path("roots/app");
    let id = &session_at(&alice, &app).await;

    // Someone who may write `roots` puts a link where the directory was.
    std::fs::rename(&app, dirs.path("roots/app-moved")).unwrap();
    std::os::unix::fs::symlink(dirs.path("secret"), &app).unwrap();
    turn(&alice, id, "look at the notes").await;
    let seen = seen(&alice, id).await;
    assert!(
        seen.contains("symbolic link"),
        "the turn says why it cannot run: {seen}"
    );
    assert!(!seen.contains(SECRET), "{seen}");
    assert!(
        !dirs.path("secret/made.txt").exists(),
        "nothing written through the link"
    );

    // Put back, the directory works again.
    std::fs::remove_file(&app).unwrap();
    std::fs::rename(dirs.path("roots/app-moved"), &app).unwrap();
    turn(&alice, id, "look again").await;
    assert!(app.join("made.txt").is_file());
}

#[tokio::test]
async fn swapping_the_directory_for_a_link_while_turns_run_never_reaches_elsewhere() {
    let dirs = Dirs::new();
    let (_h, _server, alice, _bob) = started(&dirs).await;
    let app = dirs.path("roots/app");
    let id = &session_at(&alice, &app).await;
    let decoy = dirs.path("roots/decoy");
    std::os::unix::fs::symlink(dirs.path("secret"), &decoy).unwrap();
    std::fs::set_permissions(dirs.path("secret"), std::fs::Permissions::from_mode(0o777)).unwrap();

    let swapper = agentd_testkit::swapper::Swapper::start(vec![(app.clone(), decoy.clone())]);
    for round in 0..12 {
        turn(&alice, id, &format!("look, round {round}")).await;
    }
    assert!(swapper.finish() > 0, "the race ran");
    let seen = seen(&alice, id).await;
    assert!(!seen.contains(SECRET), "{seen}");
    assert!(
        !dirs.path("secret/made.txt").exists(),
        "nothing written through the link"
    );
}

#[tokio::test]
async fn checkpoints_fork_and_rewind_keep_to_what_the_agent_may_read() {
    let dirs = Dirs::new();
    let (h, _server, alice, _bob) = started(&dirs).await;
    let app = dirs.path("roots/app");
    let id = &session_at(&alice, &app).await;
    turn(&alice, id, "look at the notes").await;
    let (_, checkpoints) = alice.get(&format!("/v1/sessions/{id}/checkpoints")).await;
    let checkpoint = checkpoints["checkpoints"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    let (status, fork) = alice
        .post(&format!("/v1/sessions/{id}/fork"), json!({}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{fork}");
    let copy = h
        .data()
        .join("workspaces")
        .join(fork["id"].as_str().unwrap());
    assert!(copy.join("notes.txt").is_file(), "{}", copy.display());
    assert!(
        !copy.join("private.txt").exists(),
        "the copy has only what alice's agent may read"
    );

    let (status, rewound) = alice
        .post(
            &format!("/v1/sessions/{id}/rewind"),
            json!({"checkpoint_id": checkpoint}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{rewound}");
    assert!(!app.join("made.txt").exists(), "the turn's file is undone");
    assert_eq!(
        std::fs::read_to_string(app.join("private.txt")).unwrap(),
        SECRET
    );
    assert_eq!(owner(&app.join("private.txt")).0, 0);
}

#[tokio::test]
async fn a_root_taken_out_of_the_config_stops_its_sessions() {
    let dirs = Dirs::new();
    let (h, server, alice, _bob) = started(&dirs).await;
    let id = session_at(&alice, &dirs.path("mine/work")).await;
    server.terminate().await;
    let config = dirs.config().replace(
        &format!(
            "[users.alice.workspaces]\nroots = [\"{}\"]\n",
            dirs.path("mine").display()
        ),
        "",
    );
    let config = config
        .replace("{URL}", &h.model.url())
        .replace("{DATA}", &h.data().display().to_string());
    std::fs::write(&h.config, config).unwrap();
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    turn(&alice, &id, "look at the notes").await;
    let seen = seen(&alice, &id).await;
    assert!(seen.contains("no longer under"), "{seen}");
    assert!(!dirs.path("mine/work/made.txt").exists());
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

    turn(&alice, id, "look at the notes").await;
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

/// `local` (the owner `agentd run` and `auth = "none"` use) chose the
/// directory like anyone else: it is not handed over as `agentd run`'s is.
#[tokio::test]
async fn a_user_named_local_never_has_an_existing_directory_handed_over() {
    let dirs = Dirs::new();
    let (h, server, _alice, _bob) = started(&dirs).await;
    let local = server.as_user(&h.token("local").await);
    let app = dirs.path("roots/app");
    let id = &session_at(&local, &app).await;
    turn(&local, id, "look at the notes").await;
    let seen = seen(&local, id).await;
    assert!(
        !seen.contains(SECRET),
        "root's private file was read: {seen}"
    );
    assert_eq!(
        owner(&app),
        (ALICE_UID, TEAM_GID),
        "the directory keeps its owner"
    );
    assert_eq!(owner(&app.join("private.txt")).0, 0, "and so do its files");
}

/// A path that starts with a root but leaves it through `..` does not tell
/// whether what it names outside the roots exists.
#[tokio::test]
async fn whether_a_path_outside_the_roots_exists_is_not_told_through_dot_dot() {
    let dirs = Dirs::new();
    let (_h, _server, alice, _bob) = started(&dirs).await;
    let roots = dirs.path("roots").display().to_string();
    let present = format!("{roots}/app/../../secret/secret.txt");
    let absent = format!("{roots}/app/../../secret/no-such-file");
    let (status_present, body) = create(&alice, json!({"workspace": present})).await;
    assert_eq!(status_present, StatusCode::FORBIDDEN, "{body}");
    let (status_absent, body) = create(&alice, json!({"workspace": absent})).await;
    assert_eq!(
        status_absent,
        StatusCode::FORBIDDEN,
        "an absent path outside the roots answers as a present one: {body}"
    );
}

/// A rewind in a shared directory undoes the agent's work, not what someone
/// else made there since (in a directory the agent's group may write).
#[tokio::test]
async fn a_rewind_does_not_delete_what_others_made_since_in_a_shared_directory() {
    let dirs = Dirs::new();
    let (_h, _server, alice, _bob) = started(&dirs).await;
    let app = dirs.path("roots/app");
    let (_, session) = create(&alice, json!({"project": "app"})).await;
    let id = session["id"].as_str().unwrap();
    turn(&alice, id, "look at the notes").await;
    let (_, checkpoints) = alice.get(&format!("/v1/sessions/{id}/checkpoints")).await;
    let checkpoint = checkpoints["checkpoints"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Bob (by hand, or through his own session on the project) adds his work.
    let bobs = app.join("bobs-work.txt");
    std::fs::write(&bobs, "bob's afternoon\n").unwrap();
    std::os::unix::fs::chown(&bobs, Some(BOB_UID), Some(TEAM_GID)).unwrap();
    std::fs::set_permissions(&bobs, std::fs::Permissions::from_mode(0o664)).unwrap();

    let (status, rewound) = alice
        .post(
            &format!("/v1/sessions/{id}/rewind"),
            json!({"checkpoint_id": checkpoint, "history": false}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{rewound}");
    assert!(!app.join("made.txt").exists(), "alice's turn is undone");
    assert!(bobs.is_file(), "bob's file is gone: {rewound}");
}

/// A link planted in a parent of `local`'s directory is neither followed
/// nor is its target handed to the agent (the agent of a session on
/// `roots/app` could plant it itself).
#[tokio::test]
async fn a_link_planted_above_a_local_session_is_never_followed_nor_handed_over() {
    let dirs = Dirs::new();
    let (h, server, _alice, _bob) = started(&dirs).await;
    let local = server.as_user(&h.token("local").await);
    let id = &session_at(&local, &dirs.path("roots/app/sub")).await;
    // Elsewhere (no root's): a directory with a `sub` of root's own.
    let elsewhere = dirs.path("secret");
    std::fs::create_dir(elsewhere.join("sub")).unwrap();
    std::fs::write(elsewhere.join("sub/secret.txt"), SECRET).unwrap();
    std::fs::set_permissions(
        elsewhere.join("sub/secret.txt"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::fs::rename(dirs.path("roots/app"), dirs.path("roots/app-moved")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dirs.path("roots/app")).unwrap();

    turn(&local, id, "look at the notes").await;
    assert_eq!(
        owner(&elsewhere.join("sub")).0,
        0,
        "a directory outside every root was handed to the agent"
    );
    assert_eq!(owner(&elsewhere.join("sub/secret.txt")).0, 0);
    assert!(
        !elsewhere.join("sub/made.txt").exists(),
        "the agent worked there"
    );
}

/// A directory inside one another uid keeps closed (0700) is not reached for
/// an agent that could not walk to it, though root opens the session's
/// directory: its owner's agent gets it, nobody else's.
#[tokio::test]
async fn a_directory_behind_one_closed_to_the_agent_is_refused() {
    let dirs = Dirs::new();
    let (_h, _server, alice, bob) = started(&dirs).await;
    let closed = dirs.path("roots/bobs");
    std::fs::create_dir_all(closed.join("app")).unwrap();
    std::fs::write(closed.join("app/key.txt"), SECRET).unwrap();
    for path in [
        closed.clone(),
        closed.join("app"),
        closed.join("app/key.txt"),
    ] {
        std::os::unix::fs::chown(&path, Some(BOB_UID), Some(BOB_UID)).unwrap();
    }
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(closed.join("app"), std::fs::Permissions::from_mode(0o755)).unwrap();

    let (status, body) = create(&alice, at(&closed.join("app"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = create(&alice, at(&closed.join("missing"))).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "nothing told about what is in it: {body}"
    );
    let id = &session_at(&bob, &closed.join("app")).await;
    turn(&bob, id, "look at the notes").await;
    assert!(
        closed.join("app/made.txt").is_file(),
        "bob's agent works there"
    );
}
