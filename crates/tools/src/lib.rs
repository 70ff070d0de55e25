//! The agent's tools: the [`Tool`] trait, the [`ToolContext`] a call runs in,
//! and the built-in set with Claude Code's names and input schemas
//! (`Bash`, `BashOutput`, `KillShell`, `Read`, `Write`, `Edit`, `MultiEdit`,
//! `Glob`, `Grep`, `LS`).
//!
//! Every path a tool receives goes through the context's `PathGuard`, and
//! every host file operation on it runs beneath the root's descriptor
//! (`PathGuard::confined`), never by path again, so a link swapped in
//! meanwhile cannot lead it out (see `host_fs`); `Bash` runs in the context's
//! sandbox. Results are capped before they reach the model.
//! Bad input (missing, unknown or mistyped fields, or a string where an object
//! belongs) is a `ToolResult::error` naming the field, never a panic.

mod background;
mod bash;
pub mod command;
mod context;
mod edit;
mod edit_core;
pub mod egress;
mod glob;
mod grep;
mod grep_search;
mod host_fs;
mod ignore_files;
mod input;
mod ls;
pub mod mcp;
mod multi_edit;
mod output_tail;
mod read;
mod registry;
mod result_cap;
pub mod skills;
mod tool_result;
mod walk;
mod web_fetch;
mod write;

pub use background::{
    BACKGROUND_OUTPUT_CAP, BackgroundShells, BashOutputTool, DEFAULT_BACKGROUND_IDLE_TIMEOUT,
    KillShellTool, MAX_RUNNING_SHELLS, ShellInfo, ShellStatus,
};
pub use bash::BashTool;
pub use context::{
    DEFAULT_BASH_MAX_TIMEOUT, DEFAULT_BASH_TIMEOUT, HiddenPaths, ToolContext, ToolOutput,
    ToolResult,
};
pub use edit::EditTool;
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use ls::LsTool;
pub use mcp::{McpPool, McpServerConfig, McpTools, McpTransport};
pub use multi_edit::MultiEditTool;
pub use read::ReadTool;
pub use registry::{ToolRegistry, builtin_tools};
pub use result_cap::DEFAULT_RESULT_CAP;
pub use skills::{Skill, SkillSet, SkillSource, SkillTool};
pub use web_fetch::{
    DEFAULT_WEB_MAX_BYTES, DEFAULT_WEB_MAX_REDIRECTS, DEFAULT_WEB_TIMEOUT, UrlCheck, UrlVerdict,
    WebEgress, WebFetchTool, WebPolicy,
};
pub use write::WriteTool;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A tool the model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by, e.g. `Bash`.
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON Schema of the input object.
    fn input_schema(&self) -> Value;
    /// Read-only tools may run in parallel and never need approval in `default` mode.
    fn is_read_only(&self) -> bool;
    /// Run the call. Failures the model should see (bad input, missing file,
    /// refused path) are `ToolResult::error`, never a panic.
    async fn call(&self, input: Value, ctx: &ToolContext) -> ToolResult;
    /// What a call with `input` will run, in full, for the person asked to
    /// approve it (an operator command's argv); `None` when the input says it.
    fn describe_call(&self, _input: &Value) -> Option<String> {
        None
    }
}

/// The schema of an object with these properties, `required` of them, and no others.
fn object_schema(properties: Value, required: &[&str]) -> Value {
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

/// A built-in tool: fixed name, description and schema, and an input struct
/// checked against that schema (see `input::parse_input`) before `run` sees it.
#[async_trait]
pub(crate) trait TypedTool: Send + Sync {
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    const READ_ONLY: bool;
    /// The fields the input must have.
    const REQUIRED: &'static [&'static str];
    type Input: DeserializeOwned + Send;

    /// The input's fields and their schemas; no others are allowed.
    fn properties() -> Value;

    /// The description the model sees; `DESCRIPTION` unless a tool adds to it.
    fn full_description(&self) -> &str {
        Self::DESCRIPTION
    }

    /// Run the call; an `Err` is the model's error result.
    async fn run(&self, input: Self::Input, ctx: &ToolContext) -> Result<ToolResult, String>;
}

#[async_trait]
impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        T::NAME
    }

    fn description(&self) -> &str {
        self.full_description()
    }

    fn input_schema(&self) -> Value {
        object_schema(T::properties(), T::REQUIRED)
    }

    fn is_read_only(&self) -> bool {
        T::READ_ONLY
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> ToolResult {
        match input::parse_input(T::NAME, &self.input_schema(), input) {
            Ok(input) => self.run(input, ctx).await.unwrap_or_else(ToolResult::error),
            Err(error) => error,
        }
    }
}
