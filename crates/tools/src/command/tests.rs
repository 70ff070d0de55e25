use serde_json::json;

use super::*;

fn command(toml_params: serde_json::Value, argv: &[&str]) -> CommandToml {
    serde_json::from_value(json!({
        "name": "vm",
        "description": "Operate a VM",
        "argv": argv,
        "parameters": toml_params,
    }))
    .unwrap()
}

fn vm_spec() -> CommandSpec {
    command(
        json!({
            "action": {"type": "string", "enum": ["status", "reset"]},
            "vm": {"type": "integer", "minimum": 100, "maximum": 999},
            "name": {"type": "string", "pattern": "[a-z][a-z0-9-]*", "maxLength": 16},
        }),
        &["ssh", "pve", "qm", "{action}", "{vm}", "{name}"],
    )
    .compile()
    .unwrap()
}

#[test]
fn a_valid_call_fills_whole_elements() {
    let argv = argv_for(
        &vm_spec(),
        &json!({"action": "reset", "vm": 102, "name": "web-1"}),
    )
    .unwrap();
    assert_eq!(argv, ["ssh", "pve", "qm", "reset", "102", "web-1"]);
}

#[test]
fn injection_attempts_are_refused() {
    let spec = vm_spec();
    let cases = [
        json!({"action": "status", "vm": 102, "name": "a;reboot"}),
        json!({"action": "status", "vm": 102, "name": "$(id)"}),
        json!({"action": "status", "vm": 102, "name": "`id`"}),
        json!({"action": "status", "vm": 102, "name": "a\nb"}),
        json!({"action": "status", "vm": 102, "name": "-oProxyCommand=x"}),
        json!({"action": "status", "vm": 102, "name": "--"}),
        json!({"action": "status", "vm": 102, "name": "a b"}),
        json!({"action": "status", "vm": 102, "name": "ｗeb"}),
        json!({"action": "status", "vm": 102, "name": "wеb"}),
        json!({"action": "status", "vm": 102, "name": "a".repeat(17)}),
        json!({"action": "status;id", "vm": 102, "name": "web"}),
        json!({"action": "status", "vm": 99, "name": "web"}),
        json!({"action": "status", "vm": "102", "name": "web"}),
        json!({"action": "status", "vm": 102.5, "name": "web"}),
        json!({"action": "status", "vm": 102}),
        json!({"action": "status", "vm": 102, "name": "web", "extra": "x"}),
        json!("status"),
    ];
    for case in cases {
        assert!(argv_for(&spec, &case).is_err(), "{case} was let through");
    }
}

#[test]
fn config_mistakes_are_refused_with_the_key() {
    let free = command(json!({"x": {"type": "string"}}), &["echo", "{x}"]);
    assert!(
        free.compile()
            .unwrap_err()
            .contains("needs an `enum` or a `pattern`")
    );
    let unknown = command(json!({}), &["echo", "{x}"]);
    assert!(
        unknown
            .compile()
            .unwrap_err()
            .contains("not a declared parameter")
    );
    let partial = command(json!({"x": {"type": "integer"}}), &["echo", "--vm={x}"]);
    assert!(partial.compile().unwrap_err().contains("whole element"));
    let unused = command(json!({"x": {"type": "integer"}}), &["echo"]);
    assert!(unused.compile().unwrap_err().contains("not used"));
    let program = command(json!({"x": {"type": "integer"}}), &["{x}"]);
    assert!(program.compile().unwrap_err().contains("argv[0]"));
    let bad_regex = command(
        json!({"x": {"type": "string", "pattern": "("}}),
        &["echo", "{x}"],
    );
    assert!(bad_regex.compile().unwrap_err().contains("pattern"));
}

#[test]
fn host_commands_never_run_as_root() {
    let dir = tempfile::tempdir().unwrap();
    let passwd = dir.path().join("passwd");
    std::fs::write(
        &passwd,
        "root:x:0:0::/root:/bin/sh\nops:x:4242:4243::/home/ops:/bin/sh\n",
    )
    .unwrap();
    let host = |extra: serde_json::Value| {
        let mut value =
            json!({"name": "h", "description": "d", "argv": ["true"], "runs_on": "host"});
        value
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value::<CommandToml>(value)
            .unwrap()
            .compile_with_passwd(&passwd)
    };
    assert!(
        host(json!({"host_user": "root"}))
            .unwrap_err()
            .contains("unprivileged")
    );
    assert!(host(json!({"host_uid": 0, "host_gid": 5})).is_err());
    assert!(host(json!({})).unwrap_err().contains("host_user"));
    let ops = host(json!({"host_user": "ops"})).unwrap();
    assert!(matches!(
        ops.runs_on,
        RunsOn::Host {
            uid: 4242,
            gid: 4243,
            ..
        }
    ));
}

