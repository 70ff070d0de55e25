//! Permission rules and modes: decides whether a tool call is allowed, denied
//! or needs a human's approval. Pure logic: no I/O, no filesystem access (`PathGuard`
//! confines paths separately).
//!
//! # Rules
//! Claude Code's shapes: `Tool` (every call), `Tool(pattern)`, `mcp__server__*` /
//! `mcp__server` (every tool of an MCP server). `Tool(*)` is the same as `Tool`.
//!
//! * `Bash(pattern)`: the pattern is a command; `*` matches any run of characters
//!   (`Bash(npm run *)`, which also matches a bare `npm run`); `Bash(npm run:*)` is the
//!   legacy prefix form (`npm run` followed by nothing or more words); anything else must
//!   match the whole command after quote removal and whitespace normalisation. A pattern
//!   is read by the same shell parser, so quoting works as in the shell
//!   (`Bash(git commit -m "fix bug")`), `\*` is the shell's own glob star and `'*'` a
//!   literal asterisk. A pattern with several commands (`Bash(cd x && make)`) is the same
//!   as one rule per command. A pattern that does not parse is a [`RuleError`].
//! * `Bash` (every call) also covers `KillShell`; `Bash(pattern)` only `Bash` calls,
//!   which are matched the same with `run_in_background` or without. `BashOutput` is
//!   read-only.
//! * `Read(glob)` covers `Read`, `Glob`, `Grep`, `LS`; `Edit(glob)` covers `Edit`,
//!   `MultiEdit`, `Write`; `Glob(…)`, `Write(…)` etc. cover only that tool. See
//!   `PathPattern::compile` for the glob forms; paths are resolved lexically against the
//!   workspace (`./.env`, `a/../.env` and the absolute path are the same file).
//! * `WebFetch(domain:example.com)` matches that host and its subdomains; a URL that does
//!   not parse as `http(s)` never matches.
//!
//! # Precedence
//! deny > allow > ask rules > the mode's default. Modes: `default` allows read-only tools
//! (but `WebFetch`, which asks unless a rule allows its domain) and asks for the rest; `accept_edits` also allows `Write`/`Edit`/`MultiEdit`;
//! `read_only` allows `Read`, `Glob`, `Grep`, `LS`, `WebFetch` (and `Skill`, `TodoWrite`,
//! `AskUserQuestion`, `Task`, `BashOutput`, which change nothing themselves) and denies every other
//! tool even when an allow rule names it — but an MCP tool that is read-only (the
//! operator's word, see [`ToolCallView::read_only`]) and that an allow rule names; `bypass` allows everything no deny rule matches
//! — except that an explicit ask rule still asks (an operator who writes one means it).
//! The operator's command tools ([`PermissionPolicy::with_commands`]): `confirm` ones
//! always ask (bypass and allow rules included; denied where nothing asks), read-only
//! ones are judged like read-only MCP tools.
//!
//! # Shell commands
//! The command is parsed with `brush-parser` (a bash parser) and split into every simple
//! command it would run (see `bash.rs`). A call is allowed by rules only if every one of
//! them is allowed by some allow rule, and denied if any one matches a deny rule. Choices:
//! * Output redirections to a file (`>`, `>>`, `&>`, `>|`, `<>`, `>& file`; not to
//!   `/dev/null`, `/dev/stdout`, `/dev/stderr`, nor fd duplications like `2>&1`) are part
//!   of what a rule must match and a `*` never covers them: `Bash(echo *)` does not allow
//!   `echo hi > notes.txt`, `Bash(echo * > *)` or `Bash(echo hi > notes.txt)` does. Deny
//!   rules match with or without the redirections.
//! * `FOO=1 rm x` is matched as `rm x`. Setting a variable that changes what runs (`PATH`,
//!   `LD_*`, `BASH_ENV`, `ENV`, `IFS`, `GIT_*`, `PAGER`, … see `wrappers.rs`) before a
//!   command, alone, via `env`, `export`/`declare`, or as a `for` variable makes the call
//!   impossible to allow by rule: it is always asked (deny rules still apply).
//! * Words are compared after quote removal (`git "status"` is `git status`). An
//!   expansion (`$VAR`, `$(…)`, `~`, an unquoted glob or brace expansion) is only covered
//!   by a `*` of the pattern or by the same expansion written in the pattern. A deny rule
//!   that an expansion *might* match makes the call ask instead of being allowed.
//! * Constructs that can run code we cannot see — arithmetic on variables (`(( x ))`,
//!   `$((x))`, `${a[$i]}`), `${!x}`, `${x@P}`, `eval`/`sh -c` of an expansion, `env -S`,
//!   parse errors — are never allowed by rules (ask); with deny rules present they ask
//!   even in `bypass`. A parse failure asks in every mode except `bypass` without `Bash`
//!   deny rules.
//! * Transparent wrappers (`timeout`, `nice`, `nohup`, `stdbuf`, `time`, `env`, `exec`,
//!   `command`, `builtin`) are looked through: `timeout 5 rm x` needs a rule for `rm x`.
//!   `xargs`, `find -exec`, `sudo`/`doas` need a rule for themselves *and* for the command
//!   they run; `sh -c '…'` and `eval …` need one for themselves and for every command in
//!   the script. A rule trusts the options of a command it allows (`Bash(git *)` allows
//!   `git -c core.pager=…`).
//!   `trap '…'` and `watch …` count as scripts too. Other programs that run commands
//!   (`ssh`, `parallel`, `su -c`, …) are not looked into: a deny rule is not a security
//!   boundary, the sandbox is.
//! * `[[ … ]]` tests without arithmetic and plain assignments run nothing and need no rule
//!   of their own, but a command made only of such things is not "allowed by rules".
//! * Commands nesting deeper than 200 levels are not parsed (ask); the parser runs on its
//!   own thread with a large stack, so no command can overflow the caller's stack.
//! * `Read`/`Edit` rules do not look inside shell commands (`cat .env` is a `Bash` call).
//!
//! # Sessions
//! [`PermissionPolicy::session_rule_for`] gives `Bash(<the command, exactly>)`; for a
//! compound command one exact pattern per simple command (`Bash(git status; cargo test)`),
//! which allows those commands in any combination but nothing else. Unquoted globs in the
//! command are rendered as `\*`, so "allow `rm *` for this session" does not allow
//! `rm -rf /`. A command that no rule can allow (it sets `PATH`, say) stays asked.

