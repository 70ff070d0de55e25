//! A command as a tool the model calls.
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::spec::CommandSpec;
use super::{CommandEnv, EnvFiller, argv_for, run_command};
use crate::{Tool, ToolContext, ToolResult};

/// How an operator command's approval request names the argv it would run
/// (in its `reason`): also how agentd's MCP server knows the request is a
/// command's.
pub const RUNS_MARK: &str = "it runs: ";

pub struct CommandTool {
    spec: Arc<CommandSpec>,
    description: String,
    env: Option<Arc<dyn EnvFiller>>,
}

impl CommandTool {
    /// The command with its `env` as written.
    pub fn new(spec: Arc<CommandSpec>) -> Self {
        let description = spec.tool_description();
        Self {
            spec,
            description,
            env: None,
        }
    }

    /// Its `env` filled in by `filler` at each run.
    pub fn with_env(mut self, filler: Arc<dyn EnvFiller>) -> Self {
        self.env = Some(filler);
        self
    }
}

#[async_trait]
impl Tool for CommandTool {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.spec.input_schema()
    }

    fn is_read_only(&self) -> bool {
        !self.spec.mutating
    }

    fn describe_call(&self, input: &Value) -> Option<String> {
        let argv = argv_for(&self.spec, input).ok()?;
        Some(format!("{RUNS_MARK}{}", shown_argv(&argv)))
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> ToolResult {
        let argv = match argv_for(&self.spec, &input) {
            Ok(argv) => argv,
            Err(err) => return ToolResult::error(format!("Refused, nothing ran: {err}")),
        };
        let env = match &self.env {
            Some(filler) => match filler.fill(&self.spec).await {
                Ok(env) => env,
                Err(err) => {
                    return ToolResult::error(format!(
                        "Nothing ran: its environment could not be filled in: {err}"
                    ));
                }
            },
            None => CommandEnv::as_written(&self.spec),
        };
        let ran = run_command(
            &ctx.sandbox,
            &self.spec,
            &env,
            &argv,
            &ctx.policy,
            &ctx.cancel,
        );
        match ran.await {
            Ok(run) => {
                let result = if run.succeeded() {
                    ToolResult::ok(run.summary())
                } else {
                    ToolResult::error(run.summary())
                };
                result.capped(ctx.result_cap)
            }
            Err(err) => ToolResult::error(err),
        }
    }
}

/// `argv` on one line, each element that is not a plain word in single
/// quotes (as a shell would take it back), so where one ends shows.
fn shown_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|arg| {
            let plain = !arg.is_empty()
                && arg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c));
            if plain {
                arg.clone()
            } else {
                format!("'{}'", arg.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::shown_argv;

    #[test]
    fn an_argv_is_shown_so_each_element_is_plain() {
        let argv = [
            "restore-backup",
            "prod",
            "db/latest",
            "two words",
            "it's",
            "",
        ];
        let argv: Vec<String> = argv.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown_argv(&argv),
            r"restore-backup prod db/latest 'two words' 'it'\''s' ''"
        );
    }
}
