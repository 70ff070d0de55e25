//! `[[commands]]`: the operator's verbs as tools (see `agentd_tools::command`),
//! and which of them a profile's sessions get (`commands = [...]` in the
//! profile; all when absent, as with `mcp_servers`).

use std::collections::BTreeSet;
use std::sync::Arc;

use agentd_policy::permissions::PermissionPolicy;
use agentd_tools::command::CommandSpec;

use super::{Config, ProfileConfig};

/// Names the model already knows as other tools; a command may not take one.
const RESERVED: &[&str] = &["Task", "TodoWrite", "AskUserQuestion", "Skill"];

/// Every command compiles, names are unique and taken by no other tool,
/// and every profile names only commands that exist.
pub(super) fn check(config: &Config) -> Result<(), String> {
    let builtin = agentd_tools::builtin_tools();
    let mut seen = BTreeSet::new();
    for command in &config.commands {
        command.compile()?;
        let name = command.name.as_str();
        for (key, value) in &command.env {
            crate::tool_identity::check_template(value)
                .map_err(|err| format!("command {name:?}: env {key:?}: {err}"))?;
        }
        if builtin.get(name).is_some() || RESERVED.contains(&name) {
            return Err(format!(
                "command {name:?}: the name is a built-in tool's; choose another"
            ));
        }
        if !seen.insert(name) {
            return Err(format!("command {name:?} is defined twice"));
        }
    }
    for (profile_name, profile) in &config.profiles {
        for name in profile.commands.iter().flatten() {
            if !seen.contains(name.as_str()) {
                return Err(format!(
                    "profile {profile_name:?}: no [[commands]] named {name:?}"
                ));
            }
        }
    }
    Ok(())
}

impl Config {
    /// The commands `profile`'s sessions may run, checked.
    pub fn commands_for(&self, profile: &ProfileConfig) -> Result<Vec<Arc<CommandSpec>>, String> {
        self.commands
            .iter()
            .filter(|command| {
                profile
                    .commands
                    .as_ref()
                    .is_none_or(|names| names.contains(&command.name))
            })
            .map(|command| command.compile().map(Arc::new))
            .collect()
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
    fn unknown_names_and_taken_names_are_refused() {
        let unknown =
            Config::parse(&format!("{VM}[profiles.p]\ncommands = [\"vn\"]\n")).unwrap_err();
        assert!(
            unknown.contains("no [[commands]] named \"vn\""),
            "{unknown}"
        );
        let twice = Config::parse(&format!("{VM}{VM}")).unwrap_err();
        assert!(twice.contains("defined twice"), "{twice}");
        for taken in ["Read", "Task", "mcp__x__y"] {
            let err = Config::parse(&VM.replace("name = \"vm\"", &format!("name = \"{taken}\"")))
                .unwrap_err();
            assert!(err.contains(taken), "{err}");
        }
        let typo = Config::parse(&VM.replace("argv", "args")).unwrap_err();
        assert!(typo.contains("args"), "{typo}");
    }
}
