//! `agentd run --image PATH`: images attached to the prompt reach the model;
//! a file that is no image is refused before any model call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use crate::run_harness::{Harness, Wire};
use crate::serve_attachments::{PNG_B64, png};

#[tokio::test]
async fn images_are_attached_to_the_prompt() {
    let script = json!({"replies": [{"repeat": true,
        "content": [{"type": "text", "text": "two pixels"}]}]});
    let h = Harness::new(Wire::Anthropic, script).await;
    std::fs::write(h.ws().join("one.png"), png()).unwrap();
    std::fs::write(h.ws().join("notes.txt"), "not an image").unwrap();

    let run = h
        .run(
            "what is in them?",
            &["--image", "one.png", "--image", "one.png"],
        )
        .await;
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let request = h.model_requests().last().unwrap().body.clone();
    let content = request["messages"][0]["content"].as_array().unwrap();
    assert_eq!(content.len(), 3, "{content:?}");
    assert_eq!(content[0]["text"], "what is in them?");
    let source = json!({"type": "base64", "media_type": "image/png", "data": PNG_B64});
    for image in &content[1..] {
        assert_eq!(
            (&image["type"], &image["source"]),
            (&json!("image"), &source)
        );
    }

    let calls = h.model_requests().len();
    let run = h.run("and this?", &["--image", "notes.txt"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("not a PNG, JPEG, GIF or WebP image"),
        "{}",
        run.stderr
    );
    assert_eq!(h.model_requests().len(), calls, "no model call");

    // Over 5 MiB: a usage error, before any model call.
    let mut huge = png();
    huge.resize(agentd_protocol::MAX_IMAGE_BYTES + 1, 0);
    std::fs::write(h.ws().join("huge.png"), huge).unwrap();
    let run = h.run("and this one?", &["--image", "huge.png"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("--image huge.png: images over 5242880 bytes cannot be sent to a model"),
        "{}",
        run.stderr
    );
    assert_eq!(h.model_requests().len(), calls, "no model call");
}
