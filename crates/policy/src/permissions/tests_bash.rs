//! Rule tables for `Bash`: compound commands, quoting, environment prefixes,
//! redirections, wrappers, pattern forms, parser failures and session rules.

use std::path::Path;

use serde_json::json;

use super::tests::{E, HOME, WS, kind, policy};
use super::*;

use PermissionMode::{Bypass, Default as Dflt, ReadOnly};

/// mode, allow, deny, command, expected.
type Row<'a> = (PermissionMode, &'a [&'a str], &'a [&'a str], &'a str, E);

fn bash(p: &PermissionPolicy, command: &str) -> Verdict {
    let input = json!({ "command": command });
    p.evaluate(&ToolCallView {
        tool: "Bash",
        input: &input,
        read_only: false,
        workspace: Path::new(WS),
    })
}

fn run(rows: &[Row<'_>]) {
    let mut failures = Vec::new();
    for (mode, allow, deny, command, want) in rows {
        let got = bash(&policy(*mode, allow, deny, &[]), command);
        if kind(&got) != *want {
            failures.push(format!(
                "{mode:?} allow={allow:?} deny={deny:?} {command:?}: want {want:?}, got {got:?}"
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

const GS: &[&str] = &["Bash(git status)"];
const ECHO: &[&str] = &["Bash(echo *)"];
const RM: &[&str] = &["Bash(rm *)"];
const NONE: &[&str] = &[];

#[test]
#[rustfmt::skip]
fn permissions_bash_compound_commands() {
    run(&[
        (Dflt, GS, NONE, "git status", E::Allow),
        (Dflt, GS, NONE, "git status; rm -rf x", E::Ask),
        (Dflt, GS, NONE, "git status && rm x", E::Ask),
        (Dflt, GS, NONE, "git status || rm x", E::Ask),
        (Dflt, GS, NONE, "git status | sh", E::Ask),
        (Dflt, GS, NONE, "git status |& sh", E::Ask),
        (Dflt, GS, NONE, "git status & rm x", E::Ask),
        (Dflt, GS, NONE, "git status &", E::Allow),
        (Dflt, GS, NONE, "git status\nrm x", E::Ask),
        (Dflt, GS, NONE, "git status\n\ngit status # twice", E::Allow),
        (Dflt, GS, NONE, "! git status", E::Allow),
        (Dflt, GS, NONE, "time git status", E::Allow),
        (Dflt, ECHO, NONE, "echo $(rm x)", E::Ask),
        (Dflt, ECHO, NONE, "echo `rm x`", E::Ask),
        (Dflt, ECHO, NONE, "echo \"$(rm x)\"", E::Ask),
        (Dflt, ECHO, NONE, "echo \"a `rm x` b\"", E::Ask),
        (Dflt, ECHO, NONE, "echo ${x:-$(rm y)}", E::Ask),
        (Dflt, ECHO, NONE, "echo $(echo $(rm x))", E::Ask),
        (Dflt, ECHO, NONE, "echo $(echo hi)", E::Allow),
        (Dflt, &["Bash(diff *)"], NONE, "diff <(rm x) a", E::Ask),
        (Dflt, &["Bash(diff *)", "Bash(ls *)"], NONE, "diff <(ls a) <(ls b)", E::Allow),
        (Dflt, &["Bash(cat)"], NONE, "cat <<EOF\n$(rm x)\nEOF", E::Ask),
        (Dflt, &["Bash(cat)"], NONE, "cat <<'EOF'\n$(rm x)\nEOF", E::Allow),
        (Dflt, &["Bash(cat)"], NONE, "cat <<< \"$(rm x)\"", E::Ask),
        (Dflt, GS, NONE, "(rm x)", E::Ask),
        (Dflt, RM, NONE, "(rm x)", E::Allow),
        (Dflt, GS, NONE, "{ rm x; }", E::Ask),
        (Dflt, &["Bash(true)"], NONE, "if true; then rm x; fi", E::Ask),
        (Dflt, &["Bash(true)", "Bash(rm *)"], NONE, "if true; then rm x; fi", E::Allow),
        (Dflt, &["Bash(true)"], NONE, "if true; then :; else rm x; fi", E::Ask),
        (Dflt, &["Bash(true)"], NONE, "while true; do rm x; done", E::Ask),
        (Dflt, &["Bash(true)"], NONE, "until true; do rm x; done", E::Ask),
        (Dflt, RM, NONE, "for f in a b; do rm $f; done", E::Allow),
        (Dflt, RM, NONE, "for f in $(ls); do rm $f; done", E::Ask),
        (Dflt, NONE, NONE, "case a in a) rm x;; esac", E::Ask),
        (Dflt, &["Bash(f)"], NONE, "f() { rm x; }; f", E::Ask),
        (Dflt, &["Bash(git *)"], NONE, "git() { rm -rf x; }; git status", E::Ask),
        (Dflt, RM, NONE, "[[ -f x ]] && rm x", E::Allow),
        (Dflt, RM, NONE, "X=1; rm x", E::Allow),
        // Something that runs nothing is not "allowed by rules".
        (Dflt, RM, NONE, "X=1", E::Ask),
        (Dflt, RM, NONE, "", E::Ask),
        // deny beats allow, and reaches into every part.
        (Dflt, GS, RM, "git status; rm -rf x", E::Deny),
        (Dflt, &["Bash(rm *)"], RM, "rm x", E::Deny),
        (Dflt, NONE, RM, "echo $(rm x)", E::Deny),
        (Dflt, NONE, RM, "echo \"`rm x`\"", E::Deny),
        (Dflt, NONE, RM, "(cd a && rm x)", E::Deny),
        (Dflt, NONE, RM, "if true; then rm x; fi", E::Deny),
        (Dflt, NONE, RM, "f() { rm x; }", E::Deny),
        (Dflt, NONE, RM, "cat <(rm x)", E::Deny),
        (Dflt, NONE, RM, "cat <<EOF\n$(rm x)\nEOF", E::Deny),
        (Dflt, NONE, RM, "echo ${x:-$(rm y)}", E::Deny),
        (Bypass, NONE, RM, "git status; rm x", E::Deny),
        (Bypass, NONE, RM, "git status", E::Allow),
        (ReadOnly, GS, NONE, "git status", E::Deny),
    ]);
}

#[test]
#[rustfmt::skip]
fn permissions_bash_quoting_and_expansions() {
    let commit: &[&str] = &["Bash(git commit -m \"fix bug\")"];
    run(&[
        (Dflt, GS, NONE, "git \"status\"", E::Allow),
        (Dflt, GS, NONE, "'git' status", E::Allow),
        (Dflt, GS, NONE, "git sta\"tu\"s", E::Allow),
        (Dflt, GS, NONE, "g\\it status", E::Allow),
        (Dflt, GS, NONE, "  git   status  ", E::Allow),
        (Dflt, GS, NONE, "git status -s", E::Ask),
        (Dflt, GS, NONE, "git \"status -s\"", E::Ask),
        (Dflt, GS, NONE, "git statusx", E::Ask),
        (Dflt, GS, NONE, "git $CMD", E::Ask),
        (Dflt, GS, NONE, "$GIT status", E::Ask),
        (Dflt, commit, NONE, "git commit -m 'fix bug'", E::Allow),
        (Dflt, commit, NONE, "git commit -m fix bug", E::Ask),
        (Dflt, ECHO, NONE, "echo $HOME", E::Allow),
        (Dflt, ECHO, NONE, "echo \"$HOME/x\"", E::Allow),
        (Dflt, &["Bash(echo hi)"], NONE, "echo $X", E::Ask),
        (Dflt, &["Bash(echo $HOME)"], NONE, "echo $HOME", E::Allow),
        (Dflt, &["Bash(echo $HOME)"], NONE, "echo $HOMER", E::Ask),
        (Dflt, &["Bash(cat ~/notes)"], NONE, "cat ~/notes", E::Allow),
        (Dflt, &["Bash(cat ~/notes)"], NONE, "cat '~/notes'", E::Ask),
        (Dflt, &["Bash(ls *)"], NONE, "ls *.rs", E::Allow),
        (Dflt, &["Bash(ls a.rs)"], NONE, "ls *.rs", E::Ask),
        (Dflt, &["Bash(ls a.rs)"], NONE, "ls a.r?", E::Ask),
        (Dflt, &["Bash(ls ab)"], NONE, "ls {a,b}", E::Ask),
        (Dflt, &["Bash(ls '*')"], NONE, "ls '*'", E::Allow),
        (Dflt, &["Bash(ls '*')"], NONE, "ls *", E::Ask),
        (Dflt, &["Bash(rm \\*)"], NONE, "rm *", E::Allow),
        (Dflt, &["Bash(rm \\*)"], NONE, "rm -rf /", E::Ask),
        (Dflt, ECHO, NONE, "echo $((1 + 2))", E::Allow),
        // Arithmetic on variables, subscripts and indirection can run hidden commands.
        (Dflt, ECHO, NONE, "echo $((x))", E::Ask),
        (Dflt, ECHO, NONE, "echo ${a[$i]}", E::Ask),
        (Dflt, ECHO, NONE, "echo ${a[0]}", E::Allow),
        (Dflt, ECHO, NONE, "echo ${!x}", E::Ask),
        (Dflt, ECHO, NONE, "echo ${x@P}", E::Ask),
        (Dflt, ECHO, NONE, "x='a[$(rm y)]'; (( x ))", E::Ask),
        (Dflt, ECHO, NONE, "[[ $x -eq 1 ]] && echo one", E::Ask),
        (Dflt, ECHO, NONE, "[[ $x == 1 ]] && echo one", E::Allow),
        // A deny rule that an expansion might match asks, even in bypass.
        (Bypass, NONE, &["Bash(rm -rf *)"], "$CMD -rf x", E::Ask),
        (Bypass, NONE, &["Bash(rm -rf *)"], "rm $FLAGS x", E::Ask),
        (Bypass, NONE, &["Bash(rm -rf *)"], "rm -r x", E::Allow),
        (Dflt, NONE, &["Bash(rm -rf *)"], "rm -rf $DIR", E::Deny),
        (Bypass, NONE, RM, "(( x ))", E::Ask),
        (Bypass, NONE, NONE, "(( x ))", E::Allow),
    ]);
}

#[test]
#[rustfmt::skip]
fn permissions_bash_environment_prefixes() {
    run(&[
        (Dflt, RM, NONE, "FOO=1 rm x", E::Allow),
        (Dflt, RM, NONE, "FOO=1 BAR=\"a b\" rm x", E::Allow),
        (Dflt, NONE, RM, "FOO=1 rm x", E::Deny),
        (Dflt, RM, NONE, "FOO=$(curl x) rm x", E::Ask),
        (Dflt, GS, NONE, "PATH=/tmp git status", E::Ask),
        (Dflt, GS, NONE, "LD_PRELOAD=/x.so git status", E::Ask),
        (Dflt, GS, NONE, "GIT_DIR=/x git status", E::Ask),
        (Dflt, GS, NONE, "IFS=x git status", E::Ask),
        (Dflt, GS, NONE, "BASH_ENV=/x git status", E::Ask),
        (Dflt, GS, NONE, "PATH=/tmp; git status", E::Ask),
        (Dflt, &["Bash(git status)", "Bash(export *)"], NONE, "export PATH=/tmp; git status", E::Ask),
        (Dflt, &["Bash(git status)", "Bash(export *)"], NONE, "export FOO=1; git status", E::Allow),
        (Dflt, GS, NONE, "env PATH=/tmp git status", E::Ask),
        (Dflt, GS, NONE, "env FOO=1 git status", E::Allow),
        (Dflt, GS, NONE, "env -S 'git status'", E::Ask),
        (Dflt, GS, NONE, "for PATH in /tmp; do git status; done", E::Ask),
        (Dflt, GS, NONE, "X=1 git status", E::Allow),
        (Bypass, NONE, NONE, "PATH=/tmp git status", E::Allow),
        (Dflt, GS, RM, "PATH=/tmp rm x", E::Deny),
    ]);
}

#[test]
#[rustfmt::skip]
fn permissions_bash_redirections() {
    run(&[
        (Dflt, ECHO, NONE, "echo hi > out.txt", E::Ask),
        (Dflt, ECHO, NONE, "echo hi >out.txt", E::Ask),
        (Dflt, ECHO, NONE, "> out.txt echo hi", E::Ask),
        (Dflt, ECHO, NONE, "echo hi >> out.txt", E::Ask),
        (Dflt, ECHO, NONE, "echo hi &> out.txt", E::Ask),
        (Dflt, ECHO, NONE, "echo hi >& out.txt", E::Ask),
        (Dflt, ECHO, NONE, "echo hi >| out.txt", E::Ask),
        (Dflt, ECHO, NONE, "{ echo hi; } > out.txt", E::Ask),
        (Dflt, ECHO, NONE, "echo hi > /dev/null", E::Allow),
        (Dflt, ECHO, NONE, "echo hi 2>/dev/null", E::Allow),
        (Dflt, ECHO, NONE, "echo hi 2>&1", E::Allow),
        (Dflt, ECHO, NONE, "echo hi >&2", E::Allow),
        (Dflt, &["Bash(cat *)"], NONE, "cat < in.txt", E::Allow),
        (Dflt, &["Bash(echo * > *)"], NONE, "echo hi > out.txt", E::Allow),
        (Dflt, &["Bash(echo * > *)"], NONE, "echo hi >> out.txt", E::Ask),
        (Dflt, &["Bash(echo * >> *)"], NONE, "echo hi >> out.txt", E::Allow),
        (Dflt, &["Bash(echo hi > out.txt)"], NONE, "echo hi >out.txt", E::Allow),
        (Dflt, &["Bash(echo hi > out.txt)"], NONE, "echo hi > other.txt", E::Ask),
        (Dflt, &["Bash(echo hi > out.txt)"], NONE, "echo hi", E::Ask),
        (Dflt, &["Bash(npm test)"], NONE, "npm test 2>&1", E::Allow),
        (Dflt, &["Bash(npm test)"], NONE, "npm test 2> err.log", E::Ask),
        (Dflt, &["Bash(npm test 2> *)"], NONE, "npm test 2> err.log", E::Allow),
        (Dflt, &["Bash(npm test)"], NONE, "npm test 1> out.log", E::Ask),
        (Dflt, ECHO, NONE, "> out.txt", E::Ask),
        // Deny rules match with or without the redirections.
        (Dflt, NONE, RM, "rm x > log", E::Deny),
        (Dflt, NONE, &["Bash(* > /etc/*)"], "echo x > /etc/passwd", E::Deny),
        (Bypass, NONE, &["Bash(* > /etc/*)"], "echo x > out", E::Allow),
    ]);
}

#[test]
#[rustfmt::skip]
fn permissions_bash_pattern_forms_and_wrappers() {
    let legacy: &[&str] = &["Bash(npm run:*)"];
    let star: &[&str] = &["Bash(npm run *)"];
    let exact: &[&str] = &["Bash(npm run test)"];
    run(&[
        (Dflt, legacy, NONE, "npm run test", E::Allow),
        (Dflt, legacy, NONE, "npm run", E::Allow),
        (Dflt, legacy, NONE, "npm run test -- --watch", E::Allow),
        (Dflt, legacy, NONE, "npm runner", E::Ask),
        (Dflt, legacy, NONE, "npm run test; rm x", E::Ask),
        (Dflt, legacy, NONE, "npm run test > out", E::Ask),
        (Dflt, star, NONE, "npm run test", E::Allow),
        (Dflt, star, NONE, "npm run", E::Allow),
        (Dflt, star, NONE, "npm runx", E::Ask),
        (Dflt, star, NONE, "npm run test && rm x", E::Ask),
        (Dflt, exact, NONE, "npm run test", E::Allow),
        (Dflt, exact, NONE, "npm run test --watch", E::Ask),
        (Dflt, exact, NONE, "npm run", E::Ask),
        (Dflt, &["Bash(ls*)"], NONE, "lsof", E::Allow),
        (Dflt, &["Bash(ls *)"], NONE, "lsof", E::Ask),
        (Dflt, &["Bash(git * main)"], NONE, "git push origin main", E::Allow),
        (Dflt, &["Bash(git * main)"], NONE, "git push origin dev", E::Ask),
        (Dflt, &["Bash(*)"], NONE, "anything; rm x > y", E::Allow),
        (Dflt, &["Bash"], NONE, "anything; rm x > y", E::Allow),
        (Dflt, &["Bash(git status; cargo test)"], NONE, "cargo test && git status", E::Allow),
        // Transparent wrappers are looked through.
        (Dflt, &["Bash(npm test)"], NONE, "timeout 60 npm test", E::Allow),
        (Dflt, &["Bash(npm test)"], NONE, "timeout -s KILL 60 npm test", E::Allow),
        (Dflt, &["Bash(npm test)"], NONE, "nice -n 5 nohup npm test", E::Allow),
        (Dflt, &["Bash(npm test)"], NONE, "/usr/bin/env FOO=1 npm test", E::Allow),
        (Dflt, &["Bash(timeout *)"], NONE, "timeout 5 rm x", E::Ask),
        (Dflt, &["Bash(timeout 5 rm x)"], NONE, "timeout 9 rm x", E::Allow),
        (Dflt, NONE, &["Bash(timeout *)"], "timeout 5 ls", E::Deny),
        (Dflt, NONE, RM, "timeout 5 rm x", E::Deny),
        (Dflt, NONE, RM, "/bin/rm x", E::Deny),
        (Dflt, NONE, RM, "command rm x", E::Deny),
        (Dflt, NONE, RM, "exec rm x", E::Deny),
        // Commands that run other commands need rules for both.
        (Dflt, &["Bash(xargs *)"], NONE, "xargs rm", E::Ask),
        (Dflt, &["Bash(xargs *)", "Bash(rm *)"], NONE, "ls | xargs rm", E::Ask),
        (Dflt, &["Bash(xargs *)", "Bash(rm *)", "Bash(ls)"], NONE, "ls | xargs -n 1 rm", E::Allow),
        (Dflt, NONE, RM, "ls | xargs -I{} rm {}", E::Deny),
        (Dflt, &["Bash(find *)"], NONE, "find . -name x -exec rm {} \\;", E::Ask),
        (Dflt, &["Bash(find *)", "Bash(rm *)"], NONE, "find . -name x -exec rm {} \\;", E::Allow),
        (Dflt, &["Bash(find *)"], NONE, "find . -name '*.rs'", E::Allow),
        (Dflt, NONE, RM, "find . -execdir rm {} +", E::Deny),
        (Dflt, NONE, &["Bash(rm -rf /)"], "find / -exec rm -rf {} \\;", E::Ask),
        (Dflt, &["Bash(bash *)"], NONE, "bash -c 'rm x'", E::Ask),
        (Dflt, &["Bash(bash *)", "Bash(rm *)"], NONE, "bash -c 'rm x'", E::Allow),
        (Dflt, &["Bash(bash *)"], NONE, "bash script.sh", E::Allow),
        (Dflt, NONE, RM, "sh -c 'rm x'", E::Deny),
        (Dflt, NONE, RM, "bash -lc \"git status; rm x\"", E::Deny),
        (Dflt, NONE, RM, "eval rm x", E::Deny),
        (Dflt, NONE, RM, "eval 'echo $(rm x)'", E::Deny),
        (Dflt, NONE, RM, "sudo -u root rm x", E::Deny),
        (Dflt, &["Bash(eval *)"], NONE, "eval \"$X\"", E::Ask),
        (Dflt, &["Bash(sh *)"], NONE, "sh -c \"$X\"", E::Ask),
        (Bypass, NONE, RM, "sh -c \"$X\"", E::Ask),
        // Parser failures never allow.
        (Dflt, ECHO, NONE, "echo \"unterminated", E::Ask),
        (Dflt, ECHO, NONE, "echo $(", E::Ask),
        (Dflt, ECHO, NONE, "echo )", E::Ask),
        (Dflt, ECHO, NONE, "select x in a; do echo $x; done", E::Ask),
        (Dflt, &["Bash"], NONE, "echo \"unterminated", E::Allow),
        (Dflt, &["Bash"], RM, "echo \"unterminated", E::Ask),
        (Bypass, NONE, NONE, "echo \"unterminated", E::Allow),
        (Bypass, NONE, RM, "echo \"unterminated", E::Ask),
        (ReadOnly, NONE, NONE, "echo \"unterminated", E::Deny),
    ]);
}

#[test]
fn permissions_bash_ask_rules_and_reasons() {
    let p = policy(Dflt, &["Bash(git *)"], &[], &["Bash(git push *)"]);
    assert_eq!(
        bash(&p, "git push origin"),
        Verdict::Allow,
        "allow beats ask"
    );
    let p = policy(Dflt, GS, &[], &["Bash(git push *)"]);
    let Verdict::Ask { reason } = bash(&p, "git push origin") else {
        panic!("no ask")
    };
    assert!(reason.contains("rule Bash(git push *) asks"), "{reason}");
    let p = policy(Bypass, &[], &[], &["Bash(git push *)"]);
    assert_eq!(kind(&bash(&p, "git push x")), E::Ask);
    assert_eq!(bash(&p, "git pull"), Verdict::Allow);

    let p = policy(Dflt, GS, RM, &[]);
    let Verdict::Ask { reason } = bash(&p, "git status; chmod +x y") else {
        panic!("no ask")
    };
    assert!(
        reason.starts_with("Bash(chmod +x y) is not in the allow list"),
        "{reason}"
    );
    let Verdict::Deny { reason } = bash(&p, "git status && rm -rf x") else {
        panic!("no deny")
    };
    assert_eq!(reason, "denied by rule Bash(rm *): `rm -rf x`");
    let Verdict::Ask { reason } = bash(&p, "PATH=/tmp git status") else {
        panic!("no ask")
    };
    assert!(reason.contains("sets PATH"), "{reason}");
    let Verdict::Ask { reason } = bash(&p, "echo \"oops") else {
        panic!("no ask")
    };
    assert!(reason.contains("could not parse"), "{reason}");
}

#[test]
#[rustfmt::skip]
fn permissions_bash_session_rules() {
    let cases: &[(&str, Option<&str>, &[&str])] = &[
        ("git status", Some("Bash(git status)"), &[ "git status; rm -rf x", "git status --short", "git statusx", "git status > f", ]),
        ("git \"status\"", Some("Bash(git status)"), &[]),
        ("git status && cargo test", Some("Bash(git status; cargo test)"), &["git status; rm x", "cargo test --release"]),
        ("npm test 2>&1", Some("Bash(npm test)"), &["npm test -- --all"]),
        ("echo hi > out.txt", Some("Bash(echo hi > out.txt)"), &["echo hi > other.txt", "echo bye > out.txt"]),
        ("rm *", Some("Bash(rm \\*)"), &["rm -rf /", "rm x"]),
        ("ls *.rs", Some("Bash(ls \\*.rs)"), &["ls /etc/passwd", "ls a.rs b.rs"]),
        ("echo '*'", Some("Bash(echo '*')"), &["echo *", "echo hi"]),
        ("timeout 5 make", Some("Bash(make)"), &["make install"]),
        ("FOO=1 make", Some("Bash(make)"), &["PATH=/x make"]),
        ("npm run test:unit", Some("Bash(npm run test:unit)"), &["npm run test"]),
        ("echo a:*", Some("Bash(echo a:\\*)"), &["echo a", "echo a b"]),
        ("echo $(date)", None, &["echo $(rm x)", "rm x"]),
        ("echo \"$HOME/x\"", None, &["echo $HOME/y"]),
        ("diff <(ls a) <(ls b)", None, &["diff <(rm x) a"]),
        ("ls | xargs rm", None, &["rm -rf /"]),
        ("bash -c 'git status'", None, &["bash -c 'rm x'"]),
        ("cat <<'EOF'\nhi\nEOF", None, &[]),
        ("find . -name '*.rs' -exec wc -l {} +", None, &["find . -exec rm {} +"]),
        ("echo a'b c'\"d\"", Some("Bash(echo 'ab cd')"), &["echo ab cd"]),
        ("git log --format='%H %s' -n 3", Some("Bash(git log '--format=%H %s' -n 3)"), &["git log"]),
        ("if true; then echo a; fi", Some("Bash(true; echo a)"), &[]),
        ("[[ -f a ]] && echo yes", Some("Bash(echo yes)"), &["echo no"]),
        ("cd src && cargo build", None, &["cd /", "cargo build --release"]),
        ("echo $X\"abc\"", None, &["echo $Xabc"]),
        ("\"A=b\" x", Some("Bash('A=b' x)"), &["x"]),
        ("x=$(git rev-parse HEAD); echo $x", Some("Bash(git rev-parse HEAD; echo $x)"), &["echo $y"]),
        ("echo hi > >(tee log)", Some("Bash(tee log; echo hi)"), &["tee other"]),
        ("[ -f Cargo.toml ] && cargo check", Some("Bash([ -f Cargo.toml ]; cargo check)"), &["[ -f x ]"]),
        ("for f in $(ls src); do wc -l \"$f\"; done", Some("Bash(ls src; wc -l \"$f\")"), &["ls"]),
    ];
    let mut failures = Vec::new();
    for (command, want_rule, not_allowed) in cases {
        let input = json!({ "command": command });
        let call = ToolCallView {
            tool: "Bash",
            input: &input,
            read_only: false,
            workspace: Path::new(WS),
        };
        let rule = PermissionPolicy::session_rule_for(&call);
        if let Some(want) = want_rule
            && rule != *want
        {
            failures.push(format!("{command:?}: rule {rule:?}, want {want:?}"));
        }
        let mut p = policy(Dflt, &[], &[], &[]);
        if let Err(e) = p.allow(&rule) {
            failures.push(format!("{command:?}: {e}"));
            continue;
        }
        let got = p.evaluate(&call);
        if got != Verdict::Allow {
            failures.push(format!("{command:?}: after adding {rule:?} got {got:?}"));
        }
        for other in *not_allowed {
            if bash(&p, other) == Verdict::Allow {
                failures.push(format!("{command:?}: {rule:?} also allows {other:?}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn permissions_bash_home_is_used_for_tilde_rules_only() {
    // `~` in a Bash rule is the shell's tilde (an expansion), not the policy's home.
    let p = policy(Dflt, &["Bash(cat ~/x)"], &[], &[]);
    assert_eq!(bash(&p, "cat ~/x"), Verdict::Allow);
    assert_eq!(kind(&bash(&p, &format!("cat {HOME}/x"))), E::Ask);
}

#[test]
#[rustfmt::skip]
fn permissions_bash_adversarial() {
    run(&[
        (Dflt, GS, NONE, "git status \\\n; rm x", E::Ask),
        (Dflt, GS, NONE, "git status # ; rm x", E::Allow),
        (Dflt, GS, NONE, "git status\r\nrm x", E::Ask),
        (Dflt, &["Bash(cat)", "Bash(git status)"], NONE, "cat <<EOF; rm x\nhello\nEOF", E::Ask),
        (Dflt, ECHO, NONE, "echo hi > >(rm x)", E::Ask),
        (Dflt, ECHO, RM, "echo hi > >(rm x)", E::Deny),
        (Dflt, ECHO, NONE, "echo $(<notes.txt)", E::Allow),
        (Dflt, GS, NONE, "coproc rm x", E::Ask),
        (Dflt, GS, NONE, "$(echo rm) x", E::Ask),
        (Dflt, GS, NONE, "{rm,x}", E::Ask),
        (Dflt, &["Bash(git status)", "Bash(trap *)"], NONE, "trap 'rm x' EXIT; git status", E::Ask),
        (Dflt, NONE, RM, "trap 'rm x' EXIT", E::Deny),
        (Dflt, NONE, RM, "watch -n 1 rm x", E::Deny),
        (Dflt, &["Bash(git status)", "Bash(declare *)"], NONE, "declare -n r=PATH; r=/tmp; git status", E::Ask),
        (Dflt, &["Bash(git status)", "Bash(printf *)"], NONE, "printf -v PATH /tmp; git status", E::Ask),
        (Dflt, &["Bash(printf *)"], NONE, "printf '%s\\n' PATH", E::Allow),
        (Dflt, &["Bash(git status)", "Bash(read *)"], NONE, "read IFS < f; git status", E::Ask),
        (Dflt, &["Bash(git status)", "Bash(unset *)"], NONE, "unset PATH; git status", E::Allow),
    ]);
}

#[test]
fn permissions_bash_deep_nesting_never_crashes() {
    let deep_subst = format!("echo {}x{}", "$(".repeat(5000), ")".repeat(5000));
    let deep_if = format!(
        "{}true{}",
        "if true; then ".repeat(5000),
        "; fi".repeat(5000)
    );
    let allowed_if = format!("{}true{}", "if true; then ".repeat(150), "; fi".repeat(150));
    let p = policy(Dflt, &["Bash(true)", "Bash(echo *)"], &[], &[]);
    // Callers may run on small stacks (tokio workers have 2 MiB).
    let verdicts = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || [deep_subst, deep_if, allowed_if].map(|c| kind(&bash(&p, &c))))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(verdicts, [E::Ask, E::Ask, E::Allow]);
    assert!(
        PermissionPolicy::with_home(
            Dflt,
            &[format!("Bash({})", "(".repeat(3000))],
            &[],
            &[],
            Some(HOME.into())
        )
        .is_err()
    );
}
