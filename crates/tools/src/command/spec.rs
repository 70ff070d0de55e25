//! A checked command: what [`super::CommandToml`] compiles to.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

/// A parameter's JSON type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    String,
    Integer,
    Number,
    Boolean,
}

impl ParamType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
        }
    }
}

/// One argument a command takes.
#[derive(Debug, Clone)]
pub struct Param {
    pub kind: ParamType,
    pub description: Option<String>,
    /// The allowed values as the operator wrote them (JSON), and as they
    /// appear in the argv.
    pub choices: Vec<(Value, String)>,
    /// As written; matched anchored (`^(?:…)$`).
    pub pattern: Option<String>,
    pub(crate) regex: Option<regex::Regex>,
    pub min_length: usize,
    pub max_length: usize,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub allow_leading_dash: bool,
    pub allow_shell_characters: bool,
    /// The pattern names non-ASCII characters itself (a literal one or a
    /// `\p{…}` class): only then may a value that is not in `choices` be
    /// non-ASCII.
    pub(crate) unicode: bool,
}

/// An argv element: fixed text, or a parameter's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgvPart {
    Literal(String),
    Param(String),
}

/// Where a command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunsOn {
    /// In the session's sandbox, as the session's agent user (like `Bash`).
    Sandbox,
    /// On the host, unsandboxed, as this unprivileged user (never uid or
    /// gid 0), in `home`.
    Host {
        user: Option<String>,
        uid: u32,
        gid: u32,
        home: PathBuf,
    },
}

/// A command, checked: every placeholder is a declared parameter, every
/// parameter is used, every free string is constrained.
#[derive(Clone)]
pub struct CommandSpec {
    pub name: String,
    pub description: String,
    pub argv: Vec<ArgvPart>,
    pub params: BTreeMap<String, Param>,
    pub mutating: bool,
    pub confirm: bool,
    pub timeout: Duration,
    /// Variables on top of the sandbox's (or, on the host, the minimal) ones.
    /// Values as written: the server fills in identity placeholders at
    /// each run (see [`super::EnvFiller`]).
    pub env: BTreeMap<String, String>,
    /// Those of `env` marked `secret = true`.
    pub secret_env: std::collections::BTreeSet<String>,
    /// The `aud` of the `{user_token}` its `env` gets; `None`: the server's
    /// default for commands.
    pub audience: Option<String>,
    pub runs_on: RunsOn,
}

/// The names of `env`, not its values (secrets among them).
impl std::fmt::Debug for CommandSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandSpec")
            .field("name", &self.name)
            .field("argv", &self.argv)
            .field("params", &self.params)
            .field("mutating", &self.mutating)
            .field("confirm", &self.confirm)
            .field("timeout", &self.timeout)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("audience", &self.audience)
            .field("runs_on", &self.runs_on)
            .finish_non_exhaustive()
    }
}

impl CommandSpec {
    /// The JSON Schema of the tool's input: every parameter required, no others.
    pub fn input_schema(&self) -> Value {
        let properties: Map<String, Value> = self
            .params
            .iter()
            .map(|(name, param)| (name.clone(), param.schema()))
            .collect();
        let required: Vec<&String> = self.params.keys().collect();
        json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false
        })
    }

    /// The argv as configured, placeholders as `{name}` (for people).
    pub fn argv_template(&self) -> Vec<String> {
        self.argv
            .iter()
            .map(|part| match part {
                ArgvPart::Literal(text) => text.clone(),
                ArgvPart::Param(name) => format!("{{{name}}}"),
            })
            .collect()
    }

    /// What the model reads: the operator's description, what runs, and
    /// the rules its arguments meet.
    pub fn tool_description(&self) -> String {
        format!(
            "{}\n\nRuns exactly `{}` (no shell; each {{placeholder}} is replaced by one argument, whole). \
Arguments outside the schema, starting with `-`, or with spaces, shell characters, control \
characters or non-ASCII letters are refused and nothing runs.",
            self.description.trim_end(),
            self.argv_template().join(" ")
        )
    }
}

impl Param {
    fn schema(&self) -> Value {
        let mut schema = Map::new();
        schema.insert("type".into(), json!(self.kind.as_str()));
        if let Some(description) = &self.description {
            schema.insert("description".into(), json!(description));
        }
        if !self.choices.is_empty() {
            let values: Vec<&Value> = self.choices.iter().map(|(value, _)| value).collect();
            schema.insert("enum".into(), json!(values));
        }
        if let Some(pattern) = &self.pattern {
            schema.insert("pattern".into(), json!(format!("^(?:{pattern})$")));
        }
        if self.kind == ParamType::String {
            schema.insert("minLength".into(), json!(self.min_length));
            schema.insert("maxLength".into(), json!(self.max_length));
        }
        for (key, bound) in [("minimum", self.minimum), ("maximum", self.maximum)] {
            if let Some(bound) = bound {
                let value = match self.kind {
                    ParamType::Integer => json!(bound as i64),
                    _ => json!(bound),
                };
                schema.insert(key.into(), value);
            }
        }
        Value::Object(schema)
    }
}
