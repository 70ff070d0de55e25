//! System prompt templates.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use agentd_engine::prompt::{
    PLACEHOLDERS, PromptContext, PromptError, default_system_prompt, default_template, render,
    system_prompt, today,
};

const TOOLS: &[&str] = &["Bash", "Read", "Edit"];

fn ctx<'a>(allow: &'a [String], deny: &'a [String], ask: &'a [String]) -> PromptContext<'a> {
    PromptContext {
        workspace: Path::new("/srv/ws/s1"),
        tools: TOOLS,
        network: false,
        network_allow: None,
        sandboxed: true,
        permission_mode: "default",
        allow_rules: allow,
        deny_rules: deny,
        ask_rules: ask,
        skills: None,
        subagents: None,
        date: "2025-06-01",
        instructions: None,
        files: None,
    }
}

fn rules(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| item.to_string()).collect()
}

#[test]
fn default_template_describes_the_session() {
    let (allow, deny, ask) = (
        rules(&["Bash(git status)"]),
        rules(&["Read(.env)"]),
        rules(&["Bash(git push *)"]),
    );
    let prompt = system_prompt(None, None, &ctx(&allow, &deny, &ask)).unwrap();
    for needle in [
        "coding agent run by agentd",
        "workspace directory /srv/ws/s1",
        "paths outside it are refused",
        "Available tools: Bash, Read, Edit.",
        "Read a file before you edit it.",
        "the workspace is the only writable place",
        "Network access is off",
        "Permission mode `default`",
        "Always refused: `Read(.env)`.",
        "Allowed without asking: `Bash(git status)`.",
        "Always asks the user first: `Bash(git push *)`.",
        "finish with a short summary",
        "Today's date is 2025-06-01.",
    ] {
        assert!(
            prompt.contains(needle),
            "{needle:?} missing from:\n{prompt}"
        );
    }
    assert!(!prompt.contains("{{"), "{prompt}");
    assert!(!prompt.contains("\n\n\n"), "{prompt}");
    assert!(!prompt.ends_with('\n'));
}

#[test]
fn network_sandbox_and_mode_variants_are_described() {
    let none = Vec::new();
    let mut context = ctx(&none, &none, &none);
    context.network = true;
    context.permission_mode = "read_only";
    let prompt = system_prompt(None, None, &context).unwrap();
    assert!(prompt.contains("Network access is on."), "{prompt}");
    assert!(prompt.contains("Permission mode `read_only`: only Read, Glob, Grep, LS and WebFetch"));

    let hosts = rules(&["pypi.org", "*.github.com"]);
    context.network = false;
    context.network_allow = Some(&hosts);
    let prompt = system_prompt(None, None, &context).unwrap();
    assert!(prompt.contains("limited to these hosts"), "{prompt}");
    assert!(prompt.contains("pypi.org, *.github.com"), "{prompt}");
    assert!(!prompt.contains("Network access is off"), "{prompt}");

    context.sandboxed = false;
    context.permission_mode = "accept_edits";
    let prompt = system_prompt(None, None, &context).unwrap();
    assert!(prompt.contains("are not sandboxed"), "{prompt}");
    assert!(!prompt.contains("Network access is off"), "{prompt}");
    assert!(prompt.contains("file edits (Write, Edit, MultiEdit) run freely"));
}

#[test]
fn no_rules_skills_or_subagents_leave_no_headings() {
    let none = Vec::new();
    let prompt = system_prompt(None, None, &ctx(&none, &none, &none)).unwrap();
    for absent in [
        "# Skills",
        "Skill tool",
        "# Subagents",
        "Task tool",
        "Always refused",
        "Allowed without asking",
        "Always asks",
    ] {
        assert!(!prompt.contains(absent), "{absent:?} in:\n{prompt}");
    }
    assert!(prompt.contains("# Permissions\n"));
    assert!(
        prompt.contains("tell the user what you could not do and why.\n\n# Working style\n"),
        "{prompt}"
    );
    assert!(!prompt.contains("\n\n\n"), "{prompt}");
}

#[test]
fn skills_and_subagents_get_their_sections() {
    let none = Vec::new();
    let mut context = ctx(&none, &none, &none);
    context.skills = Some("- pdf: Fill PDF forms.\n- review: Review a change.");
    context.subagents = Some("- explorer: Searches the code base.");
    let prompt = system_prompt(None, None, &context).unwrap();
    assert!(prompt.contains("# Skills\n"), "{prompt}");
    assert!(prompt.contains("use the Skill tool to load that skill's instructions"));
    assert!(
        prompt.contains("\n- pdf: Fill PDF forms.\n- review: Review a change.\n\n# Subagents\n")
    );
    assert!(prompt.contains("use the Task tool with `subagent_type`"));
    assert!(prompt.contains("\n- explorer: Searches the code base.\n\n# Working style"));
    // An empty listing counts as none.
    context.skills = Some("  ");
    let prompt = system_prompt(None, None, &context).unwrap();
    assert!(!prompt.contains("# Skills"), "{prompt}");
}

