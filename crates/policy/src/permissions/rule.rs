//! Parsing permission rules (`Tool`, `Tool(pattern)`) and matching the non-shell ones.

use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use super::bash::analyze;
use super::syms::{Sym, matches};

/// A permission rule that cannot be used; says which rule and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid permission rule `{rule}`: {reason}")]
pub struct RuleError {
    rule: String,
    reason: String,
}

impl RuleError {
    fn new(rule: &str, reason: impl Into<String>) -> Self {
        Self {
            rule: rule.to_owned(),
            reason: reason.into(),
        }
    }

    /// The rule as written.
    pub fn rule(&self) -> &str {
        &self.rule
    }

    /// What is wrong with it.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// Tools whose calls `Read` rules cover (their `file_path` / `path`).
pub(crate) const READ_TOOLS: &[&str] = &["Read", "Glob", "Grep", "LS"];
/// Tools whose calls `Edit` rules cover (their `file_path`).
pub(crate) const EDIT_TOOLS: &[&str] = &["Edit", "MultiEdit", "Write"];
/// Tools a whole-tool `Bash` rule covers: stopping a background command is
/// running a command as much as starting it.
pub(crate) const SHELL_TOOLS: &[&str] = &["Bash", "KillShell"];

/// Which tools a rule is about.
#[derive(Debug, Clone)]
pub(crate) enum ToolPat {
    Exact(String),
    Family(&'static [&'static str]),
    /// `mcp__server`: every tool of that server.
    McpServer(String),
    /// `mcp__github__*`-style glob on the tool name.
    McpGlob(Vec<Sym>),
}

impl ToolPat {
    pub(crate) fn matches(&self, tool: &str) -> bool {
        match self {
            Self::Exact(name) => name == tool,
            Self::Family(tools) => tools.contains(&tool),
            Self::McpServer(prefix) => tool
                .strip_prefix(prefix.as_str())
                .is_some_and(|rest| rest.starts_with("__")),
            Self::McpGlob(pat) => {
                let name: Vec<Sym> = tool.chars().map(Sym::Ch).collect();
                matches(pat, &name, false)
            }
        }
    }
}

/// What a rule says about a call of a matching tool.
#[derive(Debug, Clone)]
pub(crate) enum Matcher {
    /// Every call.
    Any,
    /// `Bash(pattern)`: alternatives, each matched against one simple command.
    Bash(Vec<Vec<Sym>>),
    Path(PathPattern),
    /// `WebFetch(domain:host)`: the normalised host.
    Domain(String),
}

#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub text: String,
    pub tool: ToolPat,
    pub matcher: Matcher,
}

/// Whether a rule matches a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hit {
    No,
    Yes,
    /// Cannot be told (a path that cannot be resolved): a deny rule then asks.
    Maybe,
}

/// The file path of a call, resolved lexically.
#[derive(Debug, Clone)]
pub(crate) enum PathFact {
    Absent,
    Unresolvable,
    At(PathBuf),
}

/// What the non-shell rules look at in a call.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    pub path: PathFact,
    pub host: Option<String>,
    pub workspace: PathBuf,
}

impl Rule {
    pub(crate) fn parse(text: &str, home: Option<&Path>) -> Result<Self, RuleError> {
        let err = |why: String| RuleError::new(text, why);
        let t = text.trim();
        let (name, pattern) = match t.find('(') {
            None if t.contains(')') => return Err(err("unbalanced `)`".to_owned())),
            None => (t, None),
            Some(i) => match t[i + 1..].strip_suffix(')') {
                Some(inner) => (&t[..i], Some(inner)),
                None => return Err(err(format!("`{}(` is missing its closing `)`", &t[..i]))),
            },
        };
        if name.is_empty() {
            return Err(err("empty tool name".to_owned()));
        }
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-*".contains(c))
        {
            return Err(err(format!("`{name}` is not a tool name")));
        }
        let tool = if name.contains('*') {
            if !name.starts_with("mcp__") {
                return Err(err(
                    "`*` in a tool name only works for MCP tools (`mcp__server__*`)".to_owned(),
                ));
            }
            ToolPat::McpGlob(
                name.chars()
                    .map(|c| if c == '*' { Sym::Star } else { Sym::Ch(c) })
                    .collect(),
            )
        } else if name.starts_with("mcp__") && !name["mcp__".len()..].contains("__") {
            ToolPat::McpServer(name.to_owned())
        } else {
            match name {
                "Read" => ToolPat::Family(READ_TOOLS),
                "Edit" => ToolPat::Family(EDIT_TOOLS),
                "Bash" if pattern.is_none_or(|p| p.trim() == "*") => ToolPat::Family(SHELL_TOOLS),
                _ => ToolPat::Exact(name.to_owned()),
            }
        };
        let matcher = match pattern.map(str::trim) {
            None | Some("*") => Matcher::Any,
            Some("") => {
                return Err(err(format!(
                    "empty pattern; write `{name}` to match every call"
                )));
            }
            Some(p) => match name {
                "Bash" => Matcher::Bash(compile_bash(p).map_err(err)?),
                "Read" | "Edit" | "Write" | "MultiEdit" | "Glob" | "Grep" | "LS" => {
                    Matcher::Path(PathPattern::compile(p, home).map_err(err)?)
                }
                "WebFetch" => Matcher::Domain(compile_domain(p).map_err(err)?),
                _ => {
                    return Err(err(format!(
                        "`{name}` rules take no pattern; write `{name}` to match every call"
                    )));
                }
            },
        };
        Ok(Self {
            text: t.to_owned(),
            tool,
            matcher,
        })
    }

