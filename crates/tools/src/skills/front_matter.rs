//! The YAML front matter of a `SKILL.md` (and of Claude Code's agent and
//! command files), parsed by hand.
//!
//! Only a few keys matter (`name`, `description`, `allowed-tools`, `tools`,
//! `model`, `argument-hint`), so this
//! reads the YAML subset skill files use — `key: value` lines with plain,
//! quoted, block (`|`, `>`) or multi-line plain scalars, and flow (`[a, b]`)
//! or block (`- a`) lists — instead of pulling in a YAML crate (`serde_yaml`
//! is deprecated, `serde_yml` is not trusted). Other keys, nested maps
//! included, are skipped; a line that is not `key: value` is an error.

/// The keys of a front matter that agentd uses.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FrontMatter {
    pub name: Option<String>,
    pub description: Option<String>,
    pub allowed_tools: Vec<String>,
    /// An agent file's tools.
    pub tools: Option<Vec<String>>,
    pub model: Option<String>,
    /// A command file's hint at its arguments.
    pub argument_hint: Option<String>,
}

/// Split a `SKILL.md` into its front matter (between `---` lines) and body.
pub fn split(text: &str) -> Result<(&str, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end() != "---" {
        return Err("it does not start with YAML front matter (a `---` line)".into());
    }
    let start = first.len();
    let mut at = start;
    for line in lines {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed == "..." {
            let body = text[at + line.len()..].trim_start_matches(['\r', '\n']);
            return Ok((&text[start..at], body));
        }
        at += line.len();
    }
    Err("its front matter has no closing `---` line".into())
}

/// Parse the front matter between the `---` lines.
pub fn parse(yaml: &str) -> Result<FrontMatter, String> {
    let lines: Vec<&str> = yaml.lines().collect();
    let mut front = FrontMatter::default();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        index += 1;
        if is_blank_or_comment(line) {
            continue;
        }
        let Some((key, value)) = line.split_once(':').filter(|_| !is_indented(line)) else {
            return Err(format!(
                "front matter line {index} is not `key: value`: {:?}",
                line.trim()
            ));
        };
        let start = index;
        // A key's value continues on indented lines, or on `- ` items.
        while index < lines.len()
            && (is_indented(lines[index])
                || is_blank_or_comment(lines[index])
                || lines[index].starts_with("- "))
        {
            index += 1;
        }
        let continuation = &lines[start..index];
        let key = key.trim();
        let value = value.trim();
        match key {
            "name" => front.name = Some(scalar(key, value, continuation)?),
            "description" => front.description = Some(scalar(key, value, continuation)?),
            "allowed-tools" => front.allowed_tools = tool_list(value, continuation)?,
            "tools" => front.tools = Some(tool_list(value, continuation)?),
            "model" => front.model = Some(scalar(key, value, continuation)?),
            "argument-hint" => front.argument_hint = Some(scalar(key, value, continuation)?),
            _ => {}
        }
    }
    Ok(front)
}

fn is_indented(line: &str) -> bool {
    line.starts_with([' ', '\t'])
}

fn is_blank_or_comment(line: &str) -> bool {
    let trimmed = line.trim();
    trimmed.is_empty() || trimmed.starts_with('#')
}

/// A string value: plain (possibly over several lines), quoted, or a block scalar.
fn scalar(key: &str, value: &str, continuation: &[&str]) -> Result<String, String> {
    if value.starts_with(['|', '>']) {
        return Ok(block_scalar(value.starts_with('|'), continuation));
    }
    let mut joined = value.to_string();
    for line in continuation {
        if line.trim_start().starts_with("- ") {
            return Err(format!("`{key}` must be a string, not a list"));
        }
        let trimmed = line.trim();
        if !trimmed.is_empty() && !trimmed.starts_with('#') {
            joined.push(' ');
            joined.push_str(trimmed);
        }
    }
    let joined = joined.trim();
    if joined.starts_with(['"', '\'']) {
        return unquote(joined).ok_or_else(|| format!("`{key}` has an unterminated quoted string"));
    }
    if value.is_empty() && continuation.iter().any(|line| line.contains(": ")) {
        return Err(format!("`{key}` must be a string, not a map"));
    }
    Ok(strip_comment(joined).to_string())
}

/// `|` keeps line breaks, `>` folds them into spaces; both drop the common indent.
fn block_scalar(literal: bool, continuation: &[&str]) -> String {
    let indent = continuation
        .iter()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    let lines: Vec<&str> = continuation
        .iter()
        .map(|line| line.get(indent..).unwrap_or("").trim_end())
        .collect();
    let separator = if literal { "\n" } else { " " };
    lines.join(separator).trim().to_string()
}

/// A quoted scalar; `None` when the closing quote is missing.
fn unquote(text: &str) -> Option<String> {
    let quote = text.chars().next()?;
    let mut out = String::new();
    let mut chars = text[1..].chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            ('\'', '\'') if chars.peek() == Some(&'\'') => {
                chars.next();
                out.push('\'');
            }
            ('"', '\\') => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                other => out.push(other),
            },
            (q, c) if q == c => return Some(out),
            (_, c) => out.push(c),
        }
    }
    None
}

