//! Running a checked argv: in the session's sandbox, or on the host as the
//! configured unprivileged user; stdout and stderr capped, a timeout, and
//! everything it started killed when it ends.
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use agentd_sandbox::confined::FsIdentity;
use agentd_sandbox::{Policy, Sandbox, SecretMask};
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use super::spec::{CommandSpec, RunsOn};

/// Bytes of stdout kept (stderr keeps its last `STDERR_TAIL_BYTES`).
pub const OUTPUT_CAP: usize = 64 * 1024;
/// How long output is still read once the command itself has exited.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);

/// How a run ended.
#[derive(Debug, Clone)]
pub struct CommandRun {
    /// None when killed (timeout, interrupt, signal).
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Stdout beyond [`OUTPUT_CAP`] was dropped.
    pub truncated: bool,
    pub timed_out: bool,
    pub cancelled: bool,
    pub duration: Duration,
}

impl CommandRun {
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// The run as the model (or a transcript reader) reads it.
    pub fn summary(&self) -> String {
        let status = match (self.exit_code, self.timed_out, self.cancelled) {
            (_, true, _) => "timed out (killed)".to_string(),
            (_, _, true) => "interrupted (killed)".to_string(),
            (Some(code), ..) => format!("exit code {code}"),
            (None, ..) => "killed by a signal".to_string(),
        };
        let mut text = status;
        if !self.stdout.is_empty() {
            text.push_str("\n--- stdout ---\n");
            text.push_str(&self.stdout);
            if self.truncated {
                text.push_str("\n[stdout truncated]");
            }
        }
        if !self.stderr.is_empty() {
            text.push_str("\n--- stderr ---\n");
            text.push_str(&self.stderr);
        }
        text
    }
}

/// A command's own variables for one run: its `env` as the server filled it
/// in (identity placeholders, see [`EnvFiller`]), and which of them hold a
/// secret (a token): those are passed outside bubblewrap's command line and
/// masked in what the run shows.
#[derive(Clone, Default)]
pub struct CommandEnv {
    pub vars: BTreeMap<String, String>,
    pub secret: BTreeSet<String>,
}

/// Names only: values may be tokens.
impl std::fmt::Debug for CommandEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandEnv")
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .field("secret", &self.secret)
            .finish()
    }
}

impl CommandEnv {
    /// The command's `env` exactly as configured, nothing secret.
    pub fn as_written(spec: &CommandSpec) -> Self {
        Self {
            vars: spec.env.clone(),
            secret: BTreeSet::new(),
        }
    }
}

/// Fills in a command's `env` for one session, at each run (the server's
/// `{user}`, `{session}` and `{user_token}`).
#[async_trait::async_trait]
pub trait EnvFiller: Send + Sync {
    async fn fill(&self, spec: &CommandSpec) -> Result<CommandEnv, String>;
}

/// The command's environment: `base` (the sandbox's variables; none on the
/// host) and the command's own variables over it.
pub fn command_env(env: &CommandEnv, base: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut all = base.clone();
    all.extend(
        env.vars
            .iter()
            .map(|(key, value)| (key.clone(), value.clone())),
    );
    all
}

/// Where and as whom `spec` runs: the session's sandbox policy with the
/// command's variables, or a host policy of its own.
pub(crate) fn policy_for(
    spec: &CommandSpec,
    env: &CommandEnv,
    session: &Policy,
) -> Result<Policy, String> {
    let mut policy = policy_on(spec, env, session)?;
    // Those marked secret (passwords): never on bubblewrap's command line,
    // masked in what it prints. Plain ones are not masked: a value such as
    // `C` or a user name would be masked all over the output.
    policy.secret_env.extend(spec.secret_env.iter().cloned());
    Ok(policy)
}

