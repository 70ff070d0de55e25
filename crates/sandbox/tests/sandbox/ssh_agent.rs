//! `Policy::ssh_agent`: a real `ssh-agent` on the host, reached from inside
//! the sandbox through its socket alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::path::Path;

use agentd_sandbox::confined::FsIdentity;
use agentd_sandbox::{Policy, SSH_AGENT_SOCKET};
use agentd_testkit::ssh_agent::HostAgent;

use crate::support::{layout, run};

const AGENT_UID: u32 = 231_019;

async fn check_reaches(policy: &Policy, socket: &Path) {
    let script = "echo \"sock=$SSH_AUTH_SOCK\"; ssh-add -l; echo \"exit=$?\"; ls /run/agentd";
    let mut policy = policy.clone();
    policy.ssh_agent = Some(socket.to_path_buf());
    let outcome = run(&policy, script).await;
    let all = format!("{}{}", outcome.stdout, outcome.stderr);
    assert!(
        all.contains(&format!("sock={SSH_AGENT_SOCKET}")),
        "{outcome:?}"
    );
    assert!(all.contains("The agent has no identities."), "{outcome:?}");
    assert!(all.contains("exit=1"), "{outcome:?}");
    assert!(!all.contains("Could not open a connection"), "{outcome:?}");
    // The socket alone: not its host directory's other entries.
    assert_eq!(outcome.stdout.lines().last(), Some("ssh-agent.sock"));
}

#[tokio::test]
async fn ssh_add_inside_reaches_the_host_agent() {
    let l = layout();
    let agent = HostAgent::start(None);
    check_reaches(&Policy::new(&l.ws), &agent.socket).await;

    // Without it, nothing is bound and no variable is set.
    let outcome = run(
        &Policy::new(&l.ws),
        "echo \"[$SSH_AUTH_SOCK]\"; ls /run/agentd",
    )
    .await;
    assert!(outcome.stdout.starts_with("[]"), "{outcome:?}");
    assert!(outcome.stderr.contains("No such file"), "{outcome:?}");
}

#[tokio::test]
async fn a_root_servers_sandbox_reaches_its_users_agent() {
    if !rustix::process::geteuid().is_root() {
        return; // run_as only takes effect for a root server
    }
    let l = layout();
    std::os::unix::fs::chown(&l.ws, Some(AGENT_UID), Some(AGENT_UID)).unwrap();
    let agent = HostAgent::start(Some(AGENT_UID));
    let mut policy = Policy::new(&l.ws);
    policy.run_as = Some(FsIdentity {
        uid: AGENT_UID,
        gid: AGENT_UID,
    });
    check_reaches(&policy, &agent.socket).await;
}