mod bash;
mod bash_rules;
mod parse;
mod redirs;
mod rule;
mod syms;
mod words;
mod wrappers;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_bash;
#[cfg(test)]
mod tests_commands;
#[cfg(test)]
mod tests_mcp;

use std::path::{Path, PathBuf};

pub use rule::RuleError;
use rule::{EDIT_TOOLS, Facts, Hit, PathFact, READ_TOOLS, Rule, resolve_path, url_host};

/// How calls that no rule decides are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionMode {
    /// Read-only tools allowed, everything else asks.
    #[default]
    Default,
    /// Also allows file edits (`Write`, `Edit`, `MultiEdit`).
    #[serde(alias = "acceptEdits")]
    AcceptEdits,
    /// Only `Read`, `Glob`, `Grep`, `LS` and `WebFetch`; everything else is denied.
    #[serde(alias = "plan")]
    ReadOnly,
    /// Everything is allowed unless a deny rule (or an explicit ask rule) matches.
    #[serde(alias = "bypassPermissions")]
    Bypass,
    /// As `default`, but what would ask is denied: only what the rules
    /// allow runs (Claude Code's `dontAsk`).
    #[serde(alias = "dontAsk")]
    DontAsk,
}

impl PermissionMode {
    pub fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "accept_edits",
            Self::ReadOnly => "read_only",
            Self::Bypass => "bypass",
            Self::DontAsk => "dont_ask",
        }
    }

    /// The mode as Claude Code spells it (what its SDKs and editors show).
    pub fn claude_name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "acceptEdits",
            Self::ReadOnly => "plan",
            Self::Bypass => "bypassPermissions",
            Self::DontAsk => "dontAsk",
        }
    }

    /// A mode by its name or its Claude Code spelling (`acceptEdits`,
    /// `plan`, `bypassPermissions`, `dontAsk`).
    pub fn parse(text: &str) -> Option<Self> {
        // The serde names and aliases are the one list of spellings.
        use serde::de::IntoDeserializer;
        let text: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
            text.into_deserializer();
        serde::Deserialize::deserialize(text).ok()
    }

    /// Whether this mode may let run what `other` would not: a client may
    /// pick a mode for a turn, never one looser than its profile's. The
    /// order is partial: `default` < `accept_edits` < `bypass`, and
    /// `read_only` and `dont_ask` are below `default` but not comparable
    /// with each other (`read_only` lets WebFetch go anywhere and may ask;
    /// `dont_ask` honours allow rules for writing tools), so each replaces
    /// only itself or the three above.
    pub fn is_looser_than(self, other: Self) -> bool {
        let rank = |mode: Self| match mode {
            Self::ReadOnly | Self::DontAsk => 0,
            Self::Default => 1,
            Self::AcceptEdits => 2,
            Self::Bypass => 3,
        };
        if self == other {
            return false;
        }
        match (self, other) {
            (Self::ReadOnly | Self::DontAsk, Self::ReadOnly | Self::DontAsk) => true,
            _ => rank(self) > rank(other),
        }
    }
}

