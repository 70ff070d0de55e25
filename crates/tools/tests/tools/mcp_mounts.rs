//! A stdio MCP server sees the policy's host mounts as its commands do: a
//! read-only one readable and unwritable, a writable one writable.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use agentd_sandbox::Mount;
use agentd_tools::McpPool;
use serde_json::json;

use crate::mcp_support::{Session, assert_ok, call, node, package_entry};

#[tokio::test]
async fn a_read_only_mount_is_read_only_for_an_mcp_server_too() {
    let mut s = Session::new();
    let (ro, rw) = (s.outside.join("ro"), s.outside.join("rw"));
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::create_dir_all(&rw).unwrap();
    std::fs::write(ro.join("seen.txt"), "from the host").unwrap();
    s.policy.mounts = vec![
        Mount::pinned(&ro, Path::new("/mnt/ro"), true).unwrap(),
        Mount::pinned(&rw, Path::new("/mnt/rw"), false).unwrap(),
    ];
    let args = vec![
        package_entry("server-filesystem"),
        "/mnt/ro".into(),
        "/mnt/rw".into(),
    ];
    let pool = McpPool::new(vec![node("fs", args)]);
    let tools = pool.tools("s1", &s.policy).await;
    assert!(tools.errors.is_empty(), "{:?}", tools.errors);

    let read = call(
        &tools,
        "mcp__fs__read_text_file",
        json!({"path": "/mnt/ro/seen.txt"}),
        &s.ctx,
    )
    .await;
    assert_ok(&read);
    assert_eq!(read.content, "from the host");
    let write = |path: &str| json!({"path": path, "content": "from mcp"});
    let refused = call(
        &tools,
        "mcp__fs__write_file",
        write("/mnt/ro/new.txt"),
        &s.ctx,
    )
    .await;
    assert!(refused.is_error, "{}", refused.content);
    assert!(
        refused.content.contains("read-only file system"),
        "{}",
        refused.content
    );
    assert!(!ro.join("new.txt").exists());
    let written = call(
        &tools,
        "mcp__fs__write_file",
        write("/mnt/rw/new.txt"),
        &s.ctx,
    )
    .await;
    assert_ok(&written);
    assert_eq!(
        std::fs::read_to_string(rw.join("new.txt")).unwrap(),
        "from mcp"
    );
    pool.shutdown().await;
}
