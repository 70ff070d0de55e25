//! `[[commands]]` as written in the config, and its strict check: every
//! mistake is an error at startup that names the command and the key.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::args::{is_format_character, render};
use super::spec::{ArgvPart, CommandSpec, Param, ParamType, RunsOn};

/// The longest value a string parameter may allow.
const MAX_LENGTH_CEILING: usize = 4096;
/// A string parameter's `maxLength` when unset.
const DEFAULT_MAX_LENGTH: usize = 256;
const MAX_TIMEOUT_S: u64 = 3600;

/// One `[[commands]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandToml {
    pub name: String,
    pub description: String,
    pub argv: Vec<String>,
    #[serde(default)]
    pub parameters: BTreeMap<String, ParamToml>,
    /// Changes something: asks like a writing tool. True unless said otherwise.
    #[serde(default = "yes")]
    pub mutating: bool,
    /// Always asks a human, even in `bypass` mode.
    #[serde(default)]
    pub confirm: bool,
    #[serde(default = "default_timeout_s")]
    pub timeout_s: u64,
    /// Variables: a string, or `{ value = "…", secret = true }` for one
    /// masked in output and kept off bubblewrap's command line.
    #[serde(default)]
    pub env: BTreeMap<String, CommandEnvValue>,
    /// The `aud` of a `{user_token}` in `env` (default
    /// `agentd-command:<name>`).
    pub audience: Option<String>,
    /// `"sandbox"` (default) or `"host"`.
    #[serde(default)]
    pub runs_on: RunsOnToml,
    /// `runs_on = "host"`: the user it runs as (from /etc/passwd)…
    pub host_user: Option<String>,
    /// …or its uid and gid.
    pub host_uid: Option<u32>,
    pub host_gid: Option<u32>,
}

/// One value of a command's `env`, as in a profile's `env`.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(
    untagged,
    expecting = "a string, or a table like { value = \"…\", secret = true }"
)]
pub enum CommandEnvValue {
    Plain(String),
    Marked {
        value: String,
        #[serde(default)]
        secret: bool,
    },
}

impl CommandEnvValue {
    pub fn value(&self) -> &str {
        match self {
            CommandEnvValue::Plain(value) | CommandEnvValue::Marked { value, .. } => value,
        }
    }

    pub fn is_secret(&self) -> bool {
        matches!(self, CommandEnvValue::Marked { secret: true, .. })
    }
}

/// Secret values never printed.
impl std::fmt::Debug for CommandEnvValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.is_secret() {
            true => f.write_str("[secret]"),
            false => write!(f, "{:?}", self.value()),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunsOnToml {
    #[default]
    Sandbox,
    Host,
}

/// One parameter, in JSON Schema's words.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamToml {
    #[serde(rename = "type")]
    pub kind: ParamType,
    pub description: Option<String>,
    #[serde(rename = "enum")]
    pub choices: Option<Vec<Value>>,
    pub pattern: Option<String>,
    #[serde(rename = "minLength", alias = "min_length")]
    pub min_length: Option<usize>,
    #[serde(rename = "maxLength", alias = "max_length")]
    pub max_length: Option<usize>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    #[serde(default)]
    pub allow_leading_dash: bool,
    /// Let whitespace and shell characters (`;`, `$`, `|`, quotes, …)
    /// through; off because `ssh host cmd {x}` hands `x` to a shell.
    #[serde(default)]
    pub allow_shell_characters: bool,
}

fn yes() -> bool {
    true
}
fn default_timeout_s() -> u64 {
    60
}

/// A name a tool, a parameter or a variable may have.
fn is_name(text: &str, max: usize, extra: &[char]) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && text.len() <= max
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || extra.contains(&c))
}

impl CommandToml {
    /// Checks everything and resolves `host_user`; errors name the command.
    pub fn compile(&self) -> Result<CommandSpec, String> {
        self.compile_with_passwd(Path::new("/etc/passwd"))
    }

