//! How the rules decide a `Bash` call (deny, then allow, then ask rules, then
//! the mode, each over every simple command of it), and the rule that allows
//! one command for the rest of a session.

use super::rule::Rule;
use super::syms::{self, matches};
use super::{PermissionMode, PermissionPolicy, ToolCallView, Verdict, ask, bash, deny, input_str};

impl PermissionPolicy {
    pub(super) fn evaluate_bash(&self, call: &ToolCallView<'_>) -> Verdict {
        if let Some(r) = self.deny.iter().find(|r| r.whole_tool("Bash")) {
            return deny(format!("denied by rule {}", r.text));
        }
        let command = input_str(call.input, "command").unwrap_or_default();
        let deny_patterns: Vec<&Rule> = self
            .deny
            .iter()
            .filter(|r| r.bash_pattern().is_some())
            .collect();
        let whole_allow = self.allow.iter().find(|r| r.whole_tool("Bash"));
        let analysis = bash::analyze(command, false);
        let parts: Vec<&bash::Part> = match &analysis {
            Ok(parts) => parts.iter().filter(|p| p.needs_rule).collect(),
            Err(_) => Vec::new(),
        };
        // 1. deny rules
        let mut maybe = match bash_denials(&parts, &deny_patterns) {
            Ok(maybe) => maybe,
            Err(denied) => return denied,
        };
        if let Some(v) = self.read_only_mode_denial(call, whole_allow) {
            return v;
        }
        let hidden = match &analysis {
            Err(e) => Some(format!("could not parse the command ({e})")),
            Ok(_) => parts.iter().find_map(|p| {
                p.blocker
                    .as_ref()
                    .map(|why| format!("`{}`: {why}", p.display))
            }),
        };
        if let (Some(first), Some(why)) = (deny_patterns.first(), &hidden) {
            maybe.get_or_insert(format!(
                "{why}, so deny rules such as {} cannot be checked",
                first.text
            ));
        }
        if let Some(why) = maybe {
            return ask(why);
        }
        // 2. allow rules
        if whole_allow.is_some() {
            return Verdict::Allow;
        }
        let allowed = |p: &bash::Part| {
            p.blocker.is_none()
                && self.allow.iter().any(|r| {
                    r.bash_pattern()
                        .is_some_and(|alts| alts.iter().any(|a| matches(a, &p.allow_seq, false)))
                })
        };
        if hidden.is_none() && !parts.is_empty() && parts.iter().all(|p| allowed(p)) {
            return Verdict::Allow;
        }
        // 3. ask rules
        let asked = self.ask.iter().find(|r| {
            r.whole_tool("Bash")
                || r.bash_pattern().is_some_and(|alts| {
                    parts.iter().any(|p| {
                        alts.iter()
                            .any(|a| p.deny_seqs.iter().any(|s| matches(a, s, false)))
                    })
                })
        });
        if let Some(r) = asked {
            return ask(format!(
                "rule {} asks for approval of `{}`",
                r.text,
                command.trim()
            ));
        }
        // 4. the mode
        if self.mode == PermissionMode::Bypass || call.read_only {
            return Verdict::Allow;
        }
        let compound = if parts.len() > 1 {
            " (every command of a compound command must be allowed)"
        } else {
            ""
        };
        let reason = match (hidden, parts.iter().find(|p| !allowed(p))) {
            (Some(why), _) => format!("{why}; it needs approval"),
            (None, Some(p)) => format!("Bash({}) is not in the allow list{compound}", p.display),
            (None, None) => format!("Bash({}) is not in the allow list", command.trim()),
        };
        ask(reason)
    }
}

/// The deny rules against each part of a command: a sure match denies
/// (`Err`); the first match possible once expanded is a reason to ask.
fn bash_denials(parts: &[&bash::Part], rules: &[&Rule]) -> Result<Option<String>, Verdict> {
    let mut maybe: Option<String> = None;
    for part in parts {
        for r in rules {
            let alts = r.bash_pattern().unwrap_or_default();
            let hit = |possible| {
                alts.iter()
                    .any(|a| part.deny_seqs.iter().any(|s| matches(a, s, possible)))
            };
            if hit(false) {
                return Err(deny(format!(
                    "denied by rule {}: `{}`",
                    r.text, part.display
                )));
            }
            if maybe.is_none() && hit(true) {
                maybe = Some(format!(
                    "`{}` may match deny rule {} once expanded",
                    part.display, r.text
                ));
            }
        }
    }
    Ok(maybe)
}

/// `Bash(<each command, exactly>)`, joined with `;` for compound commands.
pub(super) fn bash_session_rule(command: &str) -> String {
    let mut rendered: Vec<String> = Vec::new();
    if let Ok(parts) = bash::analyze(command, false) {
        for p in parts
            .iter()
            .filter(|p| p.top && p.needs_rule && p.blocker.is_none())
        {
            let text = syms::render(&p.allow_seq);
            if !rendered.contains(&text) {
                rendered.push(text);
            }
        }
    }
    if rendered.is_empty() {
        format!("Bash({})", command.trim())
    } else {
        format!("Bash({})", rendered.join("; "))
    }
}
