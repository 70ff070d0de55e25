#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use super::commands::SlashCommands;
use super::files::normalize;
use super::imports::targets;

#[test]
fn imports_are_words_starting_with_at_outside_code() {
    let text =
        "See @docs/a.md and @b.md.\nmail me@example.com\n`@code.md`\n```\n@fenced.md\n```\n@c.md";
    assert_eq!(targets(text), ["docs/a.md", "b.md", "c.md"]);
}

#[test]
fn paths_stay_inside() {
    assert_eq!(
        normalize(Path::new("a/./b/../c")).unwrap(),
        Path::new("a/c")
    );
    assert!(normalize(Path::new("../x")).is_none());
    assert!(normalize(Path::new("a/../../x")).is_none());
    assert!(normalize(Path::new("/etc/passwd")).is_none());
}

#[test]
fn commands_take_their_arguments() {
    let commands = SlashCommands::for_tests(&[
        ("fix", "Fix issue $ARGUMENTS now."),
        ("pair", "First $1, second $2."),
        ("plain", "Review the code."),
        ("ns:deep", "Deep."),
    ]);
    assert_eq!(commands.expand("/fix #12").unwrap(), "Fix issue #12 now.");
    assert_eq!(commands.expand("/pair a b").unwrap(), "First a, second b.");
    assert_eq!(
        commands.expand("/plain src/x.rs").unwrap(),
        "Review the code.\n\nARGUMENTS: src/x.rs"
    );
    assert_eq!(commands.expand("/ns:deep").unwrap(), "Deep.");
    assert!(commands.expand("/unknown x").is_none());
    assert!(commands.expand("fix it").is_none());
}

#[test]
fn a_command_with_attachments_keeps_them() {
    use agentd_protocol::{ContentBlock, Message};
    let commands = SlashCommands::for_tests(&[("look", "Look at this: $ARGUMENTS")]);
    let image = ContentBlock::Image {
        source: serde_json::json!({"type": "base64", "media_type": "image/png", "data": "AA=="}),
    };
    let mut message = Message::user_text("/look the header");
    message.content.push(image.clone());
    let applied = commands.apply(message);
    assert_eq!(applied.text(), "Look at this: the header");
    assert_eq!(applied.content[1], image);
    let plain = commands.apply(Message::user_text("no command"));
    assert_eq!(plain.text(), "no command");
}

#[test]
fn instructions_past_the_cap_are_cut_with_a_note() {
    use super::imports::Included;
    use super::instructions::{MAX_INSTRUCTION_CHARS, render};
    let file = |path: &str, text: String| Included {
        path: path.into(),
        imported_by: None,
        text,
    };
    let section = render(&[
        file("CLAUDE.md", "a".repeat(MAX_INSTRUCTION_CHARS - 10)),
        file("AGENTS.md", "b".repeat(30)),
        file("CLAUDE.local.md", "c".repeat(5)),
    ]);
    assert_eq!(
        section.matches('a').count() - count_in_heading('a'),
        MAX_INSTRUCTION_CHARS - 10
    );
    assert!(section.contains(&format!("{}[agentd:", "b".repeat(10).to_string() + "\n\n")));
    assert!(section.contains("the last 20 characters of AGENTS.md and all of CLAUDE.local.md (5 characters) are left out"), "{section}");
    assert!(!section.contains("ccccc"));
}

fn count_in_heading(c: char) -> usize {
    super::instructions::HEADING.matches(c).count()
        + ["\n\nContents of CLAUDE.md (instructions):\n\n", "\n\nContents of AGENTS.md (instructions):\n\n"]
            .iter()
            .map(|s| s.matches(c).count())
            .sum::<usize>()
        + "[agentd: the instructions are cut at 40000 characters: the last 20 characters of AGENTS.md and all of CLAUDE.local.md (5 characters) are left out]".matches(c).count()
}
