//! Attachments over real HTTP: images in a message reach both providers'
//! wire formats, files uploaded into the workspace (and hostile paths
//! refused), `Read` of a PNG shows the model the image, and a message's own
//! thinking budget reaches the Anthropic request.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine as _;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::serve_harness::{Harness, Server};

/// A real 1×1 PNG.
pub(crate) const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

const CONFIG: &str = "[server]\nauth = \"none\"\nmax_upload_mb = 1\n\
    [models.claude]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = \"{URL}\"\n\
    [models.gpt]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{URL}/v1\"\n\
    [profiles.default]\nmode = \"bypass\"\n";

pub(crate) fn png() -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(PNG_B64)
        .unwrap()
}

fn script() -> Value {
    json!({"replies": [
        {"when": {"last_user_contains": "look at shot.png"}, "content": [
            {"type": "tool_use", "id": "toolu_read_shot", "name": "Read",
             "input": {"file_path": "shot.png"}}]},
        {"when": {"last_tool_name": "Read"}, "repeat": true,
         "content": [{"type": "text", "text": "a one-pixel image"}]},
        {"repeat": true, "content": [{"type": "text", "text": "seen"}]},
    ]})
}

async fn session(server: &Server, model: &str) -> String {
    let (status, body) = server.post("/v1/sessions", json!({"model": model})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["id"].as_str().unwrap().to_string()
}

async fn send(server: &Server, id: &str, body: Value) -> (StatusCode, Value) {
    server
        .post(&format!("/v1/sessions/{id}/messages"), body)
        .await
}

async fn upload(server: &Server, id: &str, path: &str, bytes: Vec<u8>) -> (StatusCode, Value) {
    let url = format!("/v1/sessions/{id}/files");
    let request = server
        .request(Method::POST, &url)
        .query(&[("path", path)])
        .header("content-type", "application/octet-stream")
        .body(bytes);
    server.send(request).await
}

fn image_message(text: &str) -> Value {
    json!([
        {"type": "text", "text": text},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
    ])
}

#[tokio::test]
async fn an_image_in_a_message_reaches_both_wire_formats_with_its_thinking_budget() {
    let h = Harness::new(script(), CONFIG).await;
    let server = h.start().await;

    let id = session(&server, "claude").await;
    let body = json!({"content": image_message("what is this?"),
                      "thinking": {"budget_tokens": 3000}});
    let (status, accepted) = send(&server, &id, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    server.wait_idle(&id).await;
    let anthropic = h.model_requests().last().unwrap().body.clone();
    let content = &anthropic["messages"][0]["content"];
    assert_eq!(content[0], json!({"type": "text", "text": "what is this?"}));
    assert_eq!(content[1]["type"], "image");
    assert_eq!(
        content[1]["source"],
        json!({"type": "base64", "media_type": "image/png", "data": PNG_B64})
    );
    assert_eq!(
        anthropic["thinking"],
        json!({"type": "enabled", "budget_tokens": 3000})
    );
    // The transcript keeps the image; the next turn has no budget of its own.
    let (_, transcript) = server.get(&format!("/v1/sessions/{id}/messages")).await;
    assert_eq!(
        transcript["messages"][0]["message"]["content"][1]["type"],
        "image"
    );
    let (status, _) = send(&server, &id, json!({"content": "and now?"})).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    server.wait_idle(&id).await;
    let next = h.model_requests().last().unwrap().body.clone();
    assert!(next.get("thinking").is_none(), "{next}");
    assert_eq!(next["messages"][0]["content"][1]["type"], "image");

    let id = session(&server, "gpt").await;
    let (status, accepted) =
        send(&server, &id, json!({"content": image_message("and this?")})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    server.wait_idle(&id).await;
    let openai = h.model.requests_to("/v1/chat/completions");
    let openai = &openai.last().expect("an OpenAI request").body;
    assert_eq!(
        openai["messages"].as_array().unwrap().last().unwrap()["content"],
        json!([
            {"type": "text", "text": "and this?"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG_B64}")}},
        ])
    );
}

#[tokio::test]
async fn a_pdf_document_reaches_the_anthropic_request_with_its_title() {
    let h = Harness::new(script(), CONFIG).await;
    let server = h.start().await;
    let id = session(&server, "claude").await;
    let pdf = base64::engine::general_purpose::STANDARD.encode(b"%PDF-1.4\n%%EOF\n");
    let source = json!({"type": "base64", "media_type": "application/pdf", "data": pdf});
    let body = json!({"content": [{"type": "text", "text": "summarise it"},
        {"type": "document", "source": source, "title": "report.pdf"}]});
    let (status, accepted) = send(&server, &id, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    server.wait_idle(&id).await;
    let request = h.model_requests().last().unwrap().body.clone();
    let mut document = request["messages"][0]["content"][1].clone();
    // The prompt-cache mark on the last block is the provider adapter's.
    document.as_object_mut().unwrap().remove("cache_control");
    assert_eq!(
        document,
        json!({"type": "document", "source": source, "title": "report.pdf"}),
        "{request}"
    );
}

#[tokio::test]
async fn bad_attachments_are_refused_with_a_clear_error() {
    let h = Harness::new(script(), CONFIG).await;
    let server = h.start().await;
    let id = session(&server, "claude").await;
    let jpeg_label = json!([{"type": "image", "source":
        {"type": "base64", "media_type": "image/jpeg", "data": PNG_B64}}]);
    let huge = base64::engine::general_purpose::STANDARD.encode(vec![0u8; 6 * 1024 * 1024]);
    let huge = json!([{"type": "image", "source":
        {"type": "base64", "media_type": "image/png", "data": huge}}]);
    let cases = [
        (
            json!({"content": []}),
            StatusCode::BAD_REQUEST,
            "at least one block",
        ),
        (
            json!({"content": jpeg_label}),
            StatusCode::BAD_REQUEST,
            "not image/jpeg (it looks like image/png)",
        ),
        (
            json!({"content": [{"type": "document", "source": {"type": "base64",
            "media_type": "application/pdf", "data": PNG_B64}}]}),
            StatusCode::BAD_REQUEST,
            "content[0]: the data is not a PDF",
        ),
        (
            json!({"content": [{"type": "text", "text": "read this"}, {"type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": ""}}]}),
            StatusCode::BAD_REQUEST,
            "content[1]: the document is empty",
        ),
        (
            json!({"content": [{"type": "image", "source": {"type": "base64",
            "media_type": "image/png", "data": "!!"}}]}),
            StatusCode::BAD_REQUEST,
            "not valid base64",
        ),
        (
            json!({"content": [{"type": "image", "source": {"type": "file", "path": "nope.png"}}]}),
            StatusCode::NOT_FOUND,
            "nope.png",
        ),
        (
            json!({"content": huge}),
            StatusCode::PAYLOAD_TOO_LARGE,
            "at most 5242880",
        ),
        (
            json!({"content": "hi", "thinking": {"budget_tokens": 10}}),
            StatusCode::BAD_REQUEST,
            "between 1024",
        ),
        (
            json!({"content": [{"type": "video"}]}),
            StatusCode::BAD_REQUEST,
            "content[0]",
        ),
    ];
    for (body, expected, says) in cases {
        let (status, answer) = send(&server, &id, body).await;
        assert_eq!(status, expected, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{message:?} should say {says:?}");
    }
    assert!(h.model_requests().is_empty(), "no turn started");
}

#[tokio::test]
async fn an_uploaded_file_lands_in_the_workspace_and_hostile_paths_are_refused() {
    let h = Harness::new(script(), CONFIG).await;
    let server = h.start().await;
    let id = session(&server, "claude").await;
    let workspace = h.data().join("workspaces").join(&id);
    assert!(workspace.is_dir(), "{}", workspace.display());

    let (status, uploaded) = upload(&server, &id, "shots/one.png", png()).await;
    assert_eq!(status, StatusCode::CREATED, "{uploaded}");
    assert_eq!(uploaded["path"], "shots/one.png");
    assert_eq!(uploaded["replaced"], false);
    // The same path again replaces the file, and says so.
    let (status, uploaded) = upload(&server, &id, "shots/one.png", png()).await;
    assert_eq!(status, StatusCode::CREATED, "{uploaded}");
    assert_eq!(
        (&uploaded["replaced"], &uploaded["size"]),
        (&json!(true), &json!(png().len()))
    );
    assert_eq!(
        std::fs::read(workspace.join("shots/one.png")).unwrap(),
        png()
    );

    // A link to outside, made by "the agent".
    let outside = h.data().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, workspace.join("escape")).unwrap();
    for hostile in [
        "../x.png",
        "/tmp/x.png",
        "escape/x.png",
        "shots/../../x.png",
    ] {
        let (status, answer) = upload(&server, &id, hostile, png()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{hostile}: {answer}");
    }
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    let (status, answer) = upload(&server, &id, "big.bin", vec![7; 1024 * 1024 + 1]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
    assert!(!workspace.join("big.bin").exists());
    let (status, answer) = upload(&server, &id, "empty.png", Vec::new()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the body is empty"),
        "{answer}"
    );
    assert!(!workspace.join("empty.png").exists());

    // The uploaded image, named in a message, reaches the model.
    let body = json!({"content": [{"type": "text", "text": "here"},
        {"type": "image", "source": {"type": "file", "path": "shots/one.png"}}]});
    let (status, accepted) = send(&server, &id, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    server.wait_idle(&id).await;
    let request = h.model_requests().last().unwrap().body.clone();
    assert_eq!(
        request["messages"][0]["content"][1]["source"],
        json!({"type": "base64", "media_type": "image/png", "data": PNG_B64})
    );
}

#[tokio::test]
async fn read_of_a_png_shows_the_model_the_image() {
    let h = Harness::new(script(), CONFIG).await;
    let server = h.start().await;
    let id = session(&server, "claude").await;
    let (status, _) = upload(&server, &id, "shot.png", png()).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = send(&server, &id, json!({"content": "look at shot.png"})).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    server.wait_idle(&id).await;
    let request = h.model_requests().last().unwrap().body.clone();
    let result = &request["messages"].as_array().unwrap().last().unwrap()["content"][0];
    assert_eq!(result["type"], "tool_result", "{request}");
    assert_eq!(result["tool_use_id"], "toolu_read_shot");
    assert_eq!(
        result["content"][1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}),
        "{result}"
    );
}

#[tokio::test]
async fn an_image_and_a_thinking_budget_survive_the_cluster_queue() {
    let url = crate::serve_harness::fresh_database_url().await;
    let toml = format!(
        "[server]\nauth = \"none\"\n[database]\nurl = \"{url}\"\n[cluster]\nlease_timeout_s = 3\n\
         [models.claude]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = \"{{URL}}\"\n\
         [profiles.default]\nmode = \"bypass\"\n"
    );
    let h = Harness::new(script(), &toml).await;
    let server = h.start_node("a").await;
    let id = session(&server, "claude").await;
    // Queued behind a plain-text turn, so the image waits in the database.
    let (status, _) = send(&server, &id, json!({"content": "first, plain text"})).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let body = json!({"content": image_message("then this"), "queue": true,
                      "thinking": {"budget_tokens": 4096}});
    let (status, accepted) = send(&server, &id, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let events = server.events(&id, None).await.until_finished(2).await;
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e.event == "turn.finished")
        .map(|e| &e.data)
        .collect();
    assert!(
        finished.iter().all(|f| f["status"] == "completed"),
        "{finished:?}"
    );
    let requests = h.model_requests();
    assert_eq!(
        requests[0].body["messages"][0]["content"][0]["text"],
        "first, plain text"
    );
    let last = &requests.last().unwrap().body;
    let user = last["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(user["content"][1]["source"]["data"], PNG_B64, "{last}");
    assert_eq!(last["thinking"]["budget_tokens"], 4096);
}
