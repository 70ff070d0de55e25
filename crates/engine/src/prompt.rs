//! System prompt templates.
//!
//! A template is text with `{{name}}` placeholders (see [`PLACEHOLDERS`]).
//! `{{workspace}}`, `{{tools}}` and `{{date}}` are inline values; `{{sandbox}}`,
//! `{{permissions}}`, `{{skills}}` and `{{subagents}}` are whole sections with
//! their own heading. A placeholder alone on its line that renders to nothing
//! (no skills, say) removes its line and the blank line it would leave, so
//! empty sections leave no trace. `{{file:PATH}}` is the text of a file of
//! the workspace (read by the caller, see [`PromptContext::files`]), and
//! `{{instructions}}` the project's instruction files, which a template that
//! does not place them gets at its end. `{{` not followed by a name and `}}` is
//! plain text; a name that is not a placeholder is an error, so a typo in a
//! profile's template fails at startup instead of reaching the model.
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// The placeholders a template may use.
pub const PLACEHOLDERS: &[&str] = &[
    "workspace",
    "tools",
    "sandbox",
    "permissions",
    "skills",
    "subagents",
    "instructions",
    "date",
];

/// The prefix of a placeholder that includes a workspace file.
pub const FILE_PLACEHOLDER: &str = "file:";

/// Rules listed per kind before the rest are summarized, so a long rule list
/// cannot crowd out the rest of the prompt.
const MAX_RULES_SHOWN: usize = 50;

const DEFAULT_TEMPLATE: &str = "\
You are a coding agent run by agentd. You carry out the user's software tasks by reading and \
changing files and running commands with your tools, and you report what you did.

# Workspace
You work in the workspace directory {{workspace}}. Relative paths resolve against it; paths \
outside it are refused, whether absolute or reached through `..`, `~` or symlinks.

# Tools
Available tools: {{tools}}.
Prefer the file tools (Read, Edit, Write, Glob, Grep, LS) over shell equivalents such as cat, \
sed, find or grep. Read a file before you edit it.

{{sandbox}}

{{permissions}}

{{skills}}

{{subagents}}

# Working style
Keep the user informed briefly, and finish with a short summary of what you did.

Today's date is {{date}}.

{{instructions}}
";

/// What a session's prompt describes. Borrowed, so building one is free.
#[derive(Debug, Clone, Copy)]
pub struct PromptContext<'a> {
    pub workspace: &'a Path,
    pub tools: &'a [&'a str],
    pub network: bool,
    /// With `network` off: the hosts commands may still reach through
    /// agentd's proxy (the profile's allowlist).
    pub network_allow: Option<&'a [String]>,
    pub sandboxed: bool,
    /// `default`, `accept_edits`, `read_only` or `bypass`.
    pub permission_mode: &'a str,
    pub allow_rules: &'a [String],
    pub deny_rules: &'a [String],
    pub ask_rules: &'a [String],
    /// `SkillSet::prompt_section`: lines `- name: description`.
    pub skills: Option<&'a str>,
    /// Lines `- name: description`, one per subagent type.
    pub subagents: Option<&'a str>,
    /// Today's date, e.g. from [`today`].
    pub date: &'a str,
    /// The project's instruction files, as a whole section.
    pub instructions: Option<&'a str>,
    /// The text of each `{{file:PATH}}` the templates use, by PATH (see
    /// [`file_placeholders`]); one missing here renders as a visible note.
    pub files: Option<&'a BTreeMap<String, String>>,
}

impl<'a> PromptContext<'a> {
    /// Sandboxed, no network, `default` mode, no rules, skills or subagents.
    pub fn strictest(workspace: &'a Path, tools: &'a [&'a str], date: &'a str) -> Self {
        Self {
            workspace,
            tools,
            network: false,
            network_allow: None,
            sandboxed: true,
            permission_mode: "default",
            allow_rules: &[],
            deny_rules: &[],
            ask_rules: &[],
            skills: None,
            subagents: None,
            date,
            instructions: None,
            files: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    #[error(
        "unknown placeholder `{{{{{name}}}}}` on line {line} of the {template}; \
         known placeholders: {known}",
        known = PLACEHOLDERS.join(", ")
    )]
    UnknownPlaceholder {
        name: String,
        line: usize,
        /// Which template: `template`, `system prompt` or `appended prompt`.
        template: &'static str,
    },
}

/// The template used when a profile sets no system prompt.
pub fn default_template() -> &'static str {
    DEFAULT_TEMPLATE
}

/// Render `template` for `ctx`.
pub fn render(template: &str, ctx: &PromptContext) -> Result<String, PromptError> {
    render_named(template, ctx, "template")
}

