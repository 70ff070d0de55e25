//! The [`Tool`] adapter for one tool of one session's MCP server.
use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::Tool as ToolDef;
use serde_json::Value;

use super::slot::ServerSlot;
use crate::tool_result::finish;
use crate::{Tool, ToolContext, ToolResult};

pub(crate) struct McpTool {
    /// `mcp__<server>__<tool>`.
    name: String,
    /// The name the server knows it by.
    remote_name: String,
    description: String,
    schema: Value,
    /// The operator's word (or the server's trusted hint), see `ReadOnlyTools`.
    read_only: bool,
    slot: Arc<ServerSlot>,
}

impl McpTool {
    pub(crate) fn new(name: String, definition: ToolDef, slot: Arc<ServerSlot>) -> Self {
        let description = definition
            .description
            .as_deref()
            .or(definition.title.as_deref())
            .filter(|text| !text.trim().is_empty())
            .map_or_else(
                || {
                    format!(
                        "Tool `{}` of MCP server `{}`.",
                        definition.name, slot.config.name
                    )
                },
                str::to_string,
            );
        let mut schema = (*definition.input_schema).clone();
        // The model API insists on an object schema; MCP requires one too,
        // but not every server says so.
        schema
            .entry("type")
            .or_insert_with(|| Value::String("object".into()));
        Self {
            name,
            read_only: slot.config.read_only.covers(&definition),
            remote_name: definition.name.to_string(),
            description,
            schema: Value::Object(schema),
            slot,
        }
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    fn is_read_only(&self) -> bool {
        self.read_only
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> ToolResult {
        let result = self.slot.call(&self.remote_name, input, ctx).await;
        finish(result.unwrap_or_else(ToolResult::error), ctx)
    }
}
