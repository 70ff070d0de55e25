//! `Glob`, `Grep` and `LS`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::os::unix::fs::symlink;

use serde_json::json;
use support::{SECRET, Workspace, assert_error_containing, assert_ok, set_mtime};

/// A small project: sources, a gitignored build dir, a hidden dir, a binary.
fn project() -> Workspace {
    let w = Workspace::new();
    w.file(".gitignore", "target/\n*.log\n");
    set_mtime(
        &w.file("src/main.rs", "fn main() {\n    helper();\n}\n"),
        3000,
    );
    set_mtime(
        &w.file("src/lib.rs", "pub fn helper() {\n    // TODO: more\n}\n"),
        2000,
    );
    set_mtime(&w.file("src/util/mod.rs", "// Helper utilities\n"), 1000);
    w.file("README.md", "# Project\nSee helper.\n");
    w.file("target/debug/out.rs", "fn helper() {}\n");
    w.file("debug.log", "helper called\n");
    w.file(".github/workflows/ci.yml", "name: ci\n");
    std::fs::write(w.ws.join("data.bin"), b"helper\0\x01\x02").unwrap();
    w
}

fn path_lines(w: &Workspace, content: &str) -> Vec<String> {
    let prefix = format!("{}/", w.ws.display());
    content
        .lines()
        .map(|line| line.replace(&prefix, ""))
        .collect()
}

#[tokio::test]
async fn glob_finds_newest_first_and_respects_gitignore() {
    let w = project();
    let result = w.call("Glob", json!({"pattern": "**/*.rs"})).await;
    assert_ok(&result);
    assert_eq!(
        path_lines(&w, &result.content),
        ["src/main.rs", "src/lib.rs", "src/util/mod.rs"]
    );
    let result = w.call("Glob", json!({"pattern": "*.log"})).await;
    assert_eq!(result.content, "No files found");
}

#[tokio::test]
async fn glob_star_stays_in_one_directory() {
    let w = project();
    let result = w.call("Glob", json!({"pattern": "src/*.rs"})).await;
    assert_eq!(
        path_lines(&w, &result.content),
        ["src/main.rs", "src/lib.rs"]
    );
    let result = w
        .call("Glob", json!({"pattern": "*.rs", "path": "src/util"}))
        .await;
    assert_eq!(path_lines(&w, &result.content), ["src/util/mod.rs"]);
}

#[tokio::test]
async fn glob_accepts_absolute_patterns_hidden_dirs_and_braces() {
    let w = project();
    let pattern = format!("{}/src/**/*.{{rs,md}}", w.ws.display());
    let result = w.call("Glob", json!({"pattern": pattern})).await;
    assert_eq!(path_lines(&w, &result.content).len(), 3);
    let result = w.call("Glob", json!({"pattern": ".github/**/*.yml"})).await;
    assert_eq!(
        path_lines(&w, &result.content),
        [".github/workflows/ci.yml"]
    );
    let result = w.call("Glob", json!({"pattern": "README.md"})).await;
    assert_eq!(path_lines(&w, &result.content), ["README.md"]);
}

#[tokio::test]
async fn glob_caps_results_with_a_note() {
    let w = Workspace::new();
    for n in 0..120 {
        w.file(&format!("many/f{n:03}.txt"), "");
    }
    let result = w.call("Glob", json!({"pattern": "many/*.txt"})).await;
    let lines: Vec<_> = result.content.lines().collect();
    assert_eq!(lines.len(), 101);
    assert!(
        lines[100].contains("100 most recently modified of 120"),
        "{}",
        lines[100]
    );
}

#[tokio::test]
async fn glob_reports_bad_patterns_and_missing_directories() {
    let w = project();
    assert_error_containing(
        &w.call("Glob", json!({"pattern": "src/[.rs"})).await,
        "invalid glob pattern",
    );
    assert_error_containing(
        &w.call("Glob", json!({"pattern": "*", "path": "nope"}))
            .await,
        "does not exist",
    );
}

#[tokio::test]
async fn grep_lists_matching_files_newest_first() {
    let w = project();
    let result = w.call("Grep", json!({"pattern": "helper"})).await;
    assert_ok(&result);
    // target/ and *.log are gitignored, data.bin is binary, mod.rs has "Helper".
    // README.md was written last, so it is newest.
    assert_eq!(
        path_lines(&w, &result.content),
        ["Found 3 files", "README.md", "src/main.rs", "src/lib.rs"]
    );
}

#[tokio::test]
async fn grep_content_mode_with_line_numbers_and_case() {
    let w = project();
    let result = w
        .call(
            "Grep",
            json!({"pattern": "HELPER", "-i": true, "output_mode": "content", "path": "src"}),
        )
        .await;
    let lines = path_lines(&w, &result.content);
    assert_eq!(
        lines,
        [
            "src/lib.rs:1:pub fn helper() {",
            "src/main.rs:2:    helper();",
            "src/util/mod.rs:1:// Helper utilities"
        ]
    );
    let result = w.call("Grep", json!({"pattern": "helper", "output_mode": "content", "-n": false, "path": "src/main.rs"})).await;
    assert_eq!(
        path_lines(&w, &result.content),
        ["src/main.rs:    helper();"]
    );
}

