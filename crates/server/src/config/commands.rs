//! `[[commands]]`: the operator's verbs as tools (see `agentd_tools::command`),
//! and which of them a profile's sessions get: those its `commands = [...]`
//! names; when it names none, every sandbox command (none of them with
//! `sandbox = "off"`). A host command (`runs_on = "host"`) only ever goes
//! to a profile that names it.

use std::collections::BTreeSet;
use std::sync::Arc;

use agentd_policy::permissions::PermissionPolicy;
use agentd_tools::command::{CommandSpec, RunsOn};

use super::{Config, ProfileConfig, SandboxMode};

/// Names the model already knows as other tools; a command may not take one.
const RESERVED: &[&str] = &["Task", "TodoWrite", "AskUserQuestion", "Skill"];

/// Every command compiles, names are unique and taken by no other tool,
/// and every profile names only commands that exist.
pub(super) fn check(config: &Config) -> Result<(), String> {
    let builtin = agentd_tools::builtin_tools();
    let mut seen = BTreeSet::new();
    let mut compiled = std::collections::BTreeMap::new();
    let taken: BTreeSet<String> = builtin
        .iter()
        .map(|tool| tool.name().to_string())
        .chain(RESERVED.iter().map(|name| name.to_string()))
        .map(|name| name.to_ascii_lowercase())
        .collect();
    let euid = rustix::process::geteuid().as_raw();
    for command in &config.commands {
        let spec = command.compile()?;
        let name = command.name.as_str();
        for (key, value) in &command.env {
            crate::tool_identity::check_template(value.value())
                .map_err(|err| format!("command {name:?}: env {key:?}: {err}"))?;
        }
        // Case-insensitively: `bash` next to `Bash` misleads the model.
        if taken.contains(&name.to_ascii_lowercase()) {
            return Err(format!(
                "command {name:?}: the name is a built-in tool's; choose another"
            ));
        }
        if !seen.insert(name.to_ascii_lowercase()) {
            return Err(format!("command {name:?} is defined twice"));
        }
        if let RunsOn::Host { uid, .. } = spec.runs_on
            && uid == euid
        {
            return Err(format!(
                "command {name:?}: runs_on = \"host\" as uid {uid}, agentd's own, could read agentd's data; \
                 use a user of its own"
            ));
        }
        compiled.insert(name.to_string(), spec);
    }
    for (profile_name, profile) in &config.profiles {
        for name in profile.commands.iter().flatten() {
            let Some(spec) = compiled.get(name) else {
                return Err(format!(
                    "profile {profile_name:?}: no [[commands]] named {name:?}"
                ));
            };
            if profile.sandbox == SandboxMode::Off && matches!(spec.runs_on, RunsOn::Sandbox) {
                return Err(format!(
                    "profile {profile_name:?}: command {name:?} runs in the sandbox, and the profile has \
                     sandbox = \"off\" (it would run unsandboxed, as agentd)"
                ));
            }
        }
    }
    Ok(())
}

impl Config {
    /// The commands `profile`'s sessions may run, checked.
    pub fn commands_for(&self, profile: &ProfileConfig) -> Result<Vec<Arc<CommandSpec>>, String> {
        let mut commands = Vec::new();
        for command in &self.commands {
            let named = profile
                .commands
                .as_ref()
                .is_some_and(|names| names.contains(&command.name));
            if profile.commands.is_some() && !named {
                continue;
            }
            let spec = command.compile()?;
            let by_default = match spec.runs_on {
                RunsOn::Host { .. } => false,
                RunsOn::Sandbox => profile.sandbox == SandboxMode::On,
            };
            if named || by_default {
                commands.push(Arc::new(spec));
            }
        }
        Ok(commands)
    }
}

/// `policy` told which of `commands` are read-only and which always ask.
pub fn with_command_marks(
    policy: PermissionPolicy,
    commands: &[Arc<CommandSpec>],
) -> PermissionPolicy {
    let names = |keep: fn(&CommandSpec) -> bool| {
        commands
            .iter()
            .filter(move |c| keep(c))
            .map(|c| c.name.clone())
            .collect::<Vec<_>>()
    };
    policy.with_commands(names(|c| !c.mutating), names(|c| c.confirm))
}

#[cfg(test)]
mod tests {
    use super::*;

    const VM: &str = "[[commands]]\nname = \"vm\"\ndescription = \"Status or reset of VM 102\"\n\
        argv = [\"ssh\", \"pve\", \"qm\", \"{action}\", \"102\"]\n\
        parameters = { action = { type = \"string\", enum = [\"status\", \"reset\"] } }\n";

    #[test]
    fn profiles_get_the_commands_they_name_or_all() {
        let text =
            format!("{VM}[profiles.none]\ncommands = []\n[profiles.vm]\ncommands = [\"vm\"]\n");
        let config = Config::parse(&text).unwrap();
        let all = config
            .commands_for(&config.profile("default").unwrap())
            .unwrap();
        assert_eq!(all.len(), 1);
        assert!(all[0].mutating && !all[0].confirm);
        assert!(
            config
                .commands_for(&config.profile("none").unwrap())
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            config
                .commands_for(&config.profile("vm").unwrap())
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn host_commands_go_only_to_profiles_that_name_them() {
        let host = "[[commands]]\nname = \"h\"\ndescription = \"On the host\"\nargv = [\"true\"]\n\
            runs_on = \"host\"\nhost_uid = 4242\nhost_gid = 4242\n";
        let text = format!(
            "{VM}{host}[profiles.named]\ncommands = [\"h\"]\n[profiles.open]\nsandbox = \"off\"\n"
        );
        let config = Config::parse(&text).unwrap();
        let names = |profile: &str| -> Vec<String> {
            config
                .commands_for(&config.profile(profile).unwrap())
                .unwrap()
                .iter()
                .map(|c| c.name.clone())
                .collect()
        };
        assert_eq!(names("default"), ["vm"]);
        assert_eq!(names("named"), ["h"]);
        assert!(
            names("open").is_empty(),
            "sandbox = off gets no sandbox command"
        );
    }

    #[test]
    fn unknown_names_and_taken_names_are_refused() {
        let unknown =
            Config::parse(&format!("{VM}[profiles.p]\ncommands = [\"vn\"]\n")).unwrap_err();
        assert!(
            unknown.contains("no [[commands]] named \"vn\""),
            "{unknown}"
        );
        let twice = Config::parse(&format!("{VM}{VM}")).unwrap_err();
        assert!(twice.contains("defined twice"), "{twice}");
        for taken in ["Read", "read", "Task", "todowrite", "mcp__x__y"] {
            let err = Config::parse(&VM.replace("name = \"vm\"", &format!("name = \"{taken}\"")))
                .unwrap_err();
            assert!(err.contains(taken), "{err}");
        }
        let typo = Config::parse(&VM.replace("argv", "args")).unwrap_err();
        assert!(typo.contains("args"), "{typo}");
    }
}
