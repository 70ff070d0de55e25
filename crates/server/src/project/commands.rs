//! `.claude/commands/*.md` as slash commands, as Claude Code has them: a
//! message `/name args` becomes the command file's body with `$ARGUMENTS`
//! (and `$1`, `$2`, …) replaced; a file in a subfolder is `/folder:name`.
//! A body that does not use the arguments gets them appended.

use std::collections::BTreeMap;
use std::path::Path;

use agentd_protocol::{ContentBlock, Message};
use agentd_tools::skills::front_matter;

use super::files::ProjectFiles;

const COMMANDS_DIR: &str = ".claude/commands";
/// Most command files read (the rest are skipped with a warning).
const MAX_COMMANDS: usize = 200;

/// A project's slash commands, by name.
#[derive(Debug, Clone, Default)]
pub struct SlashCommands {
    commands: BTreeMap<String, SlashCommand>,
}

#[derive(Debug, Clone)]
pub struct SlashCommand {
    pub body: String,
}

impl SlashCommands {
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// The names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.commands.keys().map(String::as_str)
    }

    /// `message` with a command's text replaced by the prompt it stands
    /// for (its attachments kept); as it is otherwise.
    pub fn apply(&self, mut message: Message) -> Message {
        let Some(expanded) = self.expand(&message.text()) else {
            return message;
        };
        message
            .content
            .retain(|block| !matches!(block, ContentBlock::Text { .. }));
        message
            .content
            .insert(0, ContentBlock::Text { text: expanded });
        message
    }

    /// The prompt `text` stands for: a command's body when `text` is
    /// `/name args` for one of them; `None` for any other text.
    pub fn expand(&self, text: &str) -> Option<String> {
        let rest = text.trim_start().strip_prefix('/')?;
        let (name, arguments) = match rest.split_once(char::is_whitespace) {
            Some((name, arguments)) => (name, arguments.trim()),
            None => (rest.trim_end(), ""),
        };
        let command = self.commands.get(name)?;
        Some(substitute(&command.body, arguments))
    }
}

#[cfg(test)]
impl SlashCommands {
    pub(crate) fn for_tests(commands: &[(&str, &str)]) -> Self {
        let commands = commands
            .iter()
            .map(|(name, body)| {
                (
                    name.to_string(),
                    SlashCommand {
                        body: body.to_string(),
                    },
                )
            })
            .collect();
        Self { commands }
    }
}

fn substitute(body: &str, arguments: &str) -> String {
    let words: Vec<&str> = arguments.split_whitespace().collect();
    let uses_arguments =
        body.contains("$ARGUMENTS") || (1..=9).any(|n| body.contains(&format!("${n}")));
    let mut out = body.replace("$ARGUMENTS", arguments);
    // From $9 down, so `$1` does not eat the start of `$10`-like text.
    for n in (1..=9).rev() {
        out = out.replace(&format!("${n}"), words.get(n - 1).copied().unwrap_or(""));
    }
    let mut out = out.trim().to_string();
    if !uses_arguments && !arguments.is_empty() {
        out.push_str(&format!("\n\nARGUMENTS: {arguments}"));
    }
    out
}

pub fn discover(files: &ProjectFiles, warnings: &mut Vec<String>) -> SlashCommands {
    let mut commands = BTreeMap::new();
    collect(
        files,
        Path::new(COMMANDS_DIR),
        "",
        0,
        &mut commands,
        warnings,
    );
    SlashCommands { commands }
}

fn collect(
    files: &ProjectFiles,
    dir: &Path,
    prefix: &str,
    depth: usize,
    commands: &mut BTreeMap<String, SlashCommand>,
    warnings: &mut Vec<String>,
) {
    for (name, is_dir) in files.list(dir) {
        if name.starts_with('.') {
            continue;
        }
        if is_dir {
            if depth < 2 {
                let prefix = format!("{prefix}{name}:");
                collect(
                    files,
                    &dir.join(&name),
                    &prefix,
                    depth + 1,
                    commands,
                    warnings,
                );
            }
            continue;
        }
        let Some(stem) = name.strip_suffix(".md") else {
            continue;
        };
        if commands.len() >= MAX_COMMANDS {
            warnings.push(format!(
                "{COMMANDS_DIR}: more than {MAX_COMMANDS} commands; the rest skipped"
            ));
            return;
        }
        let path = dir.join(&name);
        match files.read(&path) {
            Ok(Some(text)) => {
                let command = parse(&text);
                commands.insert(format!("{prefix}{stem}"), command);
            }
            Ok(None) => {}
            Err(reason) => warnings.push(format!("{}: {reason}", path.display())),
        }
    }
}

/// A command file: optional front matter (its keys are not used), then the body.
fn parse(text: &str) -> SlashCommand {
    let body = front_matter::split(text).map_or(text, |(_, body)| body);
    SlashCommand {
        body: body.to_string(),
    }
}
