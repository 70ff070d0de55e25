//! A temporary workspace with a sibling "outside" directory, and a way to call tools.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use agentd_tools::{ToolContext, ToolResult, builtin_tools};
use serde_json::Value;

pub const SECRET: &str = "TOPSECRET-CONTENT";

pub struct Workspace {
    _root: tempfile::TempDir,
    pub ws: PathBuf,
    pub outside: PathBuf,
    pub ctx: ToolContext,
}

impl Workspace {
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        let outside = root.path().join("outside");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
        let ctx = ToolContext::for_workspace(&ws).unwrap();
        let ws = ws.canonicalize().unwrap();
        let outside = outside.canonicalize().unwrap();
        Self {
            _root: root,
            ws,
            outside,
            ctx,
        }
    }

    /// Write `content` to `relative` inside the workspace, creating directories.
    pub fn file(&self, relative: &str, content: &str) -> PathBuf {
        let path = self.ws.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.ws.join(relative)).unwrap()
    }

    pub async fn call(&self, tool: &str, input: Value) -> ToolResult {
        call_with(&self.ctx, tool, input).await
    }
}

pub async fn call_with(ctx: &ToolContext, tool: &str, input: Value) -> ToolResult {
    let registry = builtin_tools();
    let tool = registry
        .get(tool)
        .unwrap_or_else(|| panic!("no tool {tool}"));
    tool.call(input, ctx).await
}

/// Set a file's modification time to `seconds` after the epoch.
pub fn set_mtime(path: &Path, seconds: u64) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds))
        .unwrap();
}

#[track_caller]
pub fn assert_ok(result: &ToolResult) {
    assert!(
        !result.is_error,
        "expected success, got error: {}",
        result.content
    );
}

#[track_caller]
pub fn assert_error_containing(result: &ToolResult, needle: &str) {
    assert!(
        result.is_error,
        "expected an error, got: {}",
        result.content
    );
    assert!(
        result.content.contains(needle),
        "error {:?} should contain {needle:?}",
        result.content
    );
}

pub use agentd_testkit::processes::{assert_none_left, processes_mentioning};

/// A string no other test's command line has.
pub fn unique_marker(name: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{name}-{}-{n}", std::process::id())
}