    pub(crate) fn compile_with_passwd(&self, passwd: &Path) -> Result<CommandSpec, String> {
        let at = format!("command {:?}", self.name);
        if !is_name(&self.name, 64, &['-']) || self.name.starts_with("mcp__") {
            return Err(format!(
                "{at}: the name must be 1-64 ASCII letters, digits, '_' or '-', start with a letter, and not start with mcp__"
            ));
        }
        if self.description.trim().is_empty() {
            return Err(format!("{at}: needs a description"));
        }
        let mut params = BTreeMap::new();
        for (name, param) in &self.parameters {
            if !is_name(name, 64, &[]) {
                return Err(format!(
                    "{at}: parameter {name:?} must be ASCII letters, digits and '_'"
                ));
            }
            let compiled = param
                .compile()
                .map_err(|err| format!("{at}, parameter {name:?}: {err}"))?;
            params.insert(name.clone(), compiled);
        }
        let argv = self.compile_argv(&at, &params)?;
        if !(1..=MAX_TIMEOUT_S).contains(&self.timeout_s) {
            return Err(format!("{at}: timeout_s must be 1-{MAX_TIMEOUT_S} seconds"));
        }
        for (key, value) in &self.env {
            if !is_name(key, 128, &[]) {
                return Err(format!("{at}: env name {key:?} is not a variable name"));
            }
            if value.value().contains('\0') {
                return Err(format!("{at}: env {key} holds a NUL byte"));
            }
        }
        if let Some(audience) = &self.audience
            && (audience.trim().is_empty() || audience.chars().any(char::is_control))
        {
            return Err(format!(
                "{at}: audience must be non-empty text without control characters"
            ));
        }
        Ok(CommandSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            argv,
            params,
            mutating: self.mutating,
            confirm: self.confirm,
            timeout: Duration::from_secs(self.timeout_s),
            env: self
                .env
                .iter()
                .map(|(key, value)| (key.clone(), value.value().to_string()))
                .collect(),
            secret_env: self
                .env
                .iter()
                .filter(|(_, value)| value.is_secret())
                .map(|(key, _)| key.clone())
                .collect(),
            audience: self.audience.clone(),
            runs_on: self.runs_on(&at, passwd)?,
        })
    }

    fn compile_argv(
        &self,
        at: &str,
        params: &BTreeMap<String, Param>,
    ) -> Result<Vec<ArgvPart>, String> {
        let Some(first) = self.argv.first() else {
            return Err(format!("{at}: argv is empty"));
        };
        if first.is_empty() || first.contains(['{', '}']) {
            return Err(format!(
                "{at}: argv[0] must be a fixed program name, not {first:?}"
            ));
        }
        let mut used = BTreeSet::new();
        let mut argv = Vec::with_capacity(self.argv.len());
        for element in &self.argv {
            if element.chars().any(char::is_control) {
                return Err(format!(
                    "{at}: argv element {element:?} holds a control character"
                ));
            }
            let placeholder = element
                .strip_prefix('{')
                .and_then(|rest| rest.strip_suffix('}'))
                .filter(|inner| !inner.contains(['{', '}']));
            match placeholder {
                Some(name) if params.contains_key(name) => {
                    used.insert(name.to_string());
                    argv.push(ArgvPart::Param(name.to_string()));
                }
                Some(name) => {
                    return Err(format!(
                        "{at}: argv placeholder {{{name}}} is not a declared parameter (declared: {})",
                        list(params.keys())
                    ));
                }
                None if element.contains(['{', '}']) => {
                    return Err(format!(
                        "{at}: argv element {element:?}: a placeholder must be a whole element, like \"{{name}}\""
                    ));
                }
                None => argv.push(ArgvPart::Literal(element.clone())),
            }
        }
        if let Some(unused) = params.keys().find(|name| !used.contains(*name)) {
            return Err(format!("{at}: parameter {unused:?} is not used in argv"));
        }
        Ok(argv)
    }

    fn runs_on(&self, at: &str, passwd: &Path) -> Result<RunsOn, String> {
        let host_keys =
            self.host_user.is_some() || self.host_uid.is_some() || self.host_gid.is_some();
        if self.runs_on == RunsOnToml::Sandbox {
            if host_keys {
                return Err(format!(
                    "{at}: host_user/host_uid/host_gid need runs_on = \"host\""
                ));
            }
            return Ok(RunsOn::Sandbox);
        }
        let (user, uid, gid, home) = match (&self.host_user, self.host_uid, self.host_gid) {
            (Some(user), None, None) => {
                let entry = passwd_entry(passwd, |name, _| name == user).ok_or_else(|| {
                    format!("{at}: host_user {user:?} is not in {}", passwd.display())
                })?;
                (Some(user.clone()), entry.0, entry.1, entry.2)
            }
            (None, Some(uid), Some(gid)) => {
                let home = passwd_entry(passwd, |_, id| id == uid)
                    .map(|entry| entry.2)
                    .unwrap_or_else(|| PathBuf::from("/"));
                (None, uid, gid, home)
            }
            _ => {
                return Err(format!(
                    "{at}: runs_on = \"host\" needs host_user, or host_uid and host_gid (and not both)"
                ));
            }
        };
        if uid == 0 || gid == 0 {
            return Err(format!(
                "{at}: refusing to run on the host as uid {uid} / gid {gid}: use an unprivileged user"
            ));
        }
        Ok(RunsOn::Host {
            user,
            uid,
            gid,
            home,
        })
    }
}

