//! The tools an agent offers the model, built once per agent, and their
//! size for the context estimate.

use std::sync::Arc;

use agentd_model::ToolSpec;

use crate::agent::Agent;

impl Agent {
    /// The tools this agent offers, built on first use: every model call
    /// sends them unchanged.
    pub(crate) fn tool_specs(&self) -> Arc<Vec<ToolSpec>> {
        self.offered().specs.clone()
    }

    pub(crate) fn offered(&self) -> &OfferedTools {
        self.offered.get_or_init(|| {
            let plain = self.tools.iter().map(|tool| ToolSpec {
                name: tool.name().to_string(),
                description: tool.description().to_string(),
                input_schema: tool.input_schema(),
            });
            let own = self
                .agent_tools
                .iter()
                .filter(|tool| self.agent_tool(tool.name()).is_some())
                .map(|tool| tool.spec(self.subagents.as_deref()));
            let specs: Vec<ToolSpec> = plain.chain(own).collect();
            let chars = specs
                .iter()
                .map(|t| t.name.len() + t.description.len() + json_len(&t.input_schema))
                .sum();
            OfferedTools {
                specs: Arc::new(specs),
                chars,
            }
        })
    }
}

/// An agent's tool specs, and their size for the context estimate.
#[derive(Debug)]
pub(crate) struct OfferedTools {
    pub(crate) specs: Arc<Vec<ToolSpec>>,
    pub(crate) chars: usize,
}

/// The length of `value` as compact JSON, without building the text.
pub(crate) fn json_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}