/// The only tools the `read_only` mode lets through: those that read, and
/// those that change nothing themselves (a subagent's own calls are checked
/// one by one; a skill is only read).
const READ_ONLY_MODE_TOOLS: &[&str] = &[
    "Read",
    "Glob",
    "Grep",
    "LS",
    "WebFetch",
    "Skill",
    "TodoWrite",
    "AskUserQuestion",
    "Task",
    "BashOutput",
];

/// A tool call as the permission check sees it.
#[derive(Debug, Clone, Copy)]
pub struct ToolCallView<'a> {
    /// The tool name (`Bash`, `Read`, `mcp__github__create_issue`, …).
    pub tool: &'a str,
    /// The tool input as the model sent it (`{"command": …}`, `{"file_path": …}`, …).
    pub input: &'a serde_json::Value,
    /// The tool's own read-only flag.
    pub read_only: bool,
    /// The session workspace (relative paths in the input resolve against it).
    pub workspace: &'a Path,
}

/// The decision for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny { reason: String },
    Ask { reason: String },
}

/// A profile's mode and rules, parsed.
#[derive(Debug, Clone)]
pub struct PermissionPolicy {
    mode: PermissionMode,
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    ask: Vec<Rule>,
    home: Option<PathBuf>,
    /// Tools the operator declared (config `[[commands]]`): those with
    /// `mutating = false` count as read-only like a read-only MCP tool;
    /// those with `confirm = true` always ask, in every mode.
    commands: OperatorTools,
}

/// The operator's word on tools of their own (see [`PermissionPolicy::with_commands`]).
#[derive(Debug, Clone, Default)]
struct OperatorTools {
    read_only: std::collections::BTreeSet<String>,
    confirm: std::collections::BTreeSet<String>,
}

fn parse_all(rules: &[String], home: Option<&Path>) -> Result<Vec<Rule>, RuleError> {
    rules.iter().map(|r| Rule::parse(r, home)).collect()
}

fn ask(reason: impl Into<String>) -> Verdict {
    Verdict::Ask {
        reason: reason.into(),
    }
}

fn deny(reason: impl Into<String>) -> Verdict {
    Verdict::Deny {
        reason: reason.into(),
    }
}

impl PermissionPolicy {
    /// Parses the rules. `~/` in path rules and inputs is the `HOME` of this process.
    /// Errors name the bad rule and why.
    pub fn new(
        mode: PermissionMode,
        allow: &[String],
        deny: &[String],
        ask: &[String],
    ) -> Result<Self, RuleError> {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        Self::with_home(mode, allow, deny, ask, home)
    }

    /// Like [`PermissionPolicy::new`] with an explicit home directory for `~/`.
    pub fn with_home(
        mode: PermissionMode,
        allow: &[String],
        deny: &[String],
        ask: &[String],
        home: Option<PathBuf>,
    ) -> Result<Self, RuleError> {
        let h = home.as_deref();
        Ok(Self {
            mode,
            allow: parse_all(allow, h)?,
            deny: parse_all(deny, h)?,
            ask: parse_all(ask, h)?,
            home,
            commands: OperatorTools::default(),
        })
    }

    /// Adds an allow rule at runtime ("allow for this session").
    pub fn allow(&mut self, rule: &str) -> Result<(), RuleError> {
        let rule = Rule::parse(rule, self.home.as_deref())?;
        self.allow.push(rule);
        Ok(())
    }