    /// Is this a `Bash(pattern)` rule?
    pub(crate) fn bash_pattern(&self) -> Option<&[Vec<Sym>]> {
        match (&self.tool, &self.matcher) {
            (ToolPat::Exact(t), Matcher::Bash(alts)) if t == "Bash" => Some(alts),
            _ => None,
        }
    }

    /// Is this rule about every call of `tool`?
    pub(crate) fn whole_tool(&self, tool: &str) -> bool {
        matches!(self.matcher, Matcher::Any) && self.tool.matches(tool)
    }

    /// Does this rule match a call of a tool other than `Bash`?
    pub(crate) fn hit(&self, tool: &str, facts: &Facts) -> Hit {
        if !self.tool.matches(tool) {
            return Hit::No;
        }
        let yes = |b: bool| if b { Hit::Yes } else { Hit::No };
        match &self.matcher {
            Matcher::Any => Hit::Yes,
            Matcher::Bash(_) => Hit::No,
            Matcher::Path(p) => match &facts.path {
                PathFact::At(abs) => yes(p.matches(abs, &facts.workspace)),
                PathFact::Unresolvable => Hit::Maybe,
                PathFact::Absent => Hit::No,
            },
            Matcher::Domain(d) => yes(facts.host.as_deref().is_some_and(|h| {
                h == d
                    || h.strip_suffix(d.as_str())
                        .is_some_and(|sub| sub.ends_with('.'))
            })),
        }
    }
}

fn compile_bash(p: &str) -> Result<Vec<Vec<Sym>>, String> {
    let (body, legacy) = match p.strip_suffix(":*") {
        Some(b) => (b, true),
        None => (p, false),
    };
    let parts = analyze(body, true).map_err(|e| format!("cannot parse the command: {e}"))?;
    let mut never = None;
    let mut alts = Vec::new();
    let mut count = 0;
    for part in parts.into_iter().filter(|p| p.needs_rule) {
        if let Some(why) = part.blocker {
            never.get_or_insert(format!(
                "`{}` can never be allowed by a rule: {why}",
                part.display
            ));
            continue;
        }
        count += 1;
        let seq = part.allow_seq;
        if legacy {
            let mut wider = seq.clone();
            wider.extend([Sym::Sep, Sym::Star]);
            alts.push(wider);
        } else if let Some(bare) = seq.strip_suffix(&[Sym::Sep, Sym::Star]) {
            // `Bash(ls *)` also matches a bare `ls`.
            alts.push(bare.to_vec());
        }
        alts.push(seq);
    }
    if count == 0 {
        return Err(never.unwrap_or_else(|| "the pattern names no command".to_owned()));
    }
    if legacy && count != 1 {
        return Err("the `:*` prefix form takes a single command".to_owned());
    }
    Ok(alts)
}

fn compile_domain(p: &str) -> Result<String, String> {
    let d = p
        .strip_prefix("domain:")
        .ok_or("WebFetch rules take `domain:<host>` (e.g. `WebFetch(domain:docs.rs)`)")?
        .trim();
    let d = d.strip_prefix("*.").unwrap_or(d);
    if d.is_empty() || d.contains(|c: char| "/@:?#*[]\\".contains(c) || c.is_whitespace()) {
        return Err(format!("`{d}` is not a host name"));
    }
    let url = url::Url::parse(&format!("https://{d}/")).map_err(|e| format!("`{d}`: {e}"))?;
    let host = url
        .host_str()
        .ok_or_else(|| format!("`{d}` is not a host name"))?;
    Ok(host.trim_end_matches('.').to_owned())
}