/// The full system prompt: `system_prompt` (or the default template) rendered,
/// then `append`, also a template, after a blank line.
pub fn system_prompt(
    system_prompt: Option<&str>,
    append: Option<&str>,
    ctx: &PromptContext,
) -> Result<String, PromptError> {
    let base = system_prompt.unwrap_or(DEFAULT_TEMPLATE);
    let mut prompt = render_named(base, ctx, "system prompt")?
        .trim_end()
        .to_string();
    if let Some(append) = append {
        let appended = render_named(append, ctx, "appended prompt")?;
        let appended = appended.trim();
        if !appended.is_empty() {
            prompt.push_str("\n\n");
            prompt.push_str(appended);
        }
    }
    let placed = [Some(base), append]
        .into_iter()
        .flatten()
        .any(|template| template.contains("{{instructions}}"));
    if let Some(instructions) = ctx.instructions.filter(|_| !placed) {
        prompt.push_str("\n\n");
        prompt.push_str(instructions.trim());
    }
    Ok(prompt)
}

/// The default prompt for the strictest setup (sandboxed, no network,
/// `default` mode, no rules, skills or subagents) and today's date. A
/// convenience for callers that do not know the profile; prefer [`system_prompt`].
pub fn default_system_prompt(workspace: &Path, tool_names: &[&str]) -> String {
    let date = today();
    let ctx = PromptContext::strictest(workspace, tool_names, &date);
    // The default template uses known placeholders only.
    render(DEFAULT_TEMPLATE, &ctx).unwrap_or_else(|_| DEFAULT_TEMPLATE.to_string())
}

/// Today's date in UTC, `YYYY-MM-DD`.
pub fn today() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    format!("{year:04}-{month:02}-{day:02}")
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn render_named(
    template: &str,
    ctx: &PromptContext,
    which: &'static str,
) -> Result<String, PromptError> {
    let mut lines: Vec<String> = Vec::new();
    // Set after a line vanished and until the next text, so that the blank
    // lines around a vanished section collapse into one.
    let mut removed = false;
    for (index, line) in template.split('\n').enumerate() {
        let rendered = substitute(line, ctx, index + 1, which)?;
        let is_blank = rendered.trim().is_empty();
        if is_blank && standalone(line).is_some() {
            removed = true;
            continue;
        }
        if is_blank && removed && lines.last().is_none_or(|last| last.trim().is_empty()) {
            continue;
        }
        removed &= is_blank;
        lines.push(rendered);
    }
    if removed {
        while lines.last().is_some_and(|last| last.trim().is_empty()) {
            lines.pop();
        }
        if template.ends_with('\n') {
            lines.push(String::new());
        }
    }
    Ok(lines.join("\n"))
}

/// The placeholder name when `line` is nothing but one placeholder.
fn standalone(line: &str) -> Option<&str> {
    let name = line.trim().strip_prefix("{{")?.strip_suffix("}}")?.trim();
    is_name(name).then_some(name)
}

fn is_name(text: &str) -> bool {
    if let Some(path) = text.strip_prefix(FILE_PLACEHOLDER) {
        return !path.is_empty() && !path.contains(|c: char| c.is_whitespace() || c == '}');
    }
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// The paths of the `{{file:PATH}}` placeholders in `templates`, once each.
pub fn file_placeholders<'t>(templates: impl IntoIterator<Item = &'t str>) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for template in templates {
        let mut rest = template;
        while let Some(open) = rest.find("{{") {
            let after = &rest[open + 2..];
            let Some(close) = after.find("}}") else { break };
            let name = after[..close].trim();
            if let Some(path) = name
                .strip_prefix(FILE_PLACEHOLDER)
                .filter(|_| is_name(name))
                && !paths.iter().any(|p| p == path)
            {
                paths.push(path.to_string());
            }
            rest = &after[close + 2..];
        }
    }
    paths
}

