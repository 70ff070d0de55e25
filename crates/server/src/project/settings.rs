//! `.claude/settings.json` and `.claude/settings.local.json`: permission
//! rules (deny and ask always; allow only from a trusted project) and, from
//! a trusted project, hooks, run in the sandbox. Keys that would widen the
//! sandbox (`additionalDirectories`, `defaultMode`, `env`, …) are not
//! taken; the operator's log says so.

use agentd_policy::hooks::{HookConfig, HookEvent};
use agentd_policy::permissions::{PermissionMode, PermissionPolicy};
use serde::Deserialize;
use serde_json::Value;

use super::files::ProjectFiles;
use super::{Project, ProjectScope};

/// Read in this order; rules of both count.
pub const SETTINGS_FILES: [&str; 2] = [".claude/settings.json", ".claude/settings.local.json"];

#[derive(Debug, Default, Deserialize)]
struct Settings {
    #[serde(default)]
    permissions: Permissions,
    #[serde(default)]
    hooks: serde_json::Map<String, Value>,
    #[serde(flatten)]
    other: serde_json::Map<String, Value>,
}

#[derive(Debug, Default, Deserialize)]
struct Permissions {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    ask: Vec<String>,
    #[serde(flatten)]
    other: serde_json::Map<String, Value>,
}

/// One entry of a hook event's list: a matcher and its commands.
#[derive(Debug, Deserialize)]
struct MatcherHooks {
    #[serde(default)]
    matcher: Option<String>,
    #[serde(default)]
    hooks: Vec<CommandHook>,
}

#[derive(Debug, Deserialize)]
struct CommandHook {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    command: String,
    #[serde(default)]
    timeout: Option<u64>,
}

pub fn apply(files: &ProjectFiles, scope: &ProjectScope, project: &mut Project) {
    for name in SETTINGS_FILES {
        let Some((settings, _)) = files.read_json::<Settings>(name, &mut project.warnings) else {
            continue;
        };
        take(name, settings, scope, project);
    }
}

fn take(name: &str, settings: Settings, scope: &ProjectScope, project: &mut Project) {
    let trusted = scope.trusted;
    let warnings = &mut project.warnings;
    let valid = |rule: &String, warnings: &mut Vec<String>| {
        let checked = PermissionPolicy::new(
            PermissionMode::Default,
            &[],
            std::slice::from_ref(rule),
            &[],
        );
        if let Err(err) = &checked {
            warnings.push(format!("{name}: rule {rule:?} skipped: {err}"));
        }
        checked.is_ok()
    };
    let permissions = settings.permissions;
    for rule in permissions.deny {
        if valid(&rule, warnings) {
            project.deny.push(rule);
        }
    }
    for rule in permissions.ask {
        if valid(&rule, warnings) {
            project.ask.push(rule);
        }
    }
    if !permissions.allow.is_empty() && !trusted {
        warnings.push(format!(
            "{name}: allow rules not used: the profile does not trust the project (trust_project)"
        ));
    } else {
        for rule in permissions.allow {
            if valid(&rule, warnings) {
                project.allow.push(rule);
            }
        }
    }
    let ignored: Vec<&String> = permissions
        .other
        .keys()
        .chain(settings.other.keys())
        .collect();
    if !ignored.is_empty() {
        warnings.push(format!("{name}: not taken from a project: {ignored:?}"));
    }
    if settings.hooks.is_empty() {
        return;
    }
    if !trusted {
        warnings.push(format!(
            "{name}: hooks not run: the profile does not trust the project (trust_project)"
        ));
        return;
    }
    if !scope.sandboxed {
        warnings.push(format!(
            "{name}: hooks not run: a project's hooks run only in the sandbox, which this profile has off"
        ));
        return;
    }
    for (event, entries) in settings.hooks {
        match hooks_of(&event, entries) {
            Ok(mut hooks) => project.hooks.append(&mut hooks),
            Err(reason) => warnings.push(format!("{name}: hooks of {event:?} skipped: {reason}")),
        }
    }
}

/// The hooks listed for `event`, each to run in the sandbox.
fn hooks_of(event: &str, entries: Value) -> Result<Vec<HookConfig>, String> {
    let event: HookEvent = serde_json::from_value(Value::String(event.to_string()))
        .map_err(|_| "agentd has no such hook event".to_string())?;
    let entries: Vec<MatcherHooks> =
        serde_json::from_value(entries).map_err(|err| err.to_string())?;
    let mut hooks = Vec::new();
    for entry in entries {
        for hook in entry.hooks {
            if hook.kind != "command" || hook.command.trim().is_empty() {
                return Err(format!("a hook of type {:?} without a command", hook.kind));
            }
            hooks.push(HookConfig {
                event,
                matcher: entry.matcher.clone(),
                command: hook.command,
                timeout_s: hook
                    .timeout
                    .unwrap_or(agentd_policy::hooks::DEFAULT_TIMEOUT_S)
                    .clamp(1, 600),
                sandboxed: true,
                callback: None,
            });
        }
    }
    agentd_policy::hooks::Hooks::new(hooks.clone()).map_err(|err| err.to_string())?;
    Ok(hooks)
}
