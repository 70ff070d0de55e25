//! Rule tables for the non-shell tools, modes and rule parsing (shell tables are in
//! `tests_bash.rs`).

use std::path::Path;

use serde_json::{Value, json};

use super::*;

pub(super) const WS: &str = "/work/ws";
pub(super) const HOME: &str = "/home/u";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum E {
    Allow,
    Deny,
    Ask,
}

pub(super) fn kind(v: &Verdict) -> E {
    match v {
        Verdict::Allow => E::Allow,
        Verdict::Deny { .. } => E::Deny,
        Verdict::Ask { .. } => E::Ask,
    }
}

fn strings(rules: &[&str]) -> Vec<String> {
    rules.iter().map(|s| (*s).to_owned()).collect()
}

pub(super) fn policy(
    mode: PermissionMode,
    allow: &[&str],
    deny: &[&str],
    ask: &[&str],
) -> PermissionPolicy {
    match PermissionPolicy::with_home(
        mode,
        &strings(allow),
        &strings(deny),
        &strings(ask),
        Some(HOME.into()),
    ) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

/// Tools the registry marks read-only.
pub(super) fn read_only_tool(tool: &str) -> bool {
    matches!(
        tool,
        "Read" | "Glob" | "Grep" | "LS" | "WebFetch" | "BashOutput"
    )
}

pub(super) fn decide(p: &PermissionPolicy, tool: &str, input: &Value) -> Verdict {
    p.evaluate(&ToolCallView {
        tool,
        input,
        read_only: read_only_tool(tool),
        workspace: Path::new(WS),
    })
}

/// One row: mode, allow, deny, ask, tool, input, expected.
type Row<'a> = (
    PermissionMode,
    &'a [&'a str],
    &'a [&'a str],
    &'a [&'a str],
    &'a str,
    Value,
    E,
);

