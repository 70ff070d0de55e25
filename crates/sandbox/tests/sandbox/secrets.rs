//! Secrets in the server's environment never enter a sandbox.
//!
//! Setting variables inside a running multi-threaded test is unsound, so the
//! test re-runs this test binary, filtered to itself alone, with the secrets
//! set in that copy's environment from its start, and that copy runs the probe.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use agentd_sandbox::Policy;
use support::{layout, run};

const SECRET_VARS: [(&str, &str); 2] = [
    ("ANTHROPIC_API_KEY", "sk-ant-agentd-test-secret"),
    ("AGENTD_TOKEN", "agentd-token-test-secret"),
];
const PROBE: &str = "AGENTD_SECRET_PROBE";

#[test]
fn secrets_in_the_environment_never_enter_a_sandbox() {
    if std::env::var_os(PROBE).is_some() {
        tokio::runtime::Runtime::new().unwrap().block_on(probe());
        return;
    }
    // This test's name as the harness knows it: the module path without the crate.
    let module = module_path!().split_once("::").unwrap().1;
    let name = format!("{module}::secrets_in_the_environment_never_enter_a_sandbox");
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(PROBE, "1")
        .envs(SECRET_VARS)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("secret probe checked"), "{stdout}");
    assert!(stdout.contains("1 passed"), "{stdout}");
}

async fn probe() {
    for (key, value) in SECRET_VARS {
        assert_eq!(
            std::env::var(key).as_deref(),
            Ok(value),
            "the probe runs with {key} set"
        );
    }
    let l = layout();
    for unsandboxed in [false, true] {
        let mut policy = Policy::new(&l.ws);
        policy.unsandboxed = unsandboxed;
        // Unsandboxed, /proc shows the server itself; only the environment counts there.
        let command = if unsandboxed {
            "env"
        } else {
            "env; cat /proc/self/environ /proc/$PPID/environ /proc/1/environ"
        };
        let outcome = run(&policy, command).await;
        assert!(outcome.stdout.contains("HOME="), "env ran: {outcome:?}");
        for (key, value) in SECRET_VARS {
            assert!(
                !outcome.stdout.contains(key) && !outcome.stdout.contains(value),
                "{key} leaked (unsandboxed: {unsandboxed}): {outcome:?}"
            );
        }
    }
    println!("secret probe checked");
}

/// A policy's secret variable reaches the command but no process's command
/// line, which every user of the host can read.
#[tokio::test]
async fn a_secret_variable_is_in_no_command_line() {
    const VALUE: &str = "s3cret-value-in-env-9d1";
    let l = layout();
    let mut policy = Policy::new(&l.ws);
    policy.env.insert("API_TOKEN".into(), VALUE.into());
    policy.env.insert("PLAIN".into(), "plain-value".into());
    policy.secret_env.insert("API_TOKEN".into());
    let marker = l.ws.join("started");
    let command = format!(
        "echo \"$API_TOKEN $PLAIN\" > seen; touch {}; sleep 3",
        marker.display()
    );
    let running = tokio::spawn(async move { run(&policy, &command).await });
    let mut looked = 0;
    while !running.is_finished() {
        if marker.exists() {
            for entry in std::fs::read_dir("/proc").unwrap().flatten() {
                if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
                    let line = String::from_utf8_lossy(&cmdline);
                    assert!(!line.contains(VALUE), "in a command line: {line}");
                    looked += 1;
                }
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let outcome = running.await.unwrap();
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    assert!(looked > 0, "the command lines were read while it ran");
    let seen = std::fs::read_to_string(l.ws.join("seen")).unwrap();
    assert_eq!(seen.trim(), format!("{VALUE} plain-value"));
}