/// The host of an `http(s)` URL, normalised; `None` for anything else.
pub(crate) fn url_host(url: &str) -> Option<String> {
    let url = url::Url::parse(url.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = url.host_str()?.trim_end_matches('.');
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// A `Read(…)`/`Edit(…)` glob: relative to the workspace, absolute, or both.
#[derive(Debug, Clone)]
pub(crate) struct PathPattern {
    rel: Option<GlobSet>,
    abs: Option<GlobSet>,
}

impl PathPattern {
    /// Pattern forms (as Claude Code): `//abs/path` absolute; `~/path` in the home
    /// directory; `/path` anchored at the workspace root (and, since it is easy to mean
    /// the filesystem root, also the absolute path); `./path` or `dir/path` anchored at the
    /// workspace; a name without `/` (`*.md`, `.env`) at any depth, like gitignore. As in
    /// gitignore, a pattern matching a directory covers everything below it, and `dir/**`
    /// or `dir/` also matches `dir` itself.
    fn compile(p: &str, home: Option<&Path>) -> Result<Self, String> {
        if p.split('/').any(|seg| seg == "..") {
            return Err(
                "`..` is not supported in path rules; use an absolute path (`//…`)".to_owned(),
            );
        }
        let (rel, abs) = if let Some(rest) = p.strip_prefix("//") {
            (None, Some(format!("/{rest}")))
        } else if p == "~" || p.starts_with("~/") {
            let home = home.ok_or("`~` needs a home directory, and HOME is not set")?;
            let home = globset::escape(&home.to_string_lossy());
            (
                None,
                Some(format!("{}{}", home.trim_end_matches('/'), &p[1..])),
            )
        } else if let Some(rest) = p.strip_prefix('/') {
            (Some(rest.to_owned()), Some(p.to_owned()))
        } else {
            let mut q = p;
            while let Some(r) = q.strip_prefix("./") {
                q = r;
            }
            let dot_slash = q.len() < p.len();
            let q = if q.is_empty() || q == "." { "**" } else { q };
            let anchored =
                dot_slash || q.trim_end_matches('/').contains('/') || q.starts_with("**");
            (
                Some(if anchored {
                    q.to_owned()
                } else {
                    format!("**/{q}")
                }),
                None,
            )
        };
        Ok(Self {
            rel: rel.map(|g| glob_set(&g)).transpose()?,
            abs: abs.map(|g| glob_set(&g)).transpose()?,
        })
    }

    pub(crate) fn matches(&self, abs: &Path, workspace: &Path) -> bool {
        let rel_hit = self.rel.as_ref().is_some_and(|set| {
            abs.strip_prefix(workspace)
                .is_ok_and(|rel| set.is_match(rel))
        });
        rel_hit || self.abs.as_ref().is_some_and(|set| set.is_match(abs))
    }
}

fn glob_set(glob: &str) -> Result<GlobSet, String> {
    // Like gitignore, a pattern that matches a directory covers everything below it, and
    // `dir/**` (or `dir/`) also matches `dir` itself.
    let base = glob
        .strip_suffix('/')
        .filter(|b| !b.is_empty())
        .unwrap_or(glob);
    let globs = match base.strip_suffix("/**") {
        Some(dir) if !dir.is_empty() && dir != "**" => vec![base.to_owned(), dir.to_owned()],
        Some(_) => vec![base.to_owned()],
        None => vec![base.to_owned(), format!("{base}/**")],
    };
    let mut set = GlobSetBuilder::new();
    for g in &globs {
        let compiled = GlobBuilder::new(g)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| format!("bad glob `{g}`: {e}"))?;
        set.add(compiled);
    }
    set.build().map_err(|e| format!("bad glob `{glob}`: {e}"))
}

/// Resolves a path from a tool input against the workspace, without touching the disk.
pub(crate) fn resolve_path(input: &str, workspace: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let path = if input == "~" || input.starts_with("~/") {
        home?.join(input[1..].trim_start_matches('/'))
    } else if input.starts_with('~') {
        return None; // `~user`
    } else if Path::new(input).is_absolute() {
        PathBuf::from(input)
    } else {
        workspace.join(input)
    };
    Some(normalize(&path))
}

/// Removes `.` and `..` lexically (`..` never climbs above the root).
pub(crate) fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => out.push(c.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}
