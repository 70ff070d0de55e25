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