#[test]
fn a_permissive_pattern_still_refuses_what_a_shell_or_an_option_parser_would_misread() {
    let spec = command(
        json!({"x": {"type": "string", "pattern": ".+"}}),
        &["ssh", "h", "cmd", "{x}"],
    )
    .compile()
    .unwrap();
    for value in [
        "a;b", "$(id)", "`id`", "a b", "a\tb", "-x", "--", "ｗeb", "wеb", "a|b", "a>b", "'a'",
    ] {
        assert!(
            argv_for(&spec, &json!({"x": value})).is_err(),
            "{value:?} was let through"
        );
    }
    assert_eq!(
        argv_for(&spec, &json!({"x": "web-1.example"})).unwrap()[3],
        "web-1.example"
    );
    let lenient = command(
        json!({"x": {"type": "string", "pattern": ".+", "allow_leading_dash": true, "allow_shell_characters": true}}),
        &["echo", "{x}"],
    )
    .compile()
    .unwrap();
    assert_eq!(
        argv_for(&lenient, &json!({"x": "-n a b"})).unwrap()[1],
        "-n a b"
    );
    // `--` and control characters never pass.
    assert!(argv_for(&lenient, &json!({"x": "--"})).is_err());
    assert!(argv_for(&lenient, &json!({"x": "a\u{1b}[2J"})).is_err());
}

#[test]
fn filled_variables_holding_a_token_are_secret_on_the_host_and_in_the_sandbox() {
    let env = CommandEnv {
        vars: [
            ("WHO".to_string(), "alice".to_string()),
            ("TOKEN".to_string(), "t0ken-value".to_string()),
        ]
        .into(),
        secret: ["TOKEN".to_string()].into(),
    };
    let session = agentd_sandbox::Policy::new("/tmp");
    let sandboxed = vm_spec();
    let mut host = vm_spec();
    host.runs_on = RunsOn::Host {
        user: None,
        uid: rustix::process::geteuid().as_raw().max(1),
        gid: 1,
        home: "/nonexistent".into(),
    };
    for spec in [sandboxed, host] {
        let Ok(policy) = super::runner::policy_for(&spec, &env, &session) else {
            continue; // not root: cannot run as another uid
        };
        assert_eq!(policy.env["WHO"], "alice");
        assert_eq!(policy.secrets(), [("TOKEN", "t0ken-value")]);
    }
}

#[test]
fn a_pattern_that_compiles_only_once_wrapped_is_refused() {
    // Wrapped it would read `^(?:a)|(b)$`: anything containing `b` passes.
    let unanchored = command(
        json!({"x": {"type": "string", "pattern": "a)|(b"}}),
        &["echo", "{x}"],
    );
    assert!(unanchored.compile().unwrap_err().contains("pattern"));
}

#[test]
fn empty_values_and_invisible_format_characters_never_pass() {
    let unicode = command(
        json!({"x": {"type": "string", "pattern": "\\p{L}*"}}),
        &["ssh", "h", "cmd", "{x}"],
    )
    .compile()
    .unwrap();
    assert_eq!(
        argv_for(&unicode, &json!({"x": "héllo"})).unwrap()[3],
        "héllo"
    );
    for value in [
        "",
        "a\u{202E}b",
        "a\u{200B}b",
        "a\u{2066}b",
        "\u{FEFF}a",
        "a\u{AD}b",
    ] {
        let err = argv_for(&unicode, &json!({"x": value})).unwrap_err();
        assert!(
            err.contains("empty") || err.contains("invisible"),
            "{value:?}: {err}"
        );
    }
    let zero = command(
        json!({"x": {"type": "string", "pattern": ".*", "minLength": 0}}),
        &["echo", "{x}"],
    );
    assert!(zero.compile().unwrap_err().contains("minLength"));
    let empty_choice = command(
        json!({"x": {"type": "string", "enum": ["", "a"]}}),
        &["echo", "{x}"],
    );
    assert!(empty_choice.compile().is_err());
}

#[test]
fn an_enum_matches_whole_values_only() {
    let spec = vm_spec();
    for action in ["statusx", "xstatus", "status|reset", "Status"] {
        let err =
            argv_for(&spec, &json!({"action": action, "vm": 102, "name": "web"})).unwrap_err();
        assert!(
            err.contains(action) || err.contains("shell"),
            "{action}: {err}"
        );
    }
}
