//! Finding sessions over real HTTP (`GET /v1/sessions?q=…` and its
//! filters, `PATCH` pin/archive/tags), on SQLite and on PostgreSQL: a word
//! only a tool printed finds its session, another user's sessions never
//! show, and hostile queries are only text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::serve_harness::{Harness, Server, fresh_database_url};

/// The word only the tool's output has: the command prints it from parts.
const TOOL_WORD: &str = "zebrafish";

fn script() -> Value {
    json!({"replies": [
        {"repeat": true, "when": {"last_tool_result_contains": "ZEBRAFISH"},
         "content": [{"type": "text", "text": "Done: the marmoset report is ready."}]},
        {"repeat": true, "when": {"last_user_contains": "capybara"},
         "content": [{"type": "tool_use", "name": "Bash",
                      "input": {"command": "printf 'ZEBRA%s\\n' FISH"}}]},
        {"repeat": true, "content": [{"type": "text", "text": "ok"}]}
    ]})
}

fn config(database: &str) -> String {
    format!("[server]\nauth = \"token\"\n[profiles.default]\nallow = [\"Bash\"]\n{database}")
}

/// A session of `server`'s user that ran the tool turn.
async fn session_with_tool_turn(server: &Server) -> String {
    let id = server.session().await;
    server.message(&id, "look for the capybara").await;
    let info = server.wait_idle(&id).await;
    assert_eq!(info["status"], "idle", "{}", server.log());
    id
}

async fn list(server: &Server, query: &str) -> (StatusCode, Value) {
    server.get(&format!("/v1/sessions?{query}")).await
}

