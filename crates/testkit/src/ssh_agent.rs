//! A real `ssh-agent` on the host for the tests of `ssh_agent = true`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::path::PathBuf;
use std::process::Command;

/// An `ssh-agent` listening at a fresh socket, killed on drop.
pub struct HostAgent {
    _dir: tempfile::TempDir,
    pub socket: PathBuf,
    pid: String,
}

impl HostAgent {
    /// Started as `uid` when given (the agent refuses peers of another uid).
    pub fn start(uid: Option<u32>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("agent.sock");
        let mut command = match uid {
            Some(uid) => {
                std::os::unix::fs::chown(dir.path(), Some(uid), Some(uid)).unwrap();
                let mut setpriv = Command::new("setpriv");
                setpriv.args([
                    format!("--reuid={uid}"),
                    format!("--regid={uid}"),
                    "--clear-groups".into(),
                    "ssh-agent".into(),
                ]);
                setpriv
            }
            None => Command::new("ssh-agent"),
        };
        let output = command
            .args(["-s", "-a"])
            .arg(&socket)
            .output()
            .expect("ssh-agent (openssh-client) must be installed");
        assert!(output.status.success(), "{output:?}");
        let text = String::from_utf8_lossy(&output.stdout);
        let pid = text
            .split(';')
            .find_map(|part| part.trim().strip_prefix("SSH_AGENT_PID="))
            .unwrap()
            .to_string();
        Self {
            _dir: dir,
            socket,
            pid,
        }
    }
}

impl Drop for HostAgent {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(&self.pid).status();
    }
}
