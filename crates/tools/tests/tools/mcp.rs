//! The MCP bridge against real servers in the real sandbox. Needs bubblewrap,
//! node and `bash scripts/install-deps.sh` (for the npm servers).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::mcp_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agentd_tools::{McpPool, McpServerConfig, McpTransport};
use mcp_support::{
    Session, assert_error_containing, assert_ok, call, everything, fixture, http_everything, node,
    package_entry, tool,
};
use serde_json::{Value, json};

#[tokio::test]
async fn everything_server_lists_tools_and_echoes() {
    let s = Session::new();
    let pool = McpPool::new(vec![everything()]);
    let tools = pool.tools("s1", &s.policy).await;
    assert!(tools.errors.is_empty(), "{:?}", tools.errors);
    let echo = tool(&tools, "mcp__everything__echo");
    assert_eq!(echo.input_schema()["type"], "object");
    assert_eq!(
        echo.input_schema()["properties"]["message"]["type"],
        "string"
    );
    assert_eq!(echo.description(), "Echoes back the input string");
    assert!(
        !echo.is_read_only(),
        "readOnlyHint is the server's claim, not trusted: calls still ask"
    );
    assert!(tools.tools.iter().all(|t| t.name().len() <= 64));

    let result = call(
        &tools,
        "mcp__everything__echo",
        json!({"message": "hi"}),
        &s.ctx,
    )
    .await;
    assert_ok(&result);
    assert_eq!(result.content, "Echo: hi");

    let image = call(&tools, "mcp__everything__get-tiny-image", json!({}), &s.ctx).await;
    assert_ok(&image);
    assert!(
        image.content.contains("[image: image/png, "),
        "{}",
        image.content
    );

    let refused = call(
        &tools,
        "mcp__everything__echo",
        json!({"message": 5}),
        &s.ctx,
    )
    .await;
    assert!(refused.is_error, "{}", refused.content);
    pool.shutdown().await;
}

#[tokio::test]
async fn stdio_servers_get_the_sandbox_environment_only() {
    let s = Session::new();
    let mut config = everything();
    if let McpTransport::Stdio { env, .. } = &mut config.transport {
        env.insert("FROM_CONFIG".into(), "config-value".into());
    }
    let mut policy = s.policy.clone();
    policy
        .env
        .insert("FROM_POLICY".into(), "policy-value".into());
    let pool = McpPool::new(vec![config]);
    let tools = pool.tools("s1", &policy).await;
    let result = call(&tools, "mcp__everything__get-env", json!({}), &s.ctx).await;
    assert_ok(&result);
    let env: BTreeMap<String, String> = serde_json::from_str(&result.content).unwrap();
    assert_eq!(env["HOME"], s.ws.display().to_string());
    assert_eq!(env["PATH"], "/usr/local/bin:/usr/bin:/bin");
    assert_eq!(env["FROM_CONFIG"], "config-value");
    assert_eq!(env["FROM_POLICY"], "policy-value");
    // Nothing of this (test) process's environment leaks in, API keys included.
    let leaked: Vec<String> = std::env::vars()
        .filter(|(key, value)| {
            !["PATH", "HOME", "LANG", "TERM"].contains(&key.as_str()) && env.get(key) == Some(value)
        })
        .map(|(key, _)| key)
        .collect();
    assert!(leaked.is_empty(), "leaked into the sandbox: {leaked:?}");
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
    assert!(!env.contains_key("CARGO_MANIFEST_DIR"));
    pool.shutdown().await;
}

