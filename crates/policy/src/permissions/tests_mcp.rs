//! MCP tools in `read_only` mode: one the operator marked read-only runs
//! (and is offered) when an allow rule names it; any other stays refused.

use std::path::Path;

use serde_json::json;

use super::tests::{E, kind, policy};
use super::*;

fn mcp_call(p: &PermissionPolicy, tool: &str, read_only: bool) -> Verdict {
    p.evaluate(&ToolCallView {
        tool,
        input: &json!({"query": "x"}),
        read_only,
        workspace: Path::new(super::tests::WS),
    })
}

#[test]
fn read_only_mode_runs_a_read_only_mcp_tool_an_allow_rule_names() {
    use PermissionMode::ReadOnly;
    let allowed = policy(ReadOnly, &["mcp__github__*"], &[], &[]);
    let search = "mcp__github__search";
    assert_eq!(kind(&mcp_call(&allowed, search, true)), E::Allow);
    assert!(allowed.offers(search, true));

    // Mutating: refused and not offered, whatever the rules say.
    let create = "mcp__github__create_issue";
    let Verdict::Deny { reason } = mcp_call(&allowed, create, false) else {
        panic!("a mutating MCP tool ran in read_only mode");
    };
    assert!(reason.contains("marked read-only"), "{reason}");
    assert!(!allowed.offers(create, false));

    // Read-only but named by no allow rule: refused, not offered.
    let bare = policy(ReadOnly, &["Read"], &[], &[]);
    let Verdict::Deny { reason } = mcp_call(&bare, search, true) else {
        panic!("no allow rule named it");
    };
    assert!(reason.contains("allow rule names it"), "{reason}");
    assert!(!bare.offers(search, true));
    // A rule for one tool names that tool only; a deny rule still wins.
    let one = policy(ReadOnly, &["mcp__github__search"], &[], &[]);
    assert!(one.offers(search, true) && !one.offers("mcp__github__list", true));
    let denied = policy(ReadOnly, &["mcp__github"], &["mcp__github__search"], &[]);
    assert_eq!(kind(&mcp_call(&denied, search, true)), E::Deny);
    assert!(!denied.offers(search, true));
    // The read-only flag of a built-in tool outside the mode's list changes nothing.
    assert!(!allowed.offers("NotebookEdit", true));
}
