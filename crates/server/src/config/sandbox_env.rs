//! `env`, `env_from_host` and `ssh_agent` of a profile and of `[users.NAME]`:
//! variables added to the environment of every sandboxed command of a
//! session (Bash, stdio MCP servers), on top of the sandbox's own allowlist.
//!
//! A value is a string, or `{ value = "…", secret = true }` for one that
//! must never reach the model, an event or a log: tool output has it masked
//! as `[secret NAME]`. Values copied from the server's environment
//! (`env_from_host`) are secret. The user's settings win over the profile's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::Deserialize;

use super::{ProfileConfig, UserToml};
use crate::models::EnvLookup;

/// One variable's value in `env = { … }`.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(
    untagged,
    expecting = "a string, or a table like { value = \"…\", secret = true }"
)]
pub enum EnvValue {
    Plain(String),
    Marked(MarkedValue),
}

/// `{ value = "…", secret = true }`.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkedValue {
    pub value: String,
    #[serde(default)]
    pub secret: bool,
}

impl EnvValue {
    pub fn value(&self) -> &str {
        match self {
            EnvValue::Plain(value) | EnvValue::Marked(MarkedValue { value, .. }) => value,
        }
    }

    pub fn is_secret(&self) -> bool {
        matches!(self, EnvValue::Marked(MarkedValue { secret: true, .. }))
    }
}

impl std::fmt::Debug for EnvValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.is_secret() {
            true => f.write_str("[secret]"),
            false => write!(f, "{:?}", self.value()),
        }
    }
}

/// What a session's sandbox gets: its variables, which of them are secret,
/// and the host's SSH agent socket to bind.
#[derive(Debug, Default, PartialEq)]
pub struct SandboxEnv {
    /// Values are in the `Debug` output of [`EnvValue`]s only, masked there.
    pub env: BTreeMap<String, EnvValue>,
    pub ssh_agent: Option<PathBuf>,
}

impl SandboxEnv {
    /// The profile's settings, then the user's over them; host values read
    /// through `host`. Unset host variables are left out (with a warning
    /// that names them, never a value).
    pub fn resolve(profile: &ProfileConfig, user: Option<&UserToml>, host: EnvLookup<'_>) -> Self {
        let mut env = BTreeMap::new();
        let user_level = user.map(|u| (&u.env, &u.env_from_host));
        let levels = [Some((&profile.env, &profile.env_from_host)), user_level];
        for (own, from_host) in levels.into_iter().flatten() {
            env.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
            for name in from_host {
                match host(name) {
                    Some(value) => {
                        let marked = MarkedValue {
                            value,
                            secret: true,
                        };
                        env.insert(name.clone(), EnvValue::Marked(marked));
                    }
                    None => tracing::warn!(
                        name,
                        "env_from_host: the server's environment has no such variable"
                    ),
                }
            }
        }
        let wants_agent = user.and_then(|u| u.ssh_agent).or(profile.ssh_agent);
        let ssh_agent = match wants_agent.unwrap_or(false) {
            false => None,
            true => {
                let socket = host("SSH_AUTH_SOCK").map(PathBuf::from);
                if socket.is_none() {
                    tracing::warn!("ssh_agent = true, but the server has no SSH_AUTH_SOCK");
                }
                socket.filter(|path| path.is_absolute())
            }
        };
        Self { env, ssh_agent }
    }

    /// The variables, and the names of the secret ones, for a sandbox policy.
    pub fn split(&self) -> (BTreeMap<String, String>, BTreeSet<String>) {
        let values = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.value().to_string()))
            .collect();
        let secret = self
            .env
            .iter()
            .filter(|(_, v)| v.is_secret())
            .map(|(k, _)| k.clone())
            .collect();
        (values, secret)
    }
}

/// The settings of one profile or user are usable: names a shell could set,
/// values without NUL, and no host `SSH_AUTH_SOCK` (its path means nothing
/// inside the sandbox; `ssh_agent = true` binds the socket).
pub(super) fn check(
    where_: &str,
    env: &BTreeMap<String, EnvValue>,
    from_host: &[String],
) -> Result<(), String> {
    for name in env.keys().chain(from_host) {
        if !is_name(name) {
            return Err(format!(
                "{where_}: {name:?} is not a variable name (letters, digits and '_', not starting with a digit)"
            ));
        }
    }
    if let Some((name, _)) = env.iter().find(|(_, v)| v.value().contains('\0')) {
        return Err(format!("{where_}: env {name:?} contains a NUL character"));
    }
    if let Some(name) = from_host.iter().find(|name| env.contains_key(*name)) {
        return Err(format!(
            "{where_}: {name:?} is in both env and env_from_host; keep one"
        ));
    }
    if from_host.iter().any(|name| name == "SSH_AUTH_SOCK") {
        return Err(format!(
            "{where_}: env_from_host = [\"SSH_AUTH_SOCK\"] would pass a host path the sandbox \
             cannot see; set ssh_agent = true to bind the agent's socket instead"
        ));
    }
    Ok(())
}

fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
