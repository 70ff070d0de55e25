//! INTERFACE (to be implemented).
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::Tool;

/// The tools available to a session, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolRegistry {
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Self {
        Self { tools: tools.into_iter().map(|t| (t.name().to_string(), t)).collect() }
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.values()
    }
}

/// Bash, Read, Write, Edit, MultiEdit, Glob, Grep, LS.
pub fn builtin_tools() -> ToolRegistry {
    ToolRegistry::new(Vec::new())
}