#[tokio::test]
async fn filesystem_server_works_in_the_workspace_only() {
    let s = Session::new();
    std::fs::write(s.outside.join("secret.txt"), "outside secret").unwrap();
    let config = node(
        "fs",
        vec![
            package_entry("server-filesystem"),
            s.ws.display().to_string(),
        ],
    );
    let pool = McpPool::new(vec![config]);
    let tools = pool.tools("s1", &s.policy).await;
    assert!(tools.errors.is_empty(), "{:?}", tools.errors);
    assert!(!tool(&tools, "mcp__fs__read_text_file").is_read_only());

    let path = s.ws.join("notes.txt").display().to_string();
    let written = call(
        &tools,
        "mcp__fs__write_file",
        json!({"path": path, "content": "hello from mcp"}),
        &s.ctx,
    )
    .await;
    assert_ok(&written);
    assert_eq!(
        std::fs::read_to_string(s.ws.join("notes.txt")).unwrap(),
        "hello from mcp"
    );
    std::fs::write(s.ws.join("host.txt"), "written by the host").unwrap();
    let read = call(
        &tools,
        "mcp__fs__read_text_file",
        json!({"path": s.ws.join("host.txt")}),
        &s.ctx,
    )
    .await;
    assert_ok(&read);
    assert_eq!(read.content, "written by the host");

    for outside in [s.outside.join("secret.txt"), "/etc/passwd".into()] {
        let refused = call(
            &tools,
            "mcp__fs__read_text_file",
            json!({"path": outside}),
            &s.ctx,
        )
        .await;
        assert!(
            refused.is_error,
            "{}: {}",
            outside.display(),
            refused.content
        );
        assert!(!refused.content.contains("outside secret"));
    }
    pool.shutdown().await;
}

#[tokio::test]
async fn a_crash_mid_call_is_an_error_and_the_next_call_restarts() {
    let s = Session::new();
    let pool = McpPool::new(vec![fixture("fx", &[])]);
    let tools = pool.tools("s1", &s.policy).await;
    assert!(tools.errors.is_empty(), "{:?}", tools.errors);
    let first = call(&tools, "mcp__fx__instance", json!({}), &s.ctx).await;
    assert_ok(&first);

    let crashed = call(&tools, "mcp__fx__crash", json!({}), &s.ctx).await;
    assert_error_containing(
        &crashed,
        &["`fx`", "exit status: 3", "crashing on purpose", "restarted"],
    );

    let second = call(&tools, "mcp__fx__instance", json!({}), &s.ctx).await;
    assert_ok(&second);
    assert_ne!(first.content, second.content, "a new process answered");
    let echo = call(&tools, "mcp__fx__echo", json!({"text": "back"}), &s.ctx).await;
    assert_eq!(echo.content, "echo: back");
    assert_eq!(s.files("fixture-started-").len(), 2);
    pool.shutdown().await;
}

#[tokio::test]
async fn a_hanging_call_times_out_and_is_cancelled() {
    let s = Session::new();
    let mut config = fixture("fx", &[]);
    config.call_timeout = Duration::from_secs(1);
    let pool = McpPool::new(vec![config]);
    let tools = pool.tools("s1", &s.policy).await;

    let started = Instant::now();
    let hung = call(&tools, "mcp__fx__hang", json!({}), &s.ctx).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_error_containing(&hung, &["did not answer within 1 s", "hang"]);

    // The server was told, and still serves.
    let cancelled = call(&tools, "mcp__fx__cancellations", json!({}), &s.ctx).await;
    assert_ok(&cancelled);
    let ids: Vec<Value> = serde_json::from_str(&cancelled.content).unwrap();
    assert_eq!(ids.len(), 1, "{}", cancelled.content);

    // The user's interrupt ends a call at once.
    let mut ctx = s.ctx.clone();
    ctx.cancel = tokio_util::sync::CancellationToken::new();
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let interrupted = call(&tools, "mcp__fx__hang", json!({}), &ctx).await;
    // Not the 1 s call timeout: the message says which ended it.
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_error_containing(&interrupted, &["interrupted"]);
    pool.shutdown().await;
}