#[test]
fn unknown_placeholders_are_errors_naming_them() {
    let none = Vec::new();
    let context = ctx(&none, &none, &none);
    let error = render("Work in {{workspace}}.\nTools: {{ tool }}", &context).unwrap_err();
    assert_eq!(
        error,
        PromptError::UnknownPlaceholder {
            name: "tool".into(),
            line: 2,
            template: "template",
        }
    );
    let message = error.to_string();
    assert!(
        message.starts_with("unknown placeholder `{{tool}}` on line 2 of the template"),
        "{message}"
    );
    assert!(
        message.contains("known placeholders: workspace, tools, sandbox"),
        "{message}"
    );

    let error = system_prompt(Some("ok"), Some("{{nope}}"), &context).unwrap_err();
    assert!(
        error.to_string().contains("of the appended prompt"),
        "{error}"
    );
    let error = system_prompt(Some("{{nope}}"), None, &context).unwrap_err();
    assert!(
        error.to_string().contains("of the system prompt"),
        "{error}"
    );
}

#[test]
fn render_substitutes_inline_and_leaves_other_braces_alone() {
    let none = Vec::new();
    let context = ctx(&none, &none, &none);
    let rendered = render(
        "In {{workspace}} on {{ date }} with {{tools}}. Code: {{ a: 1 }}, {{, {{#each}} and }}.",
        &context,
    )
    .unwrap();
    assert_eq!(
        rendered,
        "In /srv/ws/s1 on 2025-06-01 with Bash, Read, Edit. Code: {{ a: 1 }}, {{, {{#each}} and }}."
    );
    for name in PLACEHOLDERS {
        assert!(
            render(&format!("{{{{{name}}}}}"), &context).is_ok(),
            "{name}"
        );
    }
    let mut no_tools = context;
    no_tools.tools = &[];
    assert_eq!(render("{{tools}}", &no_tools).unwrap(), "none");
}

#[test]
fn empty_standalone_sections_vanish_with_their_blank_lines() {
    let none = Vec::new();
    let context = ctx(&none, &none, &none);
    let template = "Intro\n\n{{skills}}\n\n{{subagents}}\n\nEnd\n";
    assert_eq!(render(template, &context).unwrap(), "Intro\n\nEnd\n");
    assert_eq!(render("{{skills}}\n\nEnd", &context).unwrap(), "End");
    assert_eq!(
        render("Intro\n\n{{skills}}\n", &context).unwrap(),
        "Intro\n"
    );
    assert_eq!(render("A\n{{skills}}\nB", &context).unwrap(), "A\nB");
    // Blank lines away from a vanished section are the template's own.
    assert_eq!(render("A\n\n\nB", &context).unwrap(), "A\n\n\nB");
}

#[test]
fn append_comes_after_a_blank_line() {
    let none = Vec::new();
    let context = ctx(&none, &none, &none);
    let prompt = system_prompt(
        Some("Custom for {{workspace}}.\n"),
        Some("Also: today is {{date}}."),
        &context,
    )
    .unwrap();
    assert_eq!(
        prompt,
        "Custom for /srv/ws/s1.\n\nAlso: today is 2025-06-01."
    );

    let prompt = system_prompt(None, Some("House rules: be terse."), &context).unwrap();
    let default = system_prompt(None, None, &context).unwrap();
    assert_eq!(prompt, format!("{default}\n\nHouse rules: be terse."));
    assert_eq!(
        system_prompt(None, Some("  \n"), &context).unwrap(),
        default
    );
}

#[test]
fn long_rule_lists_are_summarized() {
    let many: Vec<String> = (0..60).map(|n| format!("Bash(cmd{n})")).collect();
    let none = Vec::new();
    let prompt = system_prompt(None, None, &ctx(&many, &none, &none)).unwrap();
    assert!(prompt.contains("`Bash(cmd49)` and 10 more."), "{prompt}");
    assert!(!prompt.contains("cmd50"));
}

#[test]
fn the_convenience_wrapper_uses_the_default_template() {
    let prompt = default_system_prompt(Path::new("/w"), &["Read"]);
    assert!(prompt.contains("workspace directory /w"));
    assert!(prompt.contains("Available tools: Read."));
    assert!(prompt.contains(&format!("Today's date is {}.", today())));
    assert!(default_template().contains("{{permissions}}"));
    let date = today();
    assert_eq!(date.len(), 10, "{date}");
    assert!(date.starts_with("20"), "{date}");
}

#[test]
fn file_placeholders_and_instructions() {
    use std::collections::BTreeMap;
    let template =
        "Spec:\n{{file:app_spec.txt}}\nOther: {{ file:docs/a.md }} {{file:app_spec.txt}}";
    let paths = agentd_engine::prompt::file_placeholders([template]);
    assert_eq!(paths, ["app_spec.txt", "docs/a.md"]);
    let files = BTreeMap::from([(
        "app_spec.txt".to_string(),
        "Build a todo app.\n".to_string(),
    )]);
    let (allow, deny, ask) = (rules(&[]), rules(&[]), rules(&[]));
    let context = PromptContext {
        files: Some(&files),
        instructions: Some("# Project instructions\nUse tabs."),
        ..ctx(&allow, &deny, &ask)
    };
    let prompt = system_prompt(Some(template), None, &context).unwrap();
    assert!(
        prompt.starts_with(
            "Spec:\nBuild a todo app.\nOther: [agentd: {{file:docs/a.md}} was not read]"
        ),
        "{prompt}"
    );
    // A template that does not place the instructions gets them at its end.
    assert!(
        prompt.ends_with("# Project instructions\nUse tabs."),
        "{prompt}"
    );
    let placed = system_prompt(Some("A\n{{instructions}}\nB"), None, &context).unwrap();
    assert_eq!(placed, "A\n# Project instructions\nUse tabs.\nB");
    // The default template places them after the rest.
    let default = system_prompt(None, None, &context).unwrap();
    assert!(default.trim_end().ends_with("Use tabs."), "{default}");
}
