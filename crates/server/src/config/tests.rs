use super::*;

#[test]
fn full_example_parses() {
    let config = Config::parse(
        r#"
        [server]
        bind = "127.0.0.1:7878"
        [database]
        url = "sqlite:///tmp/x.db"
        [models.default]
        provider = "anthropic"
        model = "claude-sonnet-4-5"
        api_key_env = "ANTHROPIC_API_KEY"
        [models.local]
        provider = "openai"
        base_url = "http://127.0.0.1:11434/v1"
        [profiles.default]
        network = false
        max_turns = 7
        max_budget_usd = 5.0
        "#,
    )
    .unwrap();
    assert_eq!(config.models["local"].provider, Provider::Openai);
    assert_eq!(config.profile("default").unwrap().max_turns, 7);
    assert_eq!(config.profile("default").unwrap().turn_timeout_s, 1800);
}

#[test]
fn unknown_key_names_line_and_key() {
    let err = Config::parse("[profiles.default]\nmax_turnz = 3\n").unwrap_err();
    assert!(err.contains("max_turnz"), "{err}");
    assert!(err.contains("line 2"), "{err}");
}

#[test]
fn wrong_type_and_unknown_provider_are_errors() {
    assert!(Config::parse("[profiles.default]\nmax_turns = \"x\"\n").is_err());
    let err = Config::parse("[models.m]\nprovider = \"nope\"\n").unwrap_err();
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn rules_hooks_and_presets() {
    let config = Config::parse(
        r#"
        [profiles.default]
        mode = "accept_edits"
        allow = ["Bash(git status)", "Read(src/**)"]
        deny = ["Read(.env)"]
        on_no_answer = "allow"
        [[profiles.default.hooks]]
        event = "PreToolUse"
        matcher = "Bash"
        command = "true"
        "#,
    )
    .unwrap();
    let profile = config.profile("default").unwrap();
    assert_eq!(profile.mode, PermissionMode::AcceptEdits);
    assert_eq!(profile.on_no_answer, NoAnswer::Allow);
    assert_eq!(profile.hooks.len(), 1);
    let preset = config.profile(READ_ONLY_PROFILE).unwrap();
    assert_eq!(preset.mode, PermissionMode::ReadOnly);
}

#[test]
fn modes_take_claude_codes_spellings_too() {
    for (spelling, mode) in [
        ("acceptEdits", PermissionMode::AcceptEdits),
        ("plan", PermissionMode::ReadOnly),
        ("bypassPermissions", PermissionMode::Bypass),
        ("dontAsk", PermissionMode::DontAsk),
        ("dont_ask", PermissionMode::DontAsk),
    ] {
        let config = Config::parse(&format!("[profiles.p]\nmode = \"{spelling}\"\n")).unwrap();
        assert_eq!(config.profile("p").unwrap().mode, mode, "{spelling}");
        assert_eq!(PermissionMode::parse(spelling), Some(mode));
    }
    assert!(Config::parse("[profiles.p]\nmode = \"yolo\"\n").is_err());
}

#[test]
fn thinking_budgets_are_bounded() {
    let model = |budget: u32| {
        Config::parse(&format!(
            "[models.m]\nprovider = \"anthropic\"\nthinking = {{ budget_tokens = {budget} }}\n"
        ))
    };
    assert!(model(4096).is_ok());
    for bad in [0, 1023, 4_000_000_000] {
        let err = model(bad).unwrap_err();
        assert!(
            err.contains("budget_tokens must be between"),
            "{bad}: {err}"
        );
    }
    let err = Config::parse("[profiles.p]\nthinking = { budget_tokens = 5 }\n").unwrap_err();
    assert!(err.contains("profile \"p\""), "{err}");
}

#[test]
fn lease_timeout_is_bounded() {
    let cluster = |s: u64| Config::parse(&format!("[cluster]\nlease_timeout_s = {s}\n"));
    for ok in [2, 4, 3600] {
        assert!(cluster(ok).is_ok(), "{ok}");
    }
    for bad in [0, 1, 3601, u64::from(u32::MAX) + 1] {
        let err = cluster(bad).unwrap_err();
        assert!(err.contains("between 2 and 3600"), "{bad}: {err}");
    }
    let err = Config::parse("[cluster]\nmax_running_turns = 0\n").unwrap_err();
    assert!(err.contains("max_running_turns"), "{err}");
}

#[test]
fn bad_rules_and_hook_matchers_are_startup_errors() {
    let err = Config::parse("[profiles.p]\nallow = [\"Bash(git status\"]\n").unwrap_err();
    assert!(err.contains("profile \"p\""), "{err}");
    let err = Config::parse(
        "[profiles.p]\n[[profiles.p.hooks]]\nevent = \"PreToolUse\"\nmatcher = \"(\"\ncommand = \"true\"\n",
    )
    .unwrap_err();
    assert!(err.contains("profile \"p\""), "{err}");
    let err = Config::parse("[profiles.p]\nmode = \"yolo\"\n").unwrap_err();
    assert!(err.contains("yolo"), "{err}");
}

#[test]
fn missing_profile_is_a_clear_error() {
    let err = Config::default().profile("strict").unwrap_err().to_string();
    assert!(err.contains("strict"), "{err}");
}

#[test]
fn agent_extras_parse_and_are_checked() {
    let config = Config::parse(
        r#"
        [models.fast]
        provider = "scripted"
        [profiles.default]
        mcp_servers = ["files"]
        max_subagents = 2
        append_system_prompt = "Be brief in {{workspace}}."
        [[mcp_servers]]
        name = "files"
        command = "node"
        args = ["server.js"]
        read_only_paths = ["/opt/mcp"]
        [[mcp_servers]]
        name = "remote"
        url = "https://mcp.example.com/mcp"
        [[subagents]]
        name = "reviewer"
        description = "reviews"
        prompt = "Review code in {{workspace}}."
        tools = ["Read"]
        model = "fast"
        [skills]
        user_dir = "/srv/skills/{user}"
        "#,
    )
    .unwrap();
    assert_eq!(config.mcp_servers.len(), 2);
    assert_eq!(config.profile("default").unwrap().max_subagents, 2);
    assert_eq!(
        config.subagents[0].tools.as_deref(),
        Some(&["Read".to_string()][..])
    );

    let bad = [
        ("[[mcp_servers]]\nname = \"a\"\n", "exactly one of"),
        (
            "[[mcp_servers]]\nname = \"a b\"\ncommand = \"x\"\n",
            "letters",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\n[[mcp_servers]]\nname = \"a\"\ncommand = \"y\"\n",
            "twice",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nread_only_paths = [\"rel\"]\n",
            "absolute",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nread_only_tools = [\"get_[\"]\n",
            "read_only_tools pattern \"get_[\"",
        ),
        ("[profiles.p]\nmcp_servers = [\"nope\"]\n", "nope"),
        (
            "[[subagents]]\nname = \"r\"\ndescription = \"d\"\nprompt = \"p\"\nmodel = \"missing\"\n",
            "missing",
        ),
        (
            "[[subagents]]\nname = \"r\"\ndescription = \"d\"\nprompt = \"{{bogus}}\"\n",
            "bogus",
        ),
        ("[profiles.p]\nsystem_prompt = \"hi {{nope}}\"\n", "nope"),
    ];
    for (text, needle) in bad {
        let err = Config::parse(text).unwrap_err();
        assert!(err.contains(needle), "{text:?}: {err}");
    }
}

#[test]
fn stream_limits_default_to_one_and_sixteen_mib_and_can_be_set() {
    let default = Config::parse("").unwrap().profile("default").unwrap();
    assert_eq!(default.max_tool_output_stream_bytes, 1 << 20);
    assert_eq!(default.max_turn_stream_bytes, 16 << 20);
    let config = Config::parse(
        "[profiles.small]\nmax_tool_output_stream_bytes = 4096\nmax_turn_stream_bytes = 65536\n",
    )
    .unwrap();
    let small = config.profile("small").unwrap();
    assert_eq!(small.max_tool_output_stream_bytes, 4096);
    assert_eq!(small.max_turn_stream_bytes, 65536);
}

#[test]
fn projects_and_roots_are_checked_when_the_config_loads() {
    let parse =
        |extra: &str| Config::parse(&format!("[workspaces]\nroots = [\"/srv/p\"]\n{extra}"));
    let ok = parse("[[projects]]\nname = \"app\"\npath = \"/srv/p/app\"\nsingle_session = true\n");
    let config = ok.unwrap();
    assert!(config.project("app").unwrap().single_session);
    assert_eq!(
        config.workspace_roots("anyone"),
        vec![PathBuf::from("/srv/p")]
    );
    let refused = [
        (
            "[[projects]]\nname = \"a\"\npath = \"/opt/x\"\n[[projects]]\nname = \"a\"\npath = \"/opt/y\"\n",
            "defined twice",
        ),
        ("[[projects]]\nname = \"a\"\npath = \"rel\"\n", "absolute"),
        (
            "[[projects]]\nname = \" \"\npath = \"/opt/x\"\n",
            "1 to 100",
        ),
        (
            "[[projects]]\nname = \"a\"\npath = \"/opt/x\"\nprofile = \"nope\"\n",
            "no profile",
        ),
        ("[users.bob.workspaces]\nroots = [\"here\"]\n", "absolute"),
    ];
    for (extra, expected) in refused {
        let err = parse(extra).unwrap_err();
        assert!(err.contains(expected), "{extra}: {err}");
    }
    let alice =
        Config::parse("[users.alice.workspaces]\nroots = [\"/home/alice/code\"]\n").unwrap();
    assert_eq!(
        alice.workspace_roots("alice"),
        vec![PathBuf::from("/home/alice/code")]
    );
    assert!(alice.workspace_roots("bob").is_empty());
}

#[test]
fn sandbox_env_merges_user_over_profile_and_marks_secrets() {
    let config = Config::parse(
        r#"
        [profiles.dev]
        env = { PLAIN = "p", SHARED = "from-profile", API_TOKEN = { value = "tok-123", secret = true } }
        env_from_host = ["HOST_TOKEN"]
        ssh_agent = true
        [users.alice]
        env = { SHARED = "from-alice", NOTE = { value = "n" } }
        ssh_agent = false
        "#,
    )
    .unwrap();
    let profile = config.profile("dev").unwrap();
    let shown = format!("{config:?}");
    assert!(
        !shown.contains("tok-123") && shown.contains("[secret]"),
        "{shown}"
    );
    let host = |name: &str| match name {
        "HOST_TOKEN" => Some("host-secret".to_string()),
        "SSH_AUTH_SOCK" => Some("/run/user/1/agent.sock".to_string()),
        _ => None,
    };
    let alice = SandboxEnv::resolve(&profile, config.users.get("alice"), &host);
    let (values, secret) = alice.split();
    assert_eq!(values["PLAIN"], "p");
    assert_eq!(values["SHARED"], "from-alice");
    assert_eq!(values["NOTE"], "n");
    assert_eq!(values["API_TOKEN"], "tok-123");
    assert_eq!(values["HOST_TOKEN"], "host-secret");
    let secret: Vec<&str> = secret.iter().map(String::as_str).collect();
    assert_eq!(secret, ["API_TOKEN", "HOST_TOKEN"]);
    assert_eq!(alice.ssh_agent, None, "the user turned it off");
    assert!(!format!("{alice:?}").contains("host-secret"));

    let bob = SandboxEnv::resolve(&profile, None, &host);
    assert_eq!(bob.split().0["SHARED"], "from-profile");
    assert_eq!(
        bob.ssh_agent,
        Some(std::path::PathBuf::from("/run/user/1/agent.sock"))
    );
    // Unset on the host: left out; no socket: no binding.
    let bare = SandboxEnv::resolve(&profile, None, &|_: &str| None);
    assert!(!bare.env.contains_key("HOST_TOKEN"));
    assert_eq!(bare.ssh_agent, None);
}

#[test]
fn unusable_sandbox_env_is_refused() {
    for (table, needle) in [
        ("env = { \"BAD-NAME\" = \"x\" }", "not a variable name"),
        ("env = { \"1X\" = \"x\" }", "not a variable name"),
        ("env_from_host = [\"A=B\"]", "not a variable name"),
        ("env = { X = \"a\\u0000b\" }", "NUL"),
        (
            "env = { X = { value = \"v\", secrett = true } }",
            "secret = true",
        ),
        ("env = { X = 3 }", "secret = true"),
        ("env = { X = \"v\" }\nenv_from_host = [\"X\"]", "both"),
        ("env_from_host = [\"SSH_AUTH_SOCK\"]", "ssh_agent = true"),
    ] {
        for section in ["[profiles.p]", "[users.u]"] {
            let err = Config::parse(&format!("{section}\n{table}\n")).unwrap_err();
            assert!(err.contains(needle), "{section} {table}: {err}");
        }
    }
}

#[test]
fn a_backend_names_a_configured_model_of_another_provider() {
    let cc = "[models.cc]\nprovider = \"claude-code\"\nbackend = ";
    let fast = "[models.fast]\nprovider = \"openai\"\nbase_url = \"http://x/v1\"\n";
    assert!(Config::parse(&format!("{cc}\"fast\"\n{fast}")).is_ok());
    let err = Config::parse(&format!("{cc}\"nope\"\n{fast}")).unwrap_err();
    assert!(
        err.contains("\"nope\" is not a configured model") && err.contains("fast"),
        "{err}"
    );
    let err = Config::parse(&format!("{cc}\"cc\"\n")).unwrap_err();
    assert!(err.contains("claude-code model"), "{err}");
    let err = Config::parse("[models.a]\nprovider = \"openai\"\nbackend = \"a\"\n").unwrap_err();
    assert!(err.contains("only for provider = \"claude-code\""), "{err}");
}

/// A webhook's secret and the secret parts of its URL are never shown: not
/// by `Debug`, not as its default name, not in a refusal.
#[test]
fn webhook_secrets_are_not_shown() {
    let config = Config::parse(
        r#"
        [[webhooks]]
        url = "https://user:pw@hooks.example:8443/services/T0/B0/XyZsecretpath?token=tok-9"
        events = ["turn.finished"]
        secret = "hook-s3cret"
        "#,
    )
    .unwrap();
    let shown = format!("{config:?}");
    for secret in ["hook-s3cret", "XyZsecretpath", "tok-9", "pw@"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert_eq!(config.webhooks[0].name(), "hooks.example");
    let refused = Config::parse(
        r#"
        [[webhooks]]
        url = "ftp://hooks.example/XyZsecretpath"
        events = ["turn.finished"]
        secret = "s"
        "#,
    )
    .unwrap_err()
    .to_string();
    assert!(!refused.contains("XyZsecretpath"), "{refused}");
}

#[test]
fn webhook_timeouts_are_bounded_and_retries_spread() {
    use std::time::Duration;
    let hook = |rest: &str| {
        Config::parse(&format!(
            "[[webhooks]]\nurl = \"https://h.example/x\"\nevents = [\"budget\"]\n\
             secret = \"s\"\n{rest}\n"
        ))
    };
    for bad in [
        "timeout_s = 0",
        "timeout_s = 301",
        "timeout_s = 18446744073709551615",
    ] {
        let err = hook(bad).unwrap_err().to_string();
        assert!(err.contains("timeout_s"), "{bad}: {err}");
    }
    let config = hook("timeout_s = 300").unwrap();
    let hook = &config.webhooks[0];
    assert_eq!(hook.timeout(), Duration::from_secs(300));
    // About an hour of retries by default: 1, 2, 4 … 256 s, then 300 s.
    let total: f64 = (1..hook.max_attempts())
        .map(|n| hook.retry_after_spread(u64::from(n), 0.0).as_secs_f64())
        .sum();
    assert!((3000.0..5400.0).contains(&total), "{total}");
    assert_eq!(
        hook.retry_after_spread(3, 0.2),
        Duration::from_secs_f64(4.8)
    );
    assert_eq!(
        hook.retry_after_spread(3, -0.2),
        Duration::from_secs_f64(3.2)
    );
    let waits: std::collections::HashSet<Duration> = (0..20).map(|_| hook.retry_after(3)).collect();
    assert!(waits.len() > 1, "no jitter: {waits:?}");
    assert!(
        waits
            .iter()
            .all(|w| w.as_secs_f64() >= 3.2 && w.as_secs_f64() <= 4.8)
    );
}