#[tokio::test]
async fn slow_starts_work_within_the_startup_timeout_and_fail_beyond() {
    let s = Session::new();
    let mut patient = fixture("slow", &["--startup-delay-ms", "1500"]);
    patient.startup_timeout = Duration::from_secs(10);
    let pool = McpPool::new(vec![patient]);
    let tools = pool.tools("s1", &s.policy).await;
    assert!(tools.errors.is_empty(), "{:?}", tools.errors);
    let echo = call(&tools, "mcp__slow__echo", json!({"text": "late"}), &s.ctx).await;
    assert_eq!(echo.content, "echo: late");
    pool.shutdown().await;

    let mut impatient = fixture("slow", &["--startup-delay-ms", "20000"]);
    impatient.startup_timeout = Duration::from_millis(700);
    let pool = McpPool::new(vec![impatient, fixture("fast", &[])]);
    let started = Instant::now();
    let tools = pool.tools("s2", &s.policy).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(tools.errors.len(), 1, "{:?}", tools.errors);
    let error = &tools.errors[0];
    assert!(
        error.contains("`slow`") && error.contains("did not start within 700 ms"),
        "{error}"
    );
    assert!(
        error.contains("startup delay 20000 ms"),
        "stderr tail missing: {error}"
    );
    assert!(
        tools
            .tools
            .iter()
            .all(|t| !t.name().starts_with("mcp__slow__"))
    );
    let fast = call(&tools, "mcp__fast__echo", json!({"text": "ok"}), &s.ctx).await;
    assert_eq!(fast.content, "echo: ok");
    pool.shutdown().await;
}

#[tokio::test]
async fn idle_servers_stop_and_restart_on_the_next_call() {
    let s = Session::new();
    let mut config = fixture("fx", &[]);
    config.idle_timeout = Duration::from_millis(400);
    let pool = McpPool::new(vec![config]);
    let tools = pool.tools("s1", &s.policy).await;
    let first = call(&tools, "mcp__fx__instance", json!({}), &s.ctx).await;
    assert_ok(&first);

    // Stopped politely (stdin closed, it wrote its exit marker).
    let marker = format!("fixture-exited-{}", first.content);
    assert!(
        s.wait_for_file(&marker, Duration::from_secs(5)).await,
        "not stopped"
    );

    // Listing answers from the cache: nothing is started for it.
    let listed = pool.tools("s1", &s.policy).await;
    assert!(listed.errors.is_empty());
    tool(&listed, "mcp__fx__echo");
    assert_eq!(s.files("fixture-started-").len(), 1);

    let second = call(&tools, "mcp__fx__instance", json!({}), &s.ctx).await;
    assert_ok(&second);
    assert_ne!(first.content, second.content);
    assert_eq!(s.files("fixture-started-").len(), 2);
    pool.shutdown().await;
}

#[tokio::test]
async fn network_follows_the_policy() {
    let s = Session::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { while listener.accept().await.is_ok() {} });
    let target = json!({"host": "127.0.0.1", "port": port});

    let pool = McpPool::new(vec![fixture("fx", &[])]);
    let offline = pool.tools("offline", &s.policy).await;
    let refused = call(&offline, "mcp__fx__connect", target.clone(), &s.ctx).await;
    assert!(refused.content.starts_with("error:"), "{}", refused.content);

    let mut online_policy = s.policy.clone();
    online_policy.network = true;
    let online = pool.tools("online", &online_policy).await;
    let connected = call(&online, "mcp__fx__connect", target, &s.ctx).await;
    assert_eq!(connected.content, "connected");
    pool.shutdown().await;
}

#[tokio::test]
async fn sessions_are_separate_and_shut_down_politely() {
    let a = Session::new();
    let b = Session::new();
    let pool = McpPool::new(vec![fixture("fx", &[])]);
    let tools_a = pool.tools("a", &a.policy).await;
    let tools_b = pool.tools("b", &b.policy).await;
    let id_a = call(&tools_a, "mcp__fx__instance", json!({}), &a.ctx).await;
    let id_b = call(&tools_b, "mcp__fx__instance", json!({}), &b.ctx).await;
    assert_ne!(id_a.content, id_b.content);
    assert_eq!(
        a.files("fixture-started-").len(),
        1,
        "each in its own workspace"
    );

    pool.shutdown_session("a").await;
    assert_eq!(
        a.files("fixture-exited-").len(),
        1,
        "stdin was closed first"
    );
    let after = call(&tools_a, "mcp__fx__instance", json!({}), &a.ctx).await;
    assert_error_containing(&after, &["shut down"]);
    let still = call(&tools_b, "mcp__fx__instance", json!({}), &b.ctx).await;
    assert_eq!(still.content, id_b.content);

    pool.shutdown().await;
    assert_eq!(b.files("fixture-exited-").len(), 1);
    let closed = pool.tools("c", &a.policy).await;
    assert!(closed.tools.is_empty() && !closed.errors.is_empty());
}