/// (uid, gid, home) of the first /etc/passwd line `matches` (name, uid).
fn passwd_entry(passwd: &Path, matches: impl Fn(&str, u32) -> bool) -> Option<(u32, u32, PathBuf)> {
    let text = std::fs::read_to_string(passwd).ok()?;
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let [name, _, uid, gid, _, home, ..] = fields[..] else {
            return None;
        };
        let uid = uid.parse().ok()?;
        matches(name, uid).then(|| Some((uid, gid.parse().ok()?, PathBuf::from(home))))?
    })
}

fn list<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<&str> = names.map(String::as_str).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

impl ParamToml {
    fn compile(&self) -> Result<Param, String> {
        let is_string = self.kind == ParamType::String;
        let numeric = matches!(self.kind, ParamType::Integer | ParamType::Number);
        if !is_string
            && (self.pattern.is_some() || self.min_length.is_some() || self.max_length.is_some())
        {
            return Err("pattern, minLength and maxLength are for strings".into());
        }
        if !numeric && (self.minimum.is_some() || self.maximum.is_some()) {
            return Err("minimum and maximum are for integers and numbers".into());
        }
        if is_string && self.choices.is_none() && self.pattern.is_none() {
            return Err(
                "a string parameter needs an `enum` or a `pattern` (free text is refused by design)"
                    .into(),
            );
        }
        let (regex, unicode) = match &self.pattern {
            Some(pattern) => {
                // Alone first: `a)|(b` compiles only once wrapped, and then
                // means `^(?:a)|(b)$`, unanchored.
                regex::Regex::new(pattern)
                    .map_err(|err| format!("pattern does not compile: {err}"))?;
                let regex = regex::Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|err| format!("pattern does not compile: {err}"))?;
                let unicode =
                    !pattern.is_ascii() || pattern.contains("\\p") || pattern.contains("\\P");
                (Some(regex), unicode)
            }
            None => (None, false),
        };
        let max_length = self.max_length.unwrap_or(DEFAULT_MAX_LENGTH);
        let min_length = self.min_length.unwrap_or(1);
        if min_length == 0 || max_length > MAX_LENGTH_CEILING || min_length > max_length {
            return Err(format!(
                "minLength must be 1 or more (empty values are always refused) and at most maxLength, \
                 and maxLength at most {MAX_LENGTH_CEILING}"
            ));
        }
        if let (Some(min), Some(max)) = (self.minimum, self.maximum)
            && min > max
        {
            return Err("minimum is above maximum".into());
        }
        if self.kind == ParamType::Integer
            && [self.minimum, self.maximum]
                .iter()
                .flatten()
                .any(|b| b.fract() != 0.0)
        {
            return Err("an integer's minimum and maximum must be whole numbers".into());
        }
        let mut param = Param {
            kind: self.kind,
            description: self.description.clone(),
            choices: Vec::new(),
            pattern: self.pattern.clone(),
            regex,
            min_length,
            max_length,
            minimum: self.minimum,
            maximum: self.maximum,
            allow_leading_dash: self.allow_leading_dash,
            allow_shell_characters: self.allow_shell_characters,
            unicode,
        };
        let choices = self.choices.as_deref().unwrap_or_default();
        if self.choices.is_some() && choices.is_empty() {
            return Err("enum is empty".into());
        }
        for choice in choices {
            let text =
                render(&param, choice).map_err(|err| format!("enum value {choice}: {err}"))?;
            if text.is_empty()
                || text.chars().any(char::is_control)
                || text.chars().any(is_format_character)
                || text == "--"
            {
                return Err(format!("enum value {choice} cannot be an argument"));
            }
            param.choices.push((choice.clone(), text));
        }
        Ok(param)
    }
}
