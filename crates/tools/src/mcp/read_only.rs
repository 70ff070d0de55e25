//! Which tools of an MCP server are read-only: the operator's word
//! (`read_only_tools` patterns), and the server's `readOnlyHint` only when
//! the operator trusts it (`trust_annotations`). The MCP spec calls
//! annotations untrusted hints: by default a server cannot exempt its own
//! tools from asking.
use globset::{Glob, GlobSet, GlobSetBuilder};
use rmcp::model::Tool as ToolDef;

#[derive(Debug, Clone, Default)]
pub struct ReadOnlyTools {
    /// Patterns of tool names as the server knows them (`search`, `get_*`).
    patterns: Vec<String>,
    matcher: GlobSet,
    trust_annotations: bool,
}

impl PartialEq for ReadOnlyTools {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns && self.trust_annotations == other.trust_annotations
    }
}

impl Eq for ReadOnlyTools {}

impl ReadOnlyTools {
    /// Errors name the pattern that is not a glob.
    pub fn new(patterns: &[String], trust_annotations: bool) -> Result<Self, String> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            let glob = Glob::new(pattern)
                .map_err(|err| format!("read_only_tools pattern {pattern:?}: {err}"))?;
            builder.add(glob);
        }
        let matcher = builder
            .build()
            .map_err(|err| format!("read_only_tools: {err}"))?;
        Ok(Self {
            patterns: patterns.to_vec(),
            matcher,
            trust_annotations,
        })
    }

    /// Whether `tool` of this server is read-only.
    pub(crate) fn covers(&self, tool: &ToolDef) -> bool {
        let hinted = || {
            tool.annotations
                .as_ref()
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false)
        };
        self.matcher.is_match(tool.name.as_ref()) || (self.trust_annotations && hinted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ToolAnnotations;

    fn tool(name: &'static str, hint: Option<bool>) -> ToolDef {
        let mut def = ToolDef::default();
        def.name = name.into();
        def.annotations = hint.map(|hint| {
            let mut annotations = ToolAnnotations::default();
            annotations.read_only_hint = Some(hint);
            annotations
        });
        def
    }

    #[test]
    fn the_operators_patterns_and_trusted_hints_make_a_tool_read_only() {
        let listed = ReadOnlyTools::new(&["search".into(), "get_*".into()], false).unwrap();
        assert!(listed.covers(&tool("search", None)));
        assert!(listed.covers(&tool("get_issue", Some(false))));
        assert!(!listed.covers(&tool("create_issue", None)));
        assert!(
            !listed.covers(&tool("list_issues", Some(true))),
            "a hint alone is not trusted"
        );
        let trusting = ReadOnlyTools::new(&[], true).unwrap();
        assert!(trusting.covers(&tool("list_issues", Some(true))));
        assert!(!trusting.covers(&tool("create_issue", Some(false))));
        assert!(!trusting.covers(&tool("create_issue", None)));
        let err = ReadOnlyTools::new(&["get_[".into()], false).unwrap_err();
        assert!(err.contains("get_["), "{err}");
    }
}