#[tokio::test]
async fn a_missing_program_is_reported_with_its_stderr() {
    let s = Session::new();
    let missing = McpServerConfig::new(
        "missing",
        McpTransport::Stdio {
            command: "/nonexistent/mcp-server".into(),
            args: vec![],
            env: BTreeMap::new(),
            read_only_paths: Vec::new(),
            network: false,
        },
    );
    let pool = McpPool::new(vec![missing, fixture("fx", &[])]);
    let tools = pool.tools("s1", &s.policy).await;
    assert_eq!(tools.errors.len(), 1, "{:?}", tools.errors);
    assert!(tools.errors[0].contains("`missing`"), "{}", tools.errors[0]);
    assert!(
        tools.errors[0].contains("/nonexistent/mcp-server"),
        "{}",
        tools.errors[0]
    );
    tool(&tools, "mcp__fx__echo");
    pool.shutdown().await;
}

#[tokio::test]
async fn streamable_http_servers_work() {
    let s = Session::new();
    let server = http_everything().await;
    let config = McpServerConfig::new(
        "remote",
        McpTransport::Http {
            url: server.url.clone(),
            headers: BTreeMap::from([("X-Agentd-Test".to_string(), "1".to_string())]),
        },
    );
    let pool = McpPool::new(vec![config]);
    let tools = pool.tools("s1", &s.policy).await;
    assert!(tools.errors.is_empty(), "{:?}", tools.errors);
    let result = call(
        &tools,
        "mcp__remote__echo",
        json!({"message": "over http"}),
        &s.ctx,
    )
    .await;
    assert_ok(&result);
    assert_eq!(result.content, "Echo: over http");
    let sum = call(
        &tools,
        "mcp__remote__get-sum",
        json!({"a": 2, "b": 3}),
        &s.ctx,
    )
    .await;
    assert_ok(&sum);
    assert!(sum.content.contains('5'), "{}", sum.content);
    pool.shutdown().await;
}

#[tokio::test]
async fn an_http_server_under_an_allowlist_is_reached_only_as_the_list_says() {
    let s = Session::new();
    let server = http_everything().await;
    let port = url::Url::parse(&server.url).unwrap().port().unwrap();
    let under = |entry: String, url: String| {
        let mut config = McpServerConfig::new(
            "remote",
            McpTransport::Http {
                url,
                headers: BTreeMap::new(),
            },
        );
        let list = agentd_tools::egress::EgressAllowlist::parse(&[entry], false).unwrap();
        config.egress = Some(std::sync::Arc::new(list));
        McpPool::new(vec![config])
    };
    // By name, the name and its port listed: loopback is allowed for it.
    let by_name = format!("http://localhost:{port}/mcp");
    let pool = under(format!("localhost:{port}"), by_name.clone());
    let tools = pool.tools("s1", &s.policy).await;
    assert!(tools.errors.is_empty(), "{:?}", tools.errors);
    tool(&tools, "mcp__remote__echo");
    pool.shutdown().await;
    // By an address the list does not name.
    let pool = under(format!("localhost:{port}"), server.url.clone());
    let tools = pool.tools("s1", &s.policy).await;
    assert_eq!(tools.errors.len(), 1, "{:?}", tools.errors);
    assert!(
        tools.errors[0].contains("not on the network allowlist"),
        "{:?}",
        tools.errors
    );
    pool.shutdown().await;
}