    /// Marks the operator's command tools: `read_only` ones are judged like
    /// read-only MCP tools, and `confirm` ones always ask a human — even in
    /// `bypass`, and past allow rules — unless a deny rule or the mode
    /// refuses them (in `dont_ask` they are denied: nobody can be asked).
    pub fn with_commands(
        mut self,
        read_only: impl IntoIterator<Item = String>,
        confirm: impl IntoIterator<Item = String>,
    ) -> Self {
        self.commands.read_only.extend(read_only);
        self.commands.confirm.extend(confirm);
        self
    }

    /// Whether every call of `tool` must be confirmed by a human.
    pub fn must_confirm(&self, tool: &str) -> bool {
        self.commands.confirm.contains(tool)
    }

    pub fn mode(&self) -> PermissionMode {
        self.mode
    }

    /// Changes the mode for the calls still to come (a client's
    /// `set_permission_mode` during a turn).
    pub fn set_mode(&mut self, mode: PermissionMode) {
        self.mode = mode;
    }

    /// Decides a call.
    pub fn evaluate(&self, call: &ToolCallView<'_>) -> Verdict {
        let verdict = self.evaluate_asking(call);
        match verdict {
            Verdict::Ask { reason } if self.mode == PermissionMode::DontAsk => {
                deny(format!("{reason}; nothing asks in dontAsk mode"))
            }
            verdict => verdict,
        }
    }

    /// [`PermissionPolicy::evaluate`] before `dontAsk` turns asking into no.
    fn evaluate_asking(&self, call: &ToolCallView<'_>) -> Verdict {
        if call.tool == "Bash" {
            return self.evaluate_bash(call);
        }
        let facts = self.facts(call);
        let mut maybe_denied = None;
        for r in &self.deny {
            match r.hit(call.tool, &facts) {
                Hit::Yes => return deny(format!("denied by rule {}", r.text)),
                Hit::Maybe => {
                    maybe_denied.get_or_insert(r);
                }
                Hit::No => {}
            }
        }
        let allowed_by = self
            .allow
            .iter()
            .find(|r| r.hit(call.tool, &facts) == Hit::Yes);
        if let Some(v) = self.read_only_mode_denial(call, allowed_by) {
            return v;
        }
        if let Some(r) = maybe_denied {
            return ask(format!(
                "{} may match deny rule {} (its path cannot be resolved)",
                describe(call),
                r.text
            ));
        }
        if self.must_confirm(call.tool) {
            return ask(format!(
                "command {} always asks for confirmation (confirm = true)",
                call.tool
            ));
        }
        if allowed_by.is_some() {
            return Verdict::Allow;
        }
        if let Some(r) = self
            .ask
            .iter()
            .find(|r| r.hit(call.tool, &facts) == Hit::Yes)
        {
            return ask(format!(
                "rule {} asks for approval of {}",
                r.text,
                describe(call)
            ));
        }
        let by_mode = match self.mode {
            PermissionMode::Bypass => true,
            PermissionMode::ReadOnly => true, // only the read-only tools get here
            // WebFetch reads, but what it sends can carry data out: a new
            // domain asks, as in Claude Code.
            PermissionMode::AcceptEdits => {
                (call.read_only && call.tool != "WebFetch") || EDIT_TOOLS.contains(&call.tool)
            }
            PermissionMode::Default | PermissionMode::DontAsk => {
                call.read_only && call.tool != "WebFetch"
            }
        };
        if by_mode {
            Verdict::Allow
        } else {
            ask(format!("{} is not in the allow list", describe(call)))
        }
    }

    /// The rule that "allow for this session" should add for this call: the exact shell
    /// command(s) for `Bash` (never a prefix), `Edit` for file edits, the domain for
    /// `WebFetch`, the tool name for others.
    pub fn session_rule_for(call: &ToolCallView<'_>) -> String {
        match call.tool {
            "Bash" => {
                bash_rules::bash_session_rule(input_str(call.input, "command").unwrap_or_default())
            }
            t if EDIT_TOOLS.contains(&t) => "Edit".to_owned(),
            "WebFetch" => match input_str(call.input, "url").and_then(url_host) {
                Some(host) => format!("WebFetch(domain:{host})"),
                None => "WebFetch".to_owned(),
            },
            t => t.to_owned(),
        }
    }

