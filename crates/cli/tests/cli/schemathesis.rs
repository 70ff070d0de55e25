//! The OpenAPI document is exact: schemathesis (`st`, a pinned version that
//! `bash scripts/install-deps.sh` installs into `.tools/venv`) runs all its
//! checks against a real `agentd serve` with token authentication — every
//! operation, with valid and invalid data, statuses, content types, response
//! and SSE event schemas, links between operations, one user reading
//! another's objects — and finds nothing.
//! Its settings are in `schemathesis.toml` beside this file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use serve_harness::Harness;
use tokio::process::Command;

/// The whole run; it takes well under a minute on an idle machine.
const TIMEOUT: Duration = Duration::from_secs(300);
const TOML: &str = "[server]\nauth = \"token\"\n[profiles.default]\nmode = \"bypass\"\n\
    [[commands]]\nname = \"echo\"\ndescription = \"Echo a word\"\nargv = [\"echo\", \"{word}\"]\n\
    mutating = false\nparameters = { word = { type = \"string\", pattern = \"[a-z]{1,8}\" } }\n";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

#[tokio::test]
async fn schemathesis_finds_the_server_doing_exactly_what_its_openapi_document_says() {
    let repo = repo();
    let st = repo.join(".tools/venv/bin/st");
    assert!(
        st.is_file(),
        "schemathesis is missing ({}): run bash scripts/install-deps.sh",
        st.display()
    );
    let settings = repo.join("crates/cli/tests/cli/schemathesis.toml");
    // Turns answer at once, so the stream and the messages have real events.
    let script =
        json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "ok"}]}]});
    let h = Harness::new(script, TOML).await;
    // alice is the one who works, an admin (the profile bypasses permissions,
    // and the admin routes are tried too); bob tries to read what she made
    // (`object_level_authorization`).
    let (code, admin_token, stderr) = h
        .cli(&["tokens", "create", "--user", "alice", "--admin"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let mut identities = Vec::new();
    for (user, token) in [
        ("alice", admin_token.trim().to_string()),
        ("bob", h.token("bob").await),
    ] {
        let header = json!({"name": "Authorization", "value": format!("Bearer {token}")});
        identities.push(json!({"name": user, "fixedHeaders": [header]}));
    }
    let auth = h.data().join("auth.json");
    std::fs::write(&auth, json!({"auth": identities}).to_string()).unwrap();
    let server = h.start().await;
    let output = h.data().join("schemathesis.out");

    let mut run = Command::new(&st);
    run.arg("--config-file")
        .arg(&settings)
        .args(["run", &format!("{}/openapi.json", server.url)])
        .args(["--checks", "all"])
        .arg("--auth-wfc")
        .arg(&auth)
        // Bounded for 2 cores; a fixed seed makes a failure reproducible.
        .args([
            "--max-examples",
            "20",
            "--seed",
            "22",
            "--request-timeout",
            "10",
        ])
        .args(["--no-color", "--workers", "1"])
        // Hypothesis keeps its example database in the working directory.
        .current_dir(h.data())
        .env("HOME", h.data())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&output).unwrap())
        .stderr(Stdio::from(
            std::fs::File::options().append(true).open(&output).unwrap(),
        ))
        .kill_on_drop(true);
    let status = tokio::time::timeout(TIMEOUT, run.status())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "schemathesis did not finish within {TIMEOUT:?}:\n{}",
                std::fs::read_to_string(&output).unwrap_or_default()
            )
        })
        .expect("cannot start schemathesis");
    let report = std::fs::read_to_string(&output).unwrap_or_default();
    assert!(
        status.success(),
        "schemathesis found differences between /openapi.json and the server ({status}):\n{report}\n\
         --- agentd serve log\n{}",
        server.log()
    );
    println!("{report}");
}