#[tokio::test]
async fn grep_context_lines() {
    let w = project();
    let input = json!({"pattern": "TODO", "output_mode": "content", "-C": 1});
    let result = w.call("Grep", input).await;
    assert_eq!(
        path_lines(&w, &result.content),
        [
            "src/lib.rs-1-pub fn helper() {",
            "src/lib.rs:2:    // TODO: more",
            "src/lib.rs-3-}"
        ]
    );
    let input = json!({"pattern": "helper", "output_mode": "content", "-A": 1, "glob": "*.rs"});
    let lines = path_lines(&w, &w.call("Grep", input).await.content);
    assert!(lines.contains(&"--".to_string()), "{lines:?}");
}

#[tokio::test]
async fn grep_filters_by_glob_and_type() {
    let w = project();
    let result = w
        .call("Grep", json!({"pattern": "helper", "glob": "*.md"}))
        .await;
    assert_eq!(
        path_lines(&w, &result.content),
        ["Found 1 file", "README.md"]
    );
    let result = w
        .call("Grep", json!({"pattern": "helper", "type": "rust"}))
        .await;
    assert_eq!(path_lines(&w, &result.content)[0], "Found 2 files");
    assert_error_containing(
        &w.call("Grep", json!({"pattern": "x", "type": "nosuchtype"}))
            .await,
        "invalid `type`",
    );
}

#[tokio::test]
async fn grep_count_mode_and_head_limit() {
    let w = project();
    w.file("many.txt", "hit\nhit\nmiss\nhit\n");
    let result = w
        .call("Grep", json!({"pattern": "hit", "output_mode": "count"}))
        .await;
    let lines = path_lines(&w, &result.content);
    assert_eq!(lines[0], "many.txt:3");
    assert!(
        result.content.ends_with("Found 3 matching lines in 1 file"),
        "{}",
        result.content
    );
    let input = json!({"pattern": "hit", "output_mode": "content", "head_limit": 2});
    let lines = path_lines(&w, &w.call("Grep", input).await.content);
    assert_eq!(lines[..2], ["many.txt:1:hit", "many.txt:2:hit"]);
    assert!(lines[2].contains("head_limit reached"), "{lines:?}");
}

#[tokio::test]
async fn grep_multiline_spans_lines() {
    let w = project();
    let input =
        json!({"pattern": "main\\(\\) \\{.*helper", "multiline": true, "output_mode": "content"});
    let result = w.call("Grep", input).await;
    assert_eq!(
        path_lines(&w, &result.content),
        ["src/main.rs:1:fn main() {", "src/main.rs:2:    helper();"]
    );
    let without = json!({"pattern": "main\\(\\) \\{.*helper", "output_mode": "content"});
    assert_eq!(w.call("Grep", without).await.content, "No matches found");
}

#[tokio::test]
async fn grep_reports_bad_regexes() {
    let w = project();
    assert_error_containing(
        &w.call("Grep", json!({"pattern": "fn("})).await,
        "invalid regular expression",
    );
    let bad_mode = json!({"pattern": "x", "output_mode": "lines"});
    assert_error_containing(
        &w.call("Grep", bad_mode).await,
        "`output_mode` must be one of",
    );
}

#[tokio::test]
async fn grep_does_not_follow_symlinks_out_of_the_workspace() {
    let w = project();
    symlink(w.outside.join("secret.txt"), w.ws.join("leak.txt")).unwrap();
    symlink(&w.outside, w.ws.join("leakdir")).unwrap();
    symlink(w.ws.join("README.md"), w.ws.join("inner-link.md")).unwrap();
    let result = w
        .call(
            "Grep",
            json!({"pattern": "TOPSECRET|Project", "output_mode": "content"}),
        )
        .await;
    assert!(!result.content.contains(SECRET), "{}", result.content);
    assert!(
        result.content.contains("inner-link.md:1:# Project"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn ls_lists_directories_first_with_slashes() {
    let w = project();
    symlink("README.md", w.ws.join("readme-link")).unwrap();
    let result = w.call("LS", json!({"path": "."})).await;
    assert_ok(&result);
    let lines: Vec<&str> = result.content.lines().collect();
    assert_eq!(lines[0], format!("{}/", w.ws.display()));
    assert_eq!(
        lines[1..],
        [
            "  .github/",
            "  src/",
            "  target/",
            "  .gitignore",
            "  README.md",
            "  data.bin",
            "  debug.log",
            "  readme-link -> README.md"
        ]
    );
}

#[tokio::test]
async fn ls_ignores_globs_and_refuses_files() {
    let w = project();
    let result = w
        .call(
            "LS",
            json!({"path": w.ws.to_str().unwrap(), "ignore": ["target", "*.log", ".*"]}),
        )
        .await;
    let lines: Vec<&str> = result.content.lines().skip(1).collect();
    assert_eq!(lines, ["  src/", "  README.md", "  data.bin"]);
    assert_error_containing(
        &w.call("LS", json!({"path": "README.md"})).await,
        "not a directory",
    );
    assert_error_containing(
        &w.call("LS", json!({"path": "nope"})).await,
        "does not exist",
    );
    std::fs::create_dir(w.ws.join("empty")).unwrap();
    assert!(
        w.call("LS", json!({"path": "empty"}))
            .await
            .content
            .contains("(empty directory)")
    );
}
