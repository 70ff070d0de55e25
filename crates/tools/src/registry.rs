//! The set of tools a session can call.
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::Tool;
use crate::background::{BashOutputTool, KillShellTool};
use crate::bash::BashTool;
use crate::edit::EditTool;
use crate::glob::GlobTool;
use crate::grep::GrepTool;
use crate::ls::LsTool;
use crate::multi_edit::MultiEditTool;
use crate::read::ReadTool;
use crate::web_fetch::WebFetchTool;
use crate::write::WriteTool;

/// The tools available to a session, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolRegistry {
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Self {
        Self {
            tools: tools
                .into_iter()
                .map(|t| (t.name().to_string(), t))
                .collect(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.values()
    }

    /// The tools named in `names` (names not present are ignored).
    pub fn only(&self, names: &[String]) -> Self {
        let tools = self
            .tools
            .iter()
            .filter(|(name, _)| names.contains(name))
            .map(|(name, tool)| (name.clone(), tool.clone()))
            .collect();
        Self { tools }
    }

    /// Adds `tools`, replacing any with the same name.
    pub fn extend(&mut self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) {
        for tool in tools {
            self.tools.insert(tool.name().to_string(), tool);
        }
    }
}

/// Bash, BashOutput, KillShell, Read, Write, Edit, MultiEdit, Glob, Grep, LS, WebFetch.
pub fn builtin_tools() -> ToolRegistry {
    ToolRegistry::new(vec![
        Arc::new(BashTool),
        Arc::new(BashOutputTool),
        Arc::new(KillShellTool),
        Arc::new(ReadTool),
        Arc::new(WriteTool),
        Arc::new(EditTool),
        Arc::new(MultiEditTool),
        Arc::new(GlobTool),
        Arc::new(GrepTool),
        Arc::new(LsTool),
        Arc::new(WebFetchTool),
    ])
}