/// Replace the placeholders in one line.
fn substitute(
    line: &str,
    ctx: &PromptContext,
    number: usize,
    which: &'static str,
) -> Result<String, PromptError> {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let name = after
            .find("}}")
            .map(|close| (after[..close].trim(), close))
            .filter(|(name, _)| is_name(name));
        let Some((name, close)) = name else {
            out.push_str("{{");
            rest = after;
            continue;
        };
        let value = value_of(name, ctx).ok_or_else(|| PromptError::UnknownPlaceholder {
            name: name.to_string(),
            line: number,
            template: which,
        })?;
        out.push_str(&value);
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn value_of(name: &str, ctx: &PromptContext) -> Option<String> {
    Some(match name {
        "workspace" => ctx.workspace.display().to_string(),
        "tools" if ctx.tools.is_empty() => "none".to_string(),
        "tools" => ctx.tools.join(", "),
        "sandbox" => sandbox_section(ctx),
        "permissions" => permissions_section(ctx),
        "skills" => list_section(
            "Skills",
            "Skills are packaged instructions for particular kinds of task. Before you do a task \
             a skill covers, use the Skill tool to load that skill's instructions \
             (`{\"skill\": \"<name>\"}`) and follow them. You may read the files in a skill's \
             folder, even one outside the workspace. Available skills:",
            ctx.skills,
        ),
        "subagents" => list_section(
            "Subagents",
            "You can hand a self-contained piece of work (a broad search, an independent \
             subtask) to a subagent: use the Task tool with `subagent_type` set to one of the \
             names below, a short `description`, and a `prompt` that says everything the \
             subagent needs, since it does not see this conversation. It returns one final \
             report. Available subagents:",
            ctx.subagents,
        ),
        "date" => ctx.date.to_string(),
        "instructions" => ctx.instructions.unwrap_or_default().trim().to_string(),
        _ => {
            let path = name.strip_prefix(FILE_PLACEHOLDER)?;
            match ctx.files.and_then(|files| files.get(path)) {
                Some(text) => text.trim_end().to_string(),
                None => format!("[agentd: {{{{file:{path}}}}} was not read]"),
            }
        }
    })
}

fn list_section(heading: &str, intro: &str, lines: Option<&str>) -> String {
    match lines.map(str::trim).filter(|lines| !lines.is_empty()) {
        Some(lines) => format!("# {heading}\n{intro}\n{lines}"),
        None => String::new(),
    }
}

fn sandbox_section(ctx: &PromptContext) -> String {
    if !ctx.sandboxed {
        return "# Sandbox\nCommands you run with Bash are not sandboxed: they run with the \
                server's own permissions and network access. Change files only inside the \
                workspace, and leave everything outside it alone."
            .to_string();
    }
    let allowlist;
    let network = if ctx.network {
        "Network access is on."
    } else if let Some(hosts) = ctx.network_allow {
        allowlist = format!(
            "Network access is limited to these hosts, through an HTTP(S) proxy the environment \
             already names (HTTP_PROXY, HTTPS_PROXY): {}. Anything else is refused.",
            hosts.join(", ")
        );
        &allowlist
    } else {
        "Network access is off: commands cannot reach the internet, so installing packages or \
         downloading files will fail; work with what is already installed."
    };
    format!(
        "# Sandbox\nCommands you run with Bash execute in a sandbox: the workspace is the only \
         writable place (besides a private /tmp that is discarded), the rest of the file system \
         is read-only, and the environment holds only basic variables. {network}"
    )
}

fn permissions_section(ctx: &PromptContext) -> String {
    let mode = ctx.permission_mode;
    let meaning = match mode.to_ascii_lowercase().replace('-', "_").as_str() {
        "default" => {
            "read-only tools run freely; anything that changes files or runs commands needs the \
             user's approval first, and the user may refuse."
        }
        "accept_edits" | "acceptedits" => {
            "read-only tools and file edits (Write, Edit, MultiEdit) run freely; other tools that \
             change something, such as Bash, need the user's approval first."
        }
        "read_only" | "readonly" => {
            "only Read, Glob, Grep, LS and WebFetch may run; every other tool call is refused. \
             Investigate and report; do not try to change anything."
        }
        "bypass" => "tool calls run without asking, except where a rule below says otherwise.",
        _ => "see the rules below.",
    };
    let mut section = format!("# Permissions\nPermission mode `{mode}`: {meaning}");
    let kinds = [
        ("Always refused", ctx.deny_rules),
        ("Allowed without asking", ctx.allow_rules),
        ("Always asks the user first", ctx.ask_rules),
    ];
    for (label, rules) in kinds {
        if !rules.is_empty() {
            section.push_str(&format!("\n{label}: {}", rule_list(rules)));
        }
    }
    section.push_str(
        "\nWhen a call is refused, the tool result says so: do not retry it or work around it \
         with other tools or commands; tell the user what you could not do and why.",
    );
    section
}

fn rule_list(rules: &[String]) -> String {
    let shown: Vec<String> = rules
        .iter()
        .take(MAX_RULES_SHOWN)
        .map(|rule| format!("`{rule}`"))
        .collect();
    let mut list = shown.join(", ");
    if rules.len() > MAX_RULES_SHOWN {
        list.push_str(&format!(" and {} more", rules.len() - MAX_RULES_SHOWN));
    }
    list.push('.');
    list
}

#[cfg(test)]
mod tests {
    use super::civil_from_days;

    #[test]
    fn days_become_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_089), (2025, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }
}