/// A plain scalar ends where ` #` starts a comment.
fn strip_comment(text: &str) -> &str {
    text.find(" #").map_or(text, |at| text[..at].trim_end())
}

/// `allowed-tools` as a list (`[a, b]` or `- a` lines) or a string of names
/// separated by commas or spaces (Claude Code and the Agent Skills spec differ).
fn tool_list(value: &str, continuation: &[&str]) -> Result<Vec<String>, String> {
    let items: Vec<String> = if let Some(inner) = value.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or("`allowed-tools` has an unterminated `[` list")?;
        split_tools(inner, |c| c == ',')
    } else if value.is_empty() {
        continuation
            .iter()
            .filter(|line| !is_blank_or_comment(line))
            .map(|line| {
                line.trim()
                    .strip_prefix("- ")
                    .map(|item| plain_or_quoted(item.trim()))
                    .ok_or_else(|| "`allowed-tools` must be a list or a string".to_string())
            })
            .collect::<Result<_, _>>()?
    } else {
        let text = scalar("allowed-tools", value, continuation)?;
        split_tools(&text, |c| c == ',' || c.is_whitespace())
    };
    Ok(items.into_iter().filter(|item| !item.is_empty()).collect())
}

/// Split on `is_separator` outside parentheses, so `Bash(git status)` stays whole.
fn split_tools(text: &str, is_separator: impl Fn(char) -> bool) -> Vec<String> {
    let mut items = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 && is_separator(c) {
            items.push(plain_or_quoted(current.trim()));
            current.clear();
        } else {
            current.push(c);
        }
    }
    items.push(plain_or_quoted(current.trim()));
    items
}

fn plain_or_quoted(item: &str) -> String {
    if item.starts_with(['"', '\'']) {
        unquote(item).unwrap_or_else(|| item.to_string())
    } else {
        strip_comment(item).to_string()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn splits_front_matter_from_body() {
        let (yaml, body) = split("---\nname: a\n---\n\n# Body\ntext\n").unwrap();
        assert_eq!(yaml, "name: a\n");
        assert_eq!(body, "# Body\ntext\n");
        let (yaml, body) = split("\u{feff}---\r\nname: a\r\n---\r\nbody").unwrap();
        assert_eq!((yaml, body), ("name: a\r\n", "body"));
        assert!(
            split("# no front matter")
                .unwrap_err()
                .contains("does not start")
        );
        assert!(split("---\nname: a\n").unwrap_err().contains("no closing"));
    }

    #[test]
    fn parses_scalars_in_their_yaml_forms() {
        let yaml = "name: \"pdf\"\ndescription: Use it: for PDFs # comment\nversion: 1\n";
        let front = parse(yaml).unwrap();
        assert_eq!(front.name.as_deref(), Some("pdf"));
        assert_eq!(front.description.as_deref(), Some("Use it: for PDFs"));
        let front = parse("description: >\n  Folded\n  text.\nname: 'it''s'\n").unwrap();
        assert_eq!(front.description.as_deref(), Some("Folded text."));
        assert_eq!(front.name.as_deref(), Some("it's"));
        let front = parse("description: |\n  one\n  two\n").unwrap();
        assert_eq!(front.description.as_deref(), Some("one\ntwo"));
        let front = parse("description: a plain\n  continued line\n").unwrap();
        assert_eq!(front.description.as_deref(), Some("a plain continued line"));
    }

    #[test]
    fn parses_tool_lists_and_skips_other_keys() {
        let tools = |yaml: &str| parse(yaml).unwrap().allowed_tools;
        let expected = ["Read", "Bash(git status)", "Grep"];
        assert_eq!(
            tools("allowed-tools: Read, Bash(git status), Grep"),
            expected
        );
        assert_eq!(tools("allowed-tools: Read Bash(git status) Grep"), expected);
        assert_eq!(
            tools("allowed-tools: [Read, \"Bash(git status)\", Grep]"),
            expected
        );
        assert_eq!(
            tools("allowed-tools:\n  - Read\n  - Bash(git status)\n- Grep\n"),
            expected
        );
        let front = parse("metadata:\n  owner: me\n  tags: [a]\nname: x\n").unwrap();
        assert_eq!(front.name.as_deref(), Some("x"));
    }

    #[test]
    fn malformed_front_matter_is_an_error() {
        assert!(parse("just some text\n").unwrap_err().contains("line 1"));
        assert!(
            parse("name: \"open\n")
                .unwrap_err()
                .contains("unterminated")
        );
        assert!(parse("name:\n  - a\n").unwrap_err().contains("not a list"));
        assert!(
            parse("description:\n  a: b\n")
                .unwrap_err()
                .contains("not a map")
        );
    }
}