fn run_table(rows: &[Row<'_>]) {
    let mut failures = Vec::new();
    for (mode, allow, deny, ask, tool, input, want) in rows {
        let got = decide(&policy(*mode, allow, deny, ask), tool, input);
        if kind(&got) != *want {
            failures.push(format!(
                "{mode:?} allow={allow:?} deny={deny:?} ask={ask:?} {tool} {input}: want {want:?}, got {got:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing rows:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

use PermissionMode::{AcceptEdits, Bypass, Default as Dflt, ReadOnly};

fn fp(p: &str) -> Value {
    json!({ "file_path": p })
}

fn dir(p: &str) -> Value {
    json!({ "pattern": "*", "path": p })
}

fn url(u: &str) -> Value {
    json!({ "url": u, "prompt": "summarise" })
}

#[test]
#[rustfmt::skip]
fn permissions_file_rules_table() {
    let env: &[&str] = &["Read(.env)"];
    let rows: Vec<Row<'_>> = vec![
        // `Read(.env)` blocks every spelling of the file, at any depth.
        (Dflt, &[], env, &[], "Read", fp(".env"), E::Deny),
        (Dflt, &[], env, &[], "Read", fp("./.env"), E::Deny),
        (Dflt, &[], env, &[], "Read", fp("a/../.env"), E::Deny),
        (Dflt, &[], env, &[], "Read", fp("/work/ws/.env"), E::Deny),
        (Dflt, &[], env, &[], "Read", fp("/work/ws/sub/../.env"), E::Deny),
        (Dflt, &[], env, &[], "Read", fp("/work/ws/./.env"), E::Deny),
        (Dflt, &[], env, &[], "Read", fp("sub/.env"), E::Deny),
        (Dflt, &[], env, &[], "Read", fp(".env.example"), E::Allow),
        (Dflt, &[], env, &[], "Read", fp("src/main.rs"), E::Allow),
        (Dflt, &[], env, &[], "Grep", json!({"pattern": "KEY", "path": ".env"}), E::Deny),
        (Dflt, &[], env, &[], "Glob", dir("./.env"), E::Deny),
        (Dflt, &[], env, &[], "LS", json!({"path": "sub/../.env"}), E::Deny),
        (Dflt, &[], env, &[], "LS", json!({}), E::Allow),
        (Bypass, &[], env, &[], "Read", fp(".env"), E::Deny),
        (ReadOnly, &[], env, &[], "Read", fp(".env"), E::Deny),
        // Read rules are not Edit rules.
        (AcceptEdits, &[], env, &[], "Write", fp(".env"), E::Allow),
        // `*.md` matches at any depth; Edit covers Edit, MultiEdit and Write.
        (Dflt, &["Edit(*.md)"], &[], &[], "Edit", fp("README.md"), E::Allow),
        (Dflt, &["Edit(*.md)"], &[], &[], "Edit", fp("docs/a/b.md"), E::Allow),
        (Dflt, &["Edit(*.md)"], &[], &[], "Write", fp("notes.md"), E::Allow),
        (Dflt, &["Edit(*.md)"], &[], &[], "MultiEdit", fp("/work/ws/x.md"), E::Allow),
        (Dflt, &["Edit(*.md)"], &[], &[], "Edit", fp("src/lib.rs"), E::Ask),
        (Dflt, &["Edit(*.md)"], &[], &[], "Edit", fp("README.md.rs"), E::Ask),
        (Dflt, &["Edit(*.md)"], &[], &[], "Edit", fp("/elsewhere/x.md"), E::Ask),
        // `src/**` is anchored at the workspace root.
        (Dflt, &["Edit(src/**)"], &[], &[], "Edit", fp("src/a/b.rs"), E::Allow),
        (Dflt, &["Edit(src/**)"], &[], &[], "Edit", fp("./src/x.rs"), E::Allow),
        (Dflt, &["Edit(src/**)"], &[], &[], "Edit", fp("/work/ws/src/x.rs"), E::Allow),
        (Dflt, &["Edit(src/**)"], &[], &[], "Edit", fp("other/src/x.rs"), E::Ask),
        (Dflt, &["Edit(src/**)"], &[], &[], "Edit", fp("src/../lib.rs"), E::Ask),
        (Dflt, &["Edit(src/**)"], &[], &[], "Edit", fp("srcx/a.rs"), E::Ask),
        (Dflt, &["Edit(./src/*.rs)"], &[], &[], "Edit", fp("src/a.rs"), E::Allow),
        (Dflt, &["Edit(./src/*.rs)"], &[], &[], "Edit", fp("src/a/b.rs"), E::Ask),
        // `/path`: workspace root (Claude Code) and also the absolute path.
        (Dflt, &["Edit(/src/**)"], &[], &[], "Edit", fp("src/a.rs"), E::Allow),
        (Dflt, &["Edit(/src/**)"], &[], &[], "Edit", fp("/src/a.rs"), E::Allow),
        (Dflt, &["Edit(/src/**)"], &[], &[], "Edit", fp("lib/src/a.rs"), E::Ask),
        // `//abs` and `~/`.
        (Dflt, &["Edit(//tmp/**)"], &[], &[], "Write", fp("/tmp/x"), E::Allow),
        (Dflt, &["Edit(//tmp/**)"], &[], &[], "Write", fp("tmp/x"), E::Ask),
        (Dflt, &["Edit(~/notes/**)"], &[], &[], "Write", fp("~/notes/a.txt"), E::Allow),
        (Dflt, &["Edit(~/notes/**)"], &[], &[], "Write", fp("/home/u/notes/a.txt"), E::Allow),
        (Dflt, &["Edit(~/notes/**)"], &[], &[], "Write", fp("/home/v/notes/a.txt"), E::Ask),
        (Dflt, &[], &["Read(~/.ssh/**)"], &[], "Read", fp("~/.ssh/id_rsa"), E::Deny),
        (Dflt, &[], &["Read(~/.ssh/**)"], &[], "Read", fp("/home/u/./.ssh/id_rsa"), E::Deny),
        (Dflt, &[], &["Read(~/.ssh/**)"], &[], "LS", json!({"path": "/home/u/.ssh"}), E::Deny),
        (Dflt, &[], &["Read(//etc/**)"], &[], "Read", fp("/etc/passwd"), E::Deny),
        (Dflt, &[], &["Read(//etc/**)"], &[], "Read", fp("../../../etc/passwd"), E::Deny),
        // `~user` cannot be resolved: a path deny rule then asks.
        (Dflt, &[], &["Read(//etc/**)"], &[], "Read", fp("~root/x"), E::Ask),
        // A trailing `/` means the directory and everything below; so does a bare name.
        (Dflt, &[], &["Read(secrets)"], &[], "Read", fp("sub/secrets/a/b"), E::Deny),
        (Dflt, &[], &["Read(./.env)"], &[], "Read", fp(".env"), E::Deny),
        (Dflt, &[], &["Read(./.env)"], &[], "Read", fp("sub/.env"), E::Allow),
        (Dflt, &[], &["Read(secrets/)"], &[], "Read", fp("secrets/a/b"), E::Deny),
        (Dflt, &[], &["Read(secrets/)"], &[], "LS", json!({"path": "secrets"}), E::Deny),
        (Dflt, &[], &["Read(secrets/**)"], &[], "LS", json!({"path": "./secrets"}), E::Deny),
        // Edits under .git are denied even in bypass.
        (Bypass, &[], &["Edit(.git/**)"], &[], "Write", fp(".git/config"), E::Deny),
        (Bypass, &[], &["Edit(.git/**)"], &[], "Write", fp("src/.git/x"), E::Allow),
        // Path rules on a single tool.
        (Dflt, &[], &["Grep(vendor/**)"], &[], "Grep", dir("vendor/x"), E::Deny),
        (Dflt, &[], &["Grep(vendor/**)"], &[], "Read", fp("vendor/x"), E::Allow),
        // deny > allow > ask.
        (Dflt, &["Edit(src/**)"], &["Edit(src/gen/**)"], &[], "Edit", fp("src/gen/a.rs"), E::Deny),
        (Dflt, &[], &[], &["Read(secrets/**)"], "Read", fp("secrets/k"), E::Ask),
        (Dflt, &["Read(secrets/pub/**)"], &[], &["Read(secrets/**)"], "Read", fp("secrets/pub/k"), E::Allow),
        (AcceptEdits, &[], &[], &["Edit(Cargo.toml)"], "Edit", fp("Cargo.toml"), E::Ask),
    ];
    run_table(&rows);
}

#[test]
#[rustfmt::skip]
fn permissions_webfetch_and_mcp_table() {
    let ex: &[&str] = &["WebFetch(domain:example.com)"];
    let rows: Vec<Row<'_>> = vec![
        (Dflt, &[], ex, &[], "WebFetch", url("https://example.com/x"), E::Deny),
        (Dflt, &[], ex, &[], "WebFetch", url("https://docs.example.com/x"), E::Deny),
        (Dflt, &[], ex, &[], "WebFetch", url("HTTPS://EXAMPLE.COM./"), E::Deny),
        (Dflt, &[], ex, &[], "WebFetch", url("http://user:pw@example.com:8080/"), E::Deny),
        (Dflt, &[], ex, &[], "WebFetch", url("https://evil-example.com/"), E::Ask),
        (Dflt, &[], ex, &[], "WebFetch", url("https://example.com.evil.net/"), E::Ask),
        (Dflt, &[], ex, &[], "WebFetch", url("https://example.com@evil.net/"), E::Ask),
        (Dflt, &[], &["WebFetch"], &[], "WebFetch", url("https://a.b/"), E::Deny),
        (Dflt, ex, &[], &[], "WebFetch", url("https://docs.example.com/"), E::Allow),
        (AcceptEdits, &[], &[], &[], "WebFetch", url("https://a.b/"), E::Ask),
        (ReadOnly, &[], &[], &[], "WebFetch", url("https://a.b/"), E::Allow),
        (ReadOnly, &[], &[], &["WebFetch(domain:a.b)"], "WebFetch", url("https://a.b/"), E::Ask),
        (Bypass, &[], ex, &[], "WebFetch", url("https://www.example.com/"), E::Deny),
        // MCP tools (not read-only): allow rules by server glob, server name, exact name.
        (Dflt, &["mcp__github__*"], &[], &[], "mcp__github__create_issue", json!({}), E::Allow),
        (Dflt, &["mcp__github__*"], &[], &[], "mcp__githubx__a", json!({}), E::Ask),
        (Dflt, &["mcp__github__*"], &[], &[], "mcp__gitlab__a", json!({}), E::Ask),
        (Dflt, &["mcp__github"], &[], &[], "mcp__github__list", json!({}), E::Allow),
        (Dflt, &["mcp__github"], &[], &[], "mcp__github_enterprise__list", json!({}), E::Ask),
        (Dflt, &["mcp__github__list"], &[], &[], "mcp__github__list", json!({}), E::Allow),
        (Dflt, &["mcp__github__list"], &[], &[], "mcp__github__delete", json!({}), E::Ask),
        (Dflt, &["mcp__*"], &[], &[], "mcp__any__thing", json!({}), E::Allow),
        (Bypass, &[], &["mcp__github__*"], &[], "mcp__github__delete", json!({}), E::Deny),
        (Bypass, &[], &["mcp__github__*"], &[], "mcp__slack__post", json!({}), E::Allow),
        (ReadOnly, &["mcp__github__*"], &[], &[], "mcp__github__list", json!({}), E::Deny),
    ];
    run_table(&rows);
    // A URL that does not parse never matches an allow rule.
    let p = policy(Dflt, ex, &[], &[]);
    let mut failures = Vec::new();
    for (u, want) in [
        ("https://docs.example.com/a", E::Allow),
        ("https://example.com", E::Allow),
        ("https://evil-example.com", E::Ask),
        ("example.com/x", E::Ask),
        ("not a url", E::Ask),
        ("ftp://example.com/", E::Ask),
        ("file:///etc/passwd", E::Ask),
    ] {
        let input = url(u);
        let call = ToolCallView {
            tool: "WebFetch",
            input: &input,
            read_only: false,
            workspace: Path::new(WS),
        };
        let got = p.evaluate(&call);
        if kind(&got) != want {
            failures.push(format!("{u}: want {want:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
#[rustfmt::skip]
fn permissions_modes_table() {
    let w = || fp("src/a.rs");
    let b = || json!({"command": "git status"});
    let rows: Vec<Row<'_>> = vec![
        (Dflt, &[], &[], &[], "Read", fp("a"), E::Allow),
        (Dflt, &[], &[], &[], "Grep", dir("."), E::Allow),
        (Dflt, &[], &[], &[], "Write", w(), E::Ask),
        (Dflt, &[], &[], &[], "Bash", b(), E::Ask),
        (Dflt, &[], &[], &[], "TodoWrite", json!({}), E::Ask),
        (Dflt, &["Write"], &[], &[], "Write", w(), E::Allow),
        (Dflt, &["Edit"], &[], &[], "Write", w(), E::Allow),
        (AcceptEdits, &[], &[], &[], "Write", w(), E::Allow),
        (AcceptEdits, &[], &[], &[], "Edit", w(), E::Allow),
        (AcceptEdits, &[], &[], &[], "MultiEdit", w(), E::Allow),
        (AcceptEdits, &[], &[], &[], "Read", w(), E::Allow),
        (AcceptEdits, &[], &[], &[], "Bash", b(), E::Ask),
        (AcceptEdits, &[], &[], &[], "mcp__x__y", json!({}), E::Ask),
        (AcceptEdits, &[], &["Edit(src/**)"], &[], "Write", w(), E::Deny),
        (ReadOnly, &[], &[], &[], "Read", w(), E::Allow),
        (ReadOnly, &[], &[], &[], "Glob", dir("."), E::Allow),
        (ReadOnly, &[], &[], &[], "LS", json!({}), E::Allow),
        (ReadOnly, &[], &[], &[], "Write", w(), E::Deny),
        (ReadOnly, &["Write"], &[], &[], "Write", w(), E::Deny),
        (ReadOnly, &["Edit(src/**)"], &[], &[], "Edit", w(), E::Deny),
        (ReadOnly, &["Bash(git status)"], &[], &[], "Bash", b(), E::Deny),
        (ReadOnly, &["Bash"], &[], &[], "Bash", b(), E::Deny),
        (ReadOnly, &[], &[], &[], "TodoWrite", json!({}), E::Allow),
        (ReadOnly, &[], &[], &[], "Task", json!({}), E::Allow),
        (ReadOnly, &[], &["Task"], &[], "Task", json!({}), E::Deny),
        (ReadOnly, &[], &[], &[], "Bash", json!({"command": "ls"}), E::Deny),
        (Bypass, &[], &[], &[], "Write", w(), E::Allow),
        (Bypass, &[], &[], &[], "Bash", json!({"command": "rm -rf /"}), E::Allow),
        (Bypass, &[], &[], &[], "mcp__x__y", json!({}), E::Allow),
        (Bypass, &[], &["Write"], &[], "Write", w(), E::Deny),
        (Bypass, &[], &[], &["Write"], "Write", w(), E::Ask),
        (Bypass, &["Write"], &["Write"], &[], "Write", w(), E::Deny),
        (Dflt, &["TodoWrite"], &[], &["TodoWrite"], "TodoWrite", json!({}), E::Allow),
        (Dflt, &[], &[], &["Read"], "Read", fp("a"), E::Ask),
    ];
    run_table(&rows);
}

#[test]
#[rustfmt::skip]
fn permissions_background_shell_tools_table() {
    let bg = || json!({"command": "npm run dev", "run_in_background": true});
    let kill = || json!({"shell_id": "bash_1"});
    let out = || json!({"bash_id": "bash_1"});
    let rows: Vec<Row<'_>> = vec![
        // A background command is judged as the same command in the foreground.
        (Dflt, &[], &[], &[], "Bash", bg(), E::Ask),
        (Dflt, &["Bash(npm run *)"], &[], &[], "Bash", bg(), E::Allow),
        (Dflt, &["Bash"], &["Bash(npm *)"], &[], "Bash", bg(), E::Deny),
        (ReadOnly, &["Bash"], &[], &[], "Bash", bg(), E::Deny),
        // KillShell goes with every-call Bash rules, not with command patterns.
        (Dflt, &[], &[], &[], "KillShell", kill(), E::Ask),
        (Dflt, &["Bash"], &[], &[], "KillShell", kill(), E::Allow),
        (Dflt, &["Bash(*)"], &[], &[], "KillShell", kill(), E::Allow),
        (Dflt, &["KillShell"], &[], &[], "KillShell", kill(), E::Allow),
        (Dflt, &["Bash(npm run *)"], &[], &[], "KillShell", kill(), E::Ask),
        (Bypass, &[], &["Bash"], &[], "KillShell", kill(), E::Deny),
        (Bypass, &[], &[], &["Bash"], "KillShell", kill(), E::Ask),
        (Bypass, &[], &["Bash(rm *)"], &[], "KillShell", kill(), E::Allow),
        (ReadOnly, &["Bash"], &[], &[], "KillShell", kill(), E::Deny),
        // BashOutput reads.
        (Dflt, &[], &[], &[], "BashOutput", out(), E::Allow),
        (ReadOnly, &[], &[], &[], "BashOutput", out(), E::Allow),
        (Bypass, &[], &["BashOutput"], &[], "BashOutput", out(), E::Deny),
    ];
    run_table(&rows);
    // A whole-tool Bash rule still decides Bash calls.
    let p = policy(Dflt, &["Bash"], &[], &[]);
    assert_eq!(decide(&p, "Bash", &json!({"command": "ls"})), Verdict::Allow);
}

#[test]
fn permissions_reasons_are_readable() {
    let p = policy(ReadOnly, &["Write"], &["Read(.env)"], &[]);
    let Verdict::Deny { reason } = decide(&p, "Write", &fp("a")) else {
        panic!("not denied")
    };
    assert!(
        reason.contains("read_only") && reason.contains("allow rule Write"),
        "{reason}"
    );
    let Verdict::Deny { reason } = decide(&p, "Read", &fp("./.env")) else {
        panic!("not denied")
    };
    assert_eq!(reason, "denied by rule Read(.env)");
    let p = policy(Dflt, &[], &[], &[]);
    let Verdict::Ask { reason } = decide(&p, "Write", &fp("src/a.rs")) else {
        panic!("no ask")
    };
    assert_eq!(reason, "Write(src/a.rs) is not in the allow list");
}

#[test]
#[rustfmt::skip]
fn permissions_invalid_rules_are_errors() {
    let bad = [
        ("Bash(", "missing its closing"),
        ("Bash(git status", "missing its closing"),
        ("(git status)", "empty tool name"),
        ("", "empty tool name"),
        ("Bash)", "unbalanced"),
        ("Bash()", "empty pattern"),
        ("Bash(echo \"x)", "cannot parse"),
        ("Bash(X=1)", "names no command"),
        ("Bash(PATH=/tmp git status)", "can never be allowed"),
        ("Bash(a; b:*)", "single command"),
        ("Ba*sh", "only works for MCP"),
        ("Bash git", "not a tool name"),
        ("TodoWrite(x)", "take no pattern"),
        ("mcp__github__list(x)", "take no pattern"),
        ("Read(../x)", "`..`"),
        ("Read(a/[)", "bad glob"),
        ("WebFetch(example.com)", "domain:"),
        ("WebFetch(domain:)", "not a host"),
        ("WebFetch(domain:a/b)", "not a host"),
        ("WebFetch(domain:http://a.b)", "not a host"),
    ];
    let mut failures = Vec::new();
    for (rule, why) in bad {
        match PermissionPolicy::with_home(Dflt, &[rule.to_owned()], &[], &[], Some(HOME.into())) {
            Ok(_) => failures.push(format!("{rule:?} was accepted")),
            Err(e) => {
                let msg = e.to_string();
                if !msg.contains(why) || e.rule() != rule.trim() {
                    failures.push(format!("{rule:?}: {msg}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // The list a rule is in does not matter; nor does runtime `allow`.
    let strings = |r: &str| vec![r.to_owned()];
    assert!(PermissionPolicy::new(Dflt, &[], &strings("Bash("), &[]).is_err());
    assert!(PermissionPolicy::new(Dflt, &[], &[], &strings("Read(../x)")).is_err());
    let mut p = policy(Dflt, &[], &[], &[]);
    assert!(p.allow("Bash(").is_err());
    // `~` without a home directory is an error, not a silent never-match.
    let err = PermissionPolicy::with_home(Dflt, &[], &strings("Read(~/.ssh/**)"), &[], None);
    assert!(err.is_err_and(|e| e.reason().contains("HOME")));
}

#[test]
#[rustfmt::skip]
fn permissions_good_rules_parse() {
    let good = [
        "Bash",
        "Bash(*)",
        "Bash(git status)",
        "Bash(npm run *)",
        "Bash(npm run:*)",
        "Bash(echo \"(a)\")",
        "Bash(git commit -m \"fix (x)\")",
        "Read",
        "Read(**)",
        "Read(.env)",
        "Edit(src/**)",
        "Edit(//tmp/x)",
        "Edit(~/x)",
        "Edit(/abs)",
        "Glob(*.rs)",
        "LS(./a/)",
        "WebFetch",
        "WebFetch(domain:docs.rs)",
        "WebFetch(domain:*.example.com)",
        "mcp__github__*",
        "mcp__github",
        "mcp__github__create_issue",
        "TodoWrite",
        " Bash ",
    ];
    for rule in good {
        let r = PermissionPolicy::with_home(Dflt, &[rule.to_owned()], &[], &[], Some(HOME.into()));
        assert!(r.is_ok(), "{rule}: {:?}", r.err());
    }
}

#[test]
fn permissions_mode_serde_and_read_denied_by() {
    let mode: PermissionMode = serde_json::from_value(json!("accept_edits")).unwrap();
    assert_eq!(mode, AcceptEdits);
    assert_eq!(serde_json::to_value(ReadOnly).unwrap(), json!("read_only"));
    assert_eq!(PermissionMode::default(), Dflt);
    assert_eq!(policy(Bypass, &[], &[], &[]).mode(), Bypass);
    let p = policy(Dflt, &[], &["Read(.env)", "Read(secrets/**)", "Write"], &[]);
    let ws = Path::new(WS);
    assert_eq!(
        p.read_denied_by(Path::new("sub/.env"), ws),
        Some("Read(.env)")
    );
    assert_eq!(
        p.read_denied_by(Path::new("/work/ws/secrets/a"), ws),
        Some("Read(secrets/**)")
    );
    assert_eq!(p.read_denied_by(Path::new("src/main.rs"), ws), None);
}

#[test]
fn permissions_session_rules_for_other_tools() {
    let view = |tool, input: &Value| {
        PermissionPolicy::session_rule_for(&ToolCallView {
            tool,
            input,
            read_only: false,
            workspace: Path::new(WS),
        })
    };
    assert_eq!(view("Write", &fp("a")), "Edit");
    assert_eq!(view("MultiEdit", &fp("a")), "Edit");
    assert_eq!(view("Edit", &fp("a")), "Edit");
    assert_eq!(view("mcp__github__list", &json!({})), "mcp__github__list");
    assert_eq!(view("TodoWrite", &json!({})), "TodoWrite");
    assert_eq!(
        view("WebFetch", &url("https://Docs.RS/x")),
        "WebFetch(domain:docs.rs)"
    );
    assert_eq!(view("WebFetch", &url("nope")), "WebFetch");
    // Adding the rule makes the same call allowed.
    for (tool, input) in [
        ("Write", fp("src/a.rs")),
        ("mcp__github__list", json!({})),
        ("WebFetch", url("https://docs.rs/x")),
    ] {
        let mut p = policy(Dflt, &[], &[], &[]);
        let call = ToolCallView {
            tool,
            input: &input,
            read_only: false,
            workspace: Path::new(WS),
        };
        assert_eq!(kind(&p.evaluate(&call)), E::Ask);
        p.allow(&PermissionPolicy::session_rule_for(&call)).unwrap();
        assert_eq!(p.evaluate(&call), Verdict::Allow, "{tool}");
    }
}

#[test]
fn dont_ask_denies_what_would_ask_and_keeps_the_rest() {
    let p = policy(PermissionMode::DontAsk, &["Write"], &[], &["Edit"]);
    let call = |tool: &str, input: Value| kind(&decide(&p, tool, &input));
    assert_eq!(call("Read", json!({"file_path": "a.txt"})), E::Allow);
    assert_eq!(
        call("Write", json!({"file_path": "a.txt", "content": ""})),
        E::Allow
    );
    assert_eq!(
        call("Edit", json!({"file_path": "a.txt"})),
        E::Deny,
        "an ask rule denies"
    );
    assert_eq!(call("Bash", json!({"command": "touch x"})), E::Deny);
    let Verdict::Deny { reason } = decide(&p, "Bash", &json!({"command": "touch y"})) else {
        panic!("denied");
    };
    assert!(reason.contains("dontAsk"), "{reason}");
}

#[test]
fn a_mode_is_looser_only_when_it_lets_more_run_unasked() {
    use PermissionMode::*;
    assert!(Bypass.is_looser_than(AcceptEdits));
    assert!(AcceptEdits.is_looser_than(Default));
    assert!(Default.is_looser_than(ReadOnly));
    assert!(Default.is_looser_than(DontAsk));
    // Neither of the two strictest replaces the other: each lets run
    // something the other does not.
    assert!(ReadOnly.is_looser_than(DontAsk));
    assert!(DontAsk.is_looser_than(ReadOnly));
    assert!(!ReadOnly.is_looser_than(ReadOnly));
    assert!(!DontAsk.is_looser_than(Default));
    assert!(!ReadOnly.is_looser_than(Bypass));
    assert!(!Default.is_looser_than(Default));
}