fn policy_on(spec: &CommandSpec, env: &CommandEnv, session: &Policy) -> Result<Policy, String> {
    match &spec.runs_on {
        RunsOn::Sandbox => {
            if session.unsandboxed {
                return Err(format!(
                    "{} runs in the session's sandbox, and this profile has sandbox = \"off\": refused, nothing ran",
                    spec.name
                ));
            }
            let mut policy = session.clone();
            policy.env = command_env(env, &session.env);
            policy.secret_env.extend(env.secret.iter().cloned());
            Ok(policy)
        }
        RunsOn::Host { uid, gid, home, .. } => {
            if *uid == 0 || *gid == 0 {
                return Err("refusing to run a command on the host as root".into());
            }
            let euid = rustix::process::geteuid();
            if euid.as_raw() == *uid {
                return Err(format!(
                    "this command would run on the host as agentd's own uid {uid}, which can read agentd's data: refused"
                ));
            }
            if !euid.is_root() {
                return Err(format!(
                    "this command runs on the host as uid {uid}, and agentd (uid {}) cannot switch to it",
                    euid.as_raw()
                ));
            }
            let dir = if home.is_dir() {
                home.clone()
            } else {
                "/".into()
            };
            let mut policy = Policy::new(dir);
            policy.unsandboxed = true;
            policy.host_command = true;
            policy.run_as = Some(FsIdentity {
                uid: *uid,
                gid: *gid,
            });
            policy.env = command_env(env, &BTreeMap::new());
            policy.secret_env = env.secret.clone();
            Ok(policy)
        }
    }
}

/// Run `argv` (from [`super::argv_for`]) as `spec` says, with `env` (its
/// variables for this run), within its timeout. `Err` when it could not
/// start.
pub async fn run_command(
    sandbox: &Sandbox,
    spec: &CommandSpec,
    env: &CommandEnv,
    argv: &[String],
    session: &Policy,
    cancel: &CancellationToken,
) -> Result<CommandRun, String> {
    let policy = policy_for(spec, env, session)?;
    let started = Instant::now();
    // Through the workspace gate like a cold Bash, its pass held to the end.
    let started_process = sandbox
        .spawn_gated(&policy, argv, cancel)
        .await
        .map_err(|err| format!("{} could not start: {err}", spec.name))?;
    let Some(mut process) = started_process else {
        return Ok(CommandRun {
            exit_code: None,
            stdout: String::new(),
            stderr: String::new(),
            truncated: false,
            timed_out: false,
            cancelled: true,
            duration: started.elapsed(),
        });
    };
    drop(process.take_stdin());
    let mut stdout = process.take_stdout();
    let mask = SecretMask::new(policy.secrets());
    // Past the cap, enough to mask a secret that starts before it whole.
    let keep = OUTPUT_CAP + mask.hold_back();
    let mut kept = Vec::new();
    let mut dropped = 0u64;
    let read_all = async {
        let reading = async {
            if let Some(pipe) = stdout.as_mut() {
                let mut buffer = [0u8; 8192];
                loop {
                    match pipe.read(&mut buffer).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let room = keep.saturating_sub(kept.len()).min(n);
                            kept.extend_from_slice(&buffer[..room]);
                            dropped += (n - room) as u64;
                        }
                    }
                }
            }
        };
        tokio::pin!(reading);
        tokio::select! {
            () = &mut reading => process.exited().await,
            () = process.exited() => {
                // A child it left behind (`cmd &` on the host) may hold stdout
                // open: take what is there, not wait for the timeout.
                let _ = tokio::time::timeout(DRAIN_AFTER_EXIT, reading).await;
            }
        }
    };
    let (timed_out, cancelled) = tokio::select! {
        () = read_all => (false, false),
        () = tokio::time::sleep(spec.timeout) => (true, false),
        () = cancel.cancelled() => (false, true),
    };
    if timed_out || cancelled {
        process.kill();
        process.exited().await;
    }
    let text = String::from_utf8_lossy(&kept);
    // Cut at the cap once masked: never in the middle of a secret.
    let (stdout, shown) = mask.mask_until(&text, OUTPUT_CAP.min(text.len()));
    let run = CommandRun {
        exit_code: process.exit_status().and_then(|status| status.code()),
        stdout,
        stderr: mask.mask(&process.stderr_tail()),
        truncated: dropped > 0 || shown < text.len(),
        timed_out,
        cancelled,
        duration: started.elapsed(),
    };
    process.shutdown().await;
    Ok(run)
}