    /// The deny rule that forbids reading `path` (for tools that walk directories, such as
    /// `Grep` and `Glob`, to skip files a `Read(…)` deny rule protects).
    pub fn read_denied_by(&self, path: &Path, workspace: &Path) -> Option<&str> {
        let facts = Facts {
            path: PathFact::At(rule::normalize(&workspace.join(path))),
            host: None,
            workspace: rule::normalize(workspace),
        };
        self.deny
            .iter()
            .find(|r| !matches!(r.matcher, rule::Matcher::Any) && r.hit("Read", &facts) == Hit::Yes)
            .map(|r| r.text.as_str())
    }

    /// Whether the model is offered `tool` (read-only by its own flag) at
    /// all: not when every call of it would be denied (the mode refuses it,
    /// or a deny rule names the whole tool), which would only cost context
    /// and invite refused calls.
    pub fn offers(&self, tool: &str, read_only: bool) -> bool {
        if self.mode == PermissionMode::ReadOnly
            && !READ_ONLY_MODE_TOOLS.contains(&tool)
            && !(self.vouched_read_only(tool, read_only)
                && self.allow.iter().any(|rule| rule.whole_tool(tool)))
        {
            return false;
        }
        !self.deny.iter().any(|rule| rule.whole_tool(tool))
    }

    fn read_only_mode_denial(
        &self,
        call: &ToolCallView<'_>,
        allowed_by: Option<&Rule>,
    ) -> Option<Verdict> {
        let tool = call.tool;
        if self.mode != PermissionMode::ReadOnly
            || READ_ONLY_MODE_TOOLS.contains(&tool)
            || (self.vouched_read_only(tool, call.read_only) && allowed_by.is_some())
        {
            return None;
        }
        let note = match allowed_by {
            Some(r) if tool.starts_with(MCP_PREFIX) => format!(
                " (allow rule {} applies in this mode only to MCP tools marked read-only)",
                r.text
            ),
            Some(r) => format!(" (allow rule {} does not apply in this mode)", r.text),
            None if self.vouched_read_only(tool, call.read_only) => {
                " (a read-only MCP or command tool runs in this mode only when an allow rule names it)"
                    .to_owned()
            }
            None => String::new(),
        };
        Some(deny(format!(
            "mode {} allows only tools that change nothing (Read, Glob, Grep, LS, WebFetch, …); {tool} is not allowed{note}",
            self.mode.name()
        )))
    }

    /// A read-only tool the operator vouched for: an MCP tool marked
    /// read-only, or a command with `mutating = false`.
    fn vouched_read_only(&self, tool: &str, read_only: bool) -> bool {
        read_only_mcp(tool, read_only) || (read_only && self.commands.read_only.contains(tool))
    }

    fn facts(&self, call: &ToolCallView<'_>) -> Facts {
        let workspace = rule::normalize(call.workspace);
        let raw = if READ_TOOLS.contains(&call.tool) && call.tool != "Read" {
            Some(input_str(call.input, "path").unwrap_or("."))
        } else if call.tool == "Read" || EDIT_TOOLS.contains(&call.tool) {
            input_str(call.input, "file_path")
        } else {
            None
        };
        let path = match raw {
            None => PathFact::Absent,
            Some(p) => match resolve_path(p, &workspace, self.home.as_deref()) {
                Some(abs) => PathFact::At(abs),
                None => PathFact::Unresolvable,
            },
        };
        let host = (call.tool == "WebFetch")
            .then(|| input_str(call.input, "url").and_then(url_host))
            .flatten();
        Facts {
            path,
            host,
            workspace,
        }
    }
}

/// Tools of MCP servers are named `mcp__<server>__<tool>`.
const MCP_PREFIX: &str = "mcp__";

/// An MCP tool whose own flag says it changes nothing: the operator marked
/// it (`read_only_tools`) or trusts its server's `readOnlyHint`.
fn read_only_mcp(tool: &str, read_only: bool) -> bool {
    read_only && tool.starts_with(MCP_PREFIX)
}

fn input_str<'a>(input: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(serde_json::Value::as_str)
}

/// `Tool(detail)` for messages.
fn describe(call: &ToolCallView<'_>) -> String {
    let detail = ["file_path", "path", "url"]
        .iter()
        .find_map(|k| input_str(call.input, k));
    match detail {
        Some(d) => format!("{}({d})", call.tool),
        None => call.tool.to_owned(),
    }
}
