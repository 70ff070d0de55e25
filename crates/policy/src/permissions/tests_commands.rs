//! The operator's command tools: `mutating = false` ones read-only,
//! `confirm = true` ones asked in every mode that asks, denied in the others.

use std::path::Path;

use serde_json::json;

use super::tests::{E, kind, policy};
use super::*;

fn call(p: &PermissionPolicy, tool: &str, read_only: bool) -> E {
    kind(&p.evaluate(&ToolCallView {
        tool,
        input: &json!({"vm": 102}),
        read_only,
        workspace: Path::new(super::tests::WS),
    }))
}

fn with_commands(mode: PermissionMode, allow: &[&str]) -> PermissionPolicy {
    policy(mode, allow, &[], &[]).with_commands(["vm_status".to_string()], ["vm_reset".to_string()])
}

#[test]
fn confirm_asks_even_in_bypass_and_past_allow_rules() {
    for mode in [
        PermissionMode::Default,
        PermissionMode::AcceptEdits,
        PermissionMode::Bypass,
    ] {
        assert_eq!(
            call(&with_commands(mode, &["vm_reset"]), "vm_reset", false),
            E::Ask,
            "{mode:?}"
        );
    }
    assert_eq!(
        call(
            &with_commands(PermissionMode::DontAsk, &["vm_reset"]),
            "vm_reset",
            false
        ),
        E::Deny
    );
    assert_eq!(
        call(
            &with_commands(PermissionMode::ReadOnly, &["vm_reset"]),
            "vm_reset",
            false
        ),
        E::Deny
    );
    let asked = with_commands(PermissionMode::Bypass, &[]);
    assert!(asked.must_confirm("vm_reset") && !asked.must_confirm("vm_status"));
}

#[test]
fn mutating_commands_ask_and_read_only_ones_run() {
    let default = with_commands(PermissionMode::Default, &[]);
    assert_eq!(call(&default, "vm_start", false), E::Ask);
    assert_eq!(call(&default, "vm_status", true), E::Allow);
    // read_only mode: a read-only command only when an allow rule names it.
    assert_eq!(
        call(
            &with_commands(PermissionMode::ReadOnly, &[]),
            "vm_status",
            true
        ),
        E::Deny
    );
    let named = with_commands(PermissionMode::ReadOnly, &["vm_status"]);
    assert_eq!(call(&named, "vm_status", true), E::Allow);
    assert!(named.offers("vm_status", true) && !named.offers("vm_start", false));
}
