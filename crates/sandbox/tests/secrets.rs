//! Secrets in the server's environment never enter a sandbox.
//!
//! Setting variables inside a running multi-threaded test is unsound, so this
//! target has no test harness: it re-runs itself with the secrets set in its
//! environment, and that copy runs the probe.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use agentd_sandbox::Policy;
use support::{layout, run};

const SECRET_VARS: [(&str, &str); 2] = [
    ("ANTHROPIC_API_KEY", "sk-ant-agentd-test-secret"),
    ("AGENTD_TOKEN", "agentd-token-test-secret"),
];
const PROBE: &str = "AGENTD_SECRET_PROBE";

fn main() {
    if std::env::var_os(PROBE).is_some() {
        tokio::runtime::Runtime::new().unwrap().block_on(probe());
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .env(PROBE, "1")
        .envs(SECRET_VARS)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("secret probe checked"), "{stdout}");
    println!("1 passed, 0 failed");
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