fn ids(list: &Value) -> Vec<String> {
    list["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("no sessions in {list}"))
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

/// `GET /v1/sessions?q=…`, `q` encoded by the client.
async fn search(server: &Server, q: &str) -> (StatusCode, Value) {
    let request = server
        .request(Method::GET, "/v1/sessions")
        .query(&[("q", q)]);
    server.send(request).await
}

async fn found(server: &Server, q: &str) -> Value {
    let (status, body) = search(server, q).await;
    assert_eq!(status, StatusCode::OK, "{q}: {body}");
    body
}

async fn patch(server: &Server, id: &str, body: Value) -> (StatusCode, Value) {
    let request = server
        .request(Method::PATCH, &format!("/v1/sessions/{id}"))
        .json(&body);
    server.send(request).await
}

/// Search over what a turn left: title, user text, assistant text, a tool
/// call and its result; per user; hostile text is only words.
async fn search_finds_every_kind_of_text(database: &str) {
    let h = Harness::new(script(), &config(database)).await;
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let bob = server.as_user(&h.token("bob").await);
    let mine = session_with_tool_turn(&alice).await;
    let quiet = alice.session().await;
    let theirs = session_with_tool_turn(&bob).await;
    let (status, _) = patch(&alice, &mine, json!({"title": "Quarterly okapi review"})).await;
    assert_eq!(status, StatusCode::OK);

    // The word is in no message but the tool's result.
    let messages = alice.get(&format!("/v1/sessions/{mine}/messages")).await.1;
    let results: Vec<&Value> = messages["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m.to_string().to_lowercase().contains(TOOL_WORD))
        .collect();
    assert_eq!(results.len(), 1, "{messages}");
    assert!(results[0].to_string().contains("tool_result"), "{messages}");

    for (q, in_snippet) in [
        (TOOL_WORD, TOOL_WORD),
        ("printf", "printf"),
        ("capybara", "capybara"),
        ("Marmoset report", "marmoset report"),
        ("\"okapi review\"", "okapi review"),
    ] {
        let body = found(&alice, q).await;
        assert_eq!(ids(&body), [mine.as_str()], "{q}: {body}");
        let snippet = body["sessions"][0]["snippet"].as_str().unwrap_or_default();
        assert!(
            snippet.to_lowercase().contains(in_snippet),
            "{q}: {snippet:?}"
        );
        let theirs_found = found(&bob, q).await;
        let expected: Vec<&str> = match q {
            "\"okapi review\"" => vec![],
            _ => vec![theirs.as_str()],
        };
        assert_eq!(ids(&theirs_found), expected, "bob, {q}");
    }
    // A plain list has no snippets, and lists both of alice's sessions.
    let (_, all) = list(&alice, "").await;
    assert_eq!(ids(&all).len(), 2);
    assert!(all["sessions"][0].get("snippet").is_none(), "{all}");
    assert!(ids(&all).contains(&quiet));

    for hostile in [
        "\"a OR b*",
        "NEAR(",
        "zebrafish*",
        "zebrafish OR okapi",
        "'; DROP TABLE sessions; --",
        "!(zebrafish & okapi) <-> :*",
        "title:okapi",
    ] {
        let (status, body) = search(&alice, hostile).await;
        assert_eq!(status, StatusCode::OK, "{hostile}: {body}");
    }
    // Operators are words, not syntax: `OR` must be in the text too.
    assert!(ids(&found(&alice, "zebrafish OR okapi").await).is_empty());
    assert_eq!(ids(&found(&alice, "zebrafish*").await), [mine.as_str()]);
    for nothing in ["***", "\"\"", "()"] {
        let (status, body) = search(&alice, nothing).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{nothing}: {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains("word"),
            "{body}"
        );
    }
    let (_, sessions) = list(&alice, "").await;
    assert_eq!(ids(&sessions).len(), 2, "nothing was dropped");
}

#[tokio::test]
async fn search_finds_a_word_only_a_tool_printed_on_sqlite() {
    search_finds_every_kind_of_text("").await;
}

#[tokio::test]
async fn search_finds_a_word_only_a_tool_printed_on_postgres() {
    let url = fresh_database_url().await;
    search_finds_every_kind_of_text(&format!("[database]\nurl = \"{url}\"\n")).await;
}

/// The ids `query` lists.
async fn listed(server: &Server, query: &str) -> Vec<String> {
    let (status, body) = list(server, query).await;
    assert_eq!(status, StatusCode::OK, "{query}: {body}");
    ids(&body)
}

/// Pin, archive and tags by `PATCH`; each filter narrows the list.
#[tokio::test]
async fn pins_archives_tags_and_filters() {
    let project = tempfile::tempdir().unwrap();
    // `hidden` is on a profile only admins may use: not alice's to name.
    let toml = format!(
        "{}[access]\nprofiles = [\"default\"]\n[profiles.secret]\n\
         [[projects]]\nname = \"app\"\npath = \"{path}\"\n\
         [[projects]]\nname = \"hidden\"\npath = \"{path}\"\nprofile = \"secret\"\n",
        config(""),
        path = project.path().display()
    );
    let h = Harness::new(script(), &toml).await;
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let bob = server.as_user(&h.token("bob").await);
    let old = alice.session().await;
    let busy = session_with_tool_turn(&alice).await;
    let (status, in_project) = alice.post("/v1/sessions", json!({"project": "app"})).await;
    assert_eq!(status, StatusCode::CREATED, "{in_project}");
    let in_project = in_project["id"].as_str().unwrap().to_string();
    let archived = alice.session().await;

    let (_, before) = alice.get(&format!("/v1/sessions/{old}")).await;
    let (status, body) = patch(
        &alice,
        &old,
        json!({"pinned": true, "tags": ["ops", "db-1", "ops"]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Pinning and tagging are no activity: the list's age stays.
    assert_eq!(body["updated_at"], before["updated_at"], "{body}");
    assert_eq!(
        (body["pinned"].clone(), body["tags"].clone()),
        (json!(true), json!(["ops", "db-1"]))
    );
    let (status, body) = patch(&alice, &archived, json!({"archived": true})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["archived"], true);
    for bad in [
        json!({"tags": ["Ops"]}),
        json!({"tags": ["a b"]}),
        json!({"tags": [""]}),
        json!({"tags": (0..21).map(|i| format!("t{i}")).collect::<Vec<_>>()}),
        json!({"pinned": "yes"}),
    ] {
        let (status, body) = patch(&alice, &old, bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    // Only the owner pins: bob's PATCH is a 404, and nothing changed.
    let (status, _) = patch(&bob, &busy, json!({"pinned": true})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    assert_eq!(
        listed(&alice, "").await,
        [old.as_str(), in_project.as_str(), busy.as_str()],
        "pinned first, archived hidden"
    );
    assert_eq!(listed(&alice, "archived=true").await, [archived.as_str()]);
    assert_eq!(listed(&alice, "pinned=true").await, [old.as_str()]);
    assert_eq!(
        listed(&alice, "pinned=false").await,
        [in_project.as_str(), busy.as_str()]
    );
    assert_eq!(listed(&alice, "tag=db-1").await, [old.as_str()]);
    assert!(listed(&alice, "tag=db").await.is_empty());
    assert_eq!(listed(&alice, "project=app").await, [in_project.as_str()]);
    assert_eq!(listed(&alice, "status=idle").await.len(), 3);
    assert!(listed(&alice, "status=running").await.is_empty());
    assert_eq!(
        listed(&alice, "until=2000-01-01").await,
        Vec::<String>::new()
    );
    assert_eq!(listed(&alice, "since=2000-01-01").await.len(), 3);
    assert!(
        listed(&alice, "since=2999-01-01T00:00:00Z")
            .await
            .is_empty()
    );
    assert_eq!(
        listed(&alice, "q=zebrafish&pinned=false").await,
        [busy.as_str()]
    );
    assert!(listed(&alice, "q=zebrafish&pinned=true").await.is_empty());
    // Pages of one keep the order.
    let mut paged = Vec::new();
    let mut cursor = String::new();
    loop {
        let (_, page) = list(&alice, &format!("limit=1{cursor}")).await;
        paged.extend(ids(&page));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(paged, [old.as_str(), in_project.as_str(), busy.as_str()]);
    // `sort=created`: newest first, pinned or not (`--continue`, MCP), in
    // pages too.
    let newest = [in_project.as_str(), busy.as_str(), old.as_str()];
    assert_eq!(listed(&alice, "sort=created").await, newest);
    let (_, first) = list(&alice, "sort=created&limit=1").await;
    let next = first["next_cursor"].as_str().unwrap();
    let rest = listed(&alice, &format!("sort=created&limit=5&cursor={next}")).await;
    assert_eq!(rest, newest[1..]);
    for bad in [
        "since=yesterday",
        "until=2026-13-01",
        "tag=Ops",
        "project=nope",
        "project=hidden",
        "status=asleep",
        "q=zebrafish&cursor=abc",
        "cursor=nope",
        "sort=newest",
    ] {
        let (status, body) = list(&alice, bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    // Bob sees none of it.
    let (_, theirs) = list(&bob, "archived=true").await;
    assert!(ids(&theirs).is_empty());
    let (_, theirs) = list(&bob, "tag=ops").await;
    assert!(ids(&theirs).is_empty());
}

/// Messages are indexed after their append, by a task of the server: with
/// nobody searching, what a turn stored, and a backlog of more than a batch
/// (imported behind the server's back), is indexed once the node's turns go
/// quiet: the queue drains, every message has its document.
#[tokio::test]
async fn the_server_indexes_a_turns_messages_by_itself_on_sqlite() {
    let h = Harness::new(script(), &config("")).await;
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(h.data().join("agentd.db"))
        .busy_timeout(std::time::Duration::from_secs(10));
    server_indexes_by_itself(&h, || async move {
        <sqlx::SqliteConnection as sqlx::Connection>::connect_with(&options)
            .await
            .unwrap()
    })
    .await;
}

#[tokio::test]
async fn the_server_indexes_a_turns_messages_by_itself_on_postgres() {
    let url = fresh_database_url().await;
    let h = Harness::new(script(), &config(&format!("[database]\nurl = \"{url}\"\n"))).await;
    server_indexes_by_itself(&h, || async move {
        <sqlx::PgConnection as sqlx::Connection>::connect(&url)
            .await
            .unwrap()
    })
    .await;
}

/// What the test asks of the server's database, in SQL both stores run.
trait Probe {
    async fn import_notes(&mut self, session: &str);
    async fn count(&mut self, sql: &'static str, session: &str) -> i64;
}

/// 300 user messages stored behind the server's back: more than a batch.
const IMPORT_NOTES: &str = "INSERT INTO messages (id, session_id, turn_id, position, role, content, created_at) \
     WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 300) \
     SELECT 'imported-' || n, $1, NULL, 1000 + n, 'user', \
       '{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"note ' || n || '\"}]}', 0 \
     FROM g";

macro_rules! probe_for {
    ($conn:ty) => {
        impl Probe for $conn {
            async fn import_notes(&mut self, session: &str) {
                sqlx::query(IMPORT_NOTES)
                    .bind(session)
                    .execute(&mut *self)
                    .await
                    .unwrap();
            }
            async fn count(&mut self, sql: &'static str, session: &str) -> i64 {
                sqlx::query_scalar(sql)
                    .bind(session)
                    .fetch_one(&mut *self)
                    .await
                    .unwrap()
            }
        }
    };
}
probe_for!(sqlx::SqliteConnection);
probe_for!(sqlx::PgConnection);

async fn server_indexes_by_itself<C, F>(h: &Harness, connect: impl FnOnce() -> F)
where
    C: Probe,
    F: std::future::Future<Output = C>,
{
    let server = h.start().await;
    let alice = server.as_user(&h.token("alice").await);
    let id = session_with_tool_turn(&alice).await;
    let mut conn = connect().await;
    conn.import_notes(&id).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let queued = conn
            .count(
                "SELECT count(*) FROM search_pending AS p JOIN messages AS m \
                 ON m.id = p.message_id WHERE m.session_id = $1",
                &id,
            )
            .await;
        if queued == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{queued} messages still queued for search; {}",
            server.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let messages = conn
        .count("SELECT count(*) FROM messages WHERE session_id = $1", &id)
        .await;
    let documents = conn
        .count(
            "SELECT count(*) FROM search_docs WHERE session_id = $1 AND message_id IS NOT NULL",
            &id,
        )
        .await;
    assert!(
        messages >= 304,
        "a tool turn's four messages and 300 more, not {messages}"
    );
    assert_eq!(
        documents, messages,
        "every message of the turn has text to find"
    );
}
