//! `Read`, `Write`, `Edit` and `MultiEdit`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use base64::Engine as _;
use serde_json::json;
use support::{Workspace, assert_error_containing, assert_ok};

fn numbered(lines: std::ops::RangeInclusive<usize>) -> String {
    lines
        .map(|n| format!("{n:>6}\tline {n}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn lines_file(count: usize) -> String {
    (1..=count).map(|n| format!("line {n}\n")).collect()
}

#[tokio::test]
async fn read_numbers_lines_like_cat_n() {
    let w = Workspace::new();
    w.file("a.txt", &lines_file(3));
    let result = w.call("Read", json!({"file_path": "a.txt"})).await;
    assert_ok(&result);
    assert_eq!(result.content, numbered(1..=3));
    let absolute = w.ws.join("a.txt");
    let result = w
        .call("Read", json!({"file_path": absolute.to_str().unwrap()}))
        .await;
    assert_eq!(result.content, numbered(1..=3));
}

#[tokio::test]
async fn read_honours_offset_and_limit() {
    let w = Workspace::new();
    w.file("a.txt", &lines_file(10));
    let result = w
        .call(
            "Read",
            json!({"file_path": "a.txt", "offset": 3, "limit": 2}),
        )
        .await;
    assert!(
        result.content.starts_with(&numbered(3..=4)),
        "{}",
        result.content
    );
    assert!(result.content.contains("offset=5"), "{}", result.content);
    let result = w
        .call("Read", json!({"file_path": "a.txt", "offset": 9}))
        .await;
    assert_eq!(result.content, numbered(9..=10));
    let result = w
        .call("Read", json!({"file_path": "a.txt", "offset": 50}))
        .await;
    assert!(
        result
            .content
            .contains("has 10 lines; offset 50 is past the end"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn read_defaults_to_2000_lines() {
    let w = Workspace::new();
    w.file("big.txt", &lines_file(2500));
    let mut ctx = w.ctx.clone();
    ctx.result_cap = 1_000_000;
    let result = support::call_with(&ctx, "Read", json!({"file_path": "big.txt"})).await;
    assert!(
        result.content.contains("  2000\tline 2000\n"),
        "missing line 2000"
    );
    assert!(!result.content.contains("\tline 2001"));
    assert!(result.content.contains("read more with offset=2001"));
}

#[tokio::test]
async fn read_stops_at_the_result_cap() {
    let mut w = Workspace::new();
    w.ctx.result_cap = 400;
    w.file("a.txt", &lines_file(100));
    let result = w.call("Read", json!({"file_path": "a.txt"})).await;
    assert_ok(&result);
    assert!(
        result.content.contains("[stopped at the size limit"),
        "{}",
        result.content
    );
    assert!(result.content.chars().count() <= 400, "{}", result.content);
    assert!(
        !result.content.contains("[output truncated"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn read_cuts_long_lines_and_strips_crlf() {
    let w = Workspace::new();
    w.file("long.txt", &format!("{}\r\nshort\r\n", "x".repeat(5000)));
    let result = w.call("Read", json!({"file_path": "long.txt"})).await;
    let first = result.content.lines().next().unwrap();
    assert!(first.ends_with("… [line truncated]"));
    assert_eq!(first.chars().filter(|c| *c == 'x').count(), 2000);
    assert!(
        result.content.ends_with("     2\tshort"),
        "{:?}",
        result.content
    );
}

#[tokio::test]
async fn read_refuses_binary_directories_and_missing_files() {
    let w = Workspace::new();
    std::fs::write(w.ws.join("bin.dat"), b"abc\0def").unwrap();
    assert_error_containing(
        &w.call("Read", json!({"file_path": "bin.dat"})).await,
        "binary file, 7 bytes",
    );
    std::fs::create_dir(w.ws.join("dir")).unwrap();
    assert_error_containing(
        &w.call("Read", json!({"file_path": "dir"})).await,
        "is a directory",
    );
    assert_error_containing(
        &w.call("Read", json!({"file_path": "nope.txt"})).await,
        "does not exist",
    );
}

#[tokio::test]
async fn read_of_an_image_returns_it_and_refuses_one_too_large() {
    let w = Workspace::new();
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    std::fs::write(w.ws.join("shot.png"), &png).unwrap();
    let result = w.call("Read", json!({"file_path": "shot.png"})).await;
    assert_ok(&result);
    assert!(
        result.content.contains("an image (image/png), 16 bytes"),
        "{}",
        result.content
    );
    let data = base64::engine::general_purpose::STANDARD.encode(&png);
    assert_eq!(
        result.images,
        [json!({"type": "base64", "media_type": "image/png", "data": data})]
    );
    // The same bytes under another name are still an image: the name is never trusted.
    let mut huge = png;
    huge.resize(agentd_protocol::MAX_IMAGE_BYTES + 1, 0);
    std::fs::write(w.ws.join("huge.txt"), &huge).unwrap();
    let result = w.call("Read", json!({"file_path": "huge.txt"})).await;
    assert_error_containing(&result, "cannot be shown");
    assert!(result.images.is_empty());
}

#[tokio::test]
async fn read_of_an_empty_file_says_so() {
    let w = Workspace::new();
    w.file("empty.txt", "");
    let result = w.call("Read", json!({"file_path": "empty.txt"})).await;
    assert_ok(&result);
    assert!(result.content.contains("is empty"));
}

#[tokio::test]
async fn write_creates_parents_and_overwrites() {
    let w = Workspace::new();
    let result = w
        .call(
            "Write",
            json!({"file_path": "deep/er/new.txt", "content": "one\n"}),
        )
        .await;
    assert_ok(&result);
    assert!(
        result.content.starts_with("Created deep/er/new.txt"),
        "{}",
        result.content
    );
    assert_eq!(w.read("deep/er/new.txt"), "one\n");
    let result = w
        .call(
            "Write",
            json!({"file_path": "deep/er/new.txt", "content": "two"}),
        )
        .await;
    assert!(result.content.starts_with("Overwrote"));
    assert_eq!(w.read("deep/er/new.txt"), "two");
}

#[tokio::test]
async fn write_refuses_a_directory() {
    let w = Workspace::new();
    std::fs::create_dir(w.ws.join("dir")).unwrap();
    assert_error_containing(
        &w.call("Write", json!({"file_path": "dir", "content": "x"}))
            .await,
        "is a directory",
    );
}

#[tokio::test]
async fn edit_replaces_a_unique_match_and_shows_it() {
    let w = Workspace::new();
    w.file("a.rs", "fn main() {\n    println!(\"hi\");\n}\n");
    let input = json!({"file_path": "a.rs", "old_string": "\"hi\"", "new_string": "\"hello\""});
    let result = w.call("Edit", input).await;
    assert_ok(&result);
    assert_eq!(w.read("a.rs"), "fn main() {\n    println!(\"hello\");\n}\n");
    assert!(
        result.content.contains("     2\t    println!(\"hello\");"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn edit_errors_leave_the_file_alone() {
    let w = Workspace::new();
    w.file("a.txt", "x x x");
    let edit =
        |old: &str, new: &str| json!({"file_path": "a.txt", "old_string": old, "new_string": new});
    assert_error_containing(&w.call("Edit", edit("y", "z")).await, "not found");
    assert_error_containing(&w.call("Edit", edit("x", "z")).await, "matches 3 places");
    assert_error_containing(&w.call("Edit", edit("x", "x")).await, "identical");
    assert_error_containing(&w.call("Edit", edit("", "z")).await, "empty");
    assert_eq!(w.read("a.txt"), "x x x");
    let missing = json!({"file_path": "missing.txt", "old_string": "a", "new_string": "b"});
    assert_error_containing(&w.call("Edit", missing).await, "does not exist");
}

#[tokio::test]
async fn edit_replace_all_and_create() {
    let w = Workspace::new();
    w.file("a.txt", "x x x");
    let input =
        json!({"file_path": "a.txt", "old_string": "x", "new_string": "y", "replace_all": true});
    let result = w.call("Edit", input).await;
    assert_ok(&result);
    assert!(result.content.contains("3 replacements"));
    assert_eq!(w.read("a.txt"), "y y y");
    let create = json!({"file_path": "new/b.txt", "old_string": "", "new_string": "fresh"});
    assert_ok(&w.call("Edit", create).await);
    assert_eq!(w.read("new/b.txt"), "fresh");
}

#[tokio::test]
async fn multi_edit_applies_in_order() {
    let w = Workspace::new();
    w.file("a.txt", "alpha beta gamma");
    let input = json!({"file_path": "a.txt", "edits": [
        {"old_string": "alpha", "new_string": "ALPHA"},
        {"old_string": "ALPHA beta", "new_string": "first second"},
        {"old_string": "a", "new_string": "A", "replace_all": true}
    ]});
    let result = w.call("MultiEdit", input).await;
    assert_ok(&result);
    assert_eq!(w.read("a.txt"), "first second gAmmA");
    assert!(
        result.content.contains("Applied 3 edits"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn multi_edit_is_all_or_nothing() {
    let w = Workspace::new();
    w.file("a.txt", "alpha beta");
    let input = json!({"file_path": "a.txt", "edits": [
        {"old_string": "alpha", "new_string": "ALPHA"},
        {"old_string": "missing", "new_string": "x"}
    ]});
    let result = w.call("MultiEdit", input).await;
    assert_error_containing(&result, "edit 2 of 2 failed, so no edits were applied");
    assert_eq!(w.read("a.txt"), "alpha beta");
    let empty = json!({"file_path": "a.txt", "edits": []});
    assert_error_containing(
        &w.call("MultiEdit", empty).await,
        "`edits` needs at least 1 item",
    );
}

#[tokio::test]
async fn multi_edit_can_create_a_file() {
    let w = Workspace::new();
    let input = json!({"file_path": "new.txt", "edits": [
        {"old_string": "", "new_string": "hello world"},
        {"old_string": "world", "new_string": "there"}
    ]});
    assert_ok(&w.call("MultiEdit", input).await);
    assert_eq!(w.read("new.txt"), "hello there");
}
