//! The processes of the peer comparison (`bench/src/bin/peer.rs`) and the
//! cluster benchmark: the workspace and the model's script they start from, the
//! model server, `agentd` and `claude`, and what they cost (`wait4`, RSS, CPU).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// The workspace file every turn reads, runs `true` next to, and edits.
pub const FILE: &str = "src/main.txt";

/// The workspace contents both tools start from.
/// They belong to the workspace's owner, as the agent's own files would (a
/// root server's agent works as its own uid).
pub fn seed_workspace(dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    std::fs::create_dir_all(dir.join("src"))?;
    let text: String = (1..=40).map(|i| format!("counter = {i}\n")).collect();
    std::fs::write(dir.join(FILE), text)?;
    let owner = std::fs::metadata(dir)?;
    for made in [dir.join("src"), dir.join(FILE)] {
        std::os::unix::fs::chown(made, Some(owner.uid()), Some(owner.gid()))?;
    }
    Ok(())
}

/// ~2.5 KiB of prose for each reply.
fn prose(tag: &str) -> String {
    let sentence = "The scripted model explains what it is doing at some length, so that \
                    every reply carries a realistic amount of text to stream and store. ";
    format!("{tag} {}", sentence.repeat(16))
}

/// The conversation of one turn: three model calls (text + Read + Bash, text +
/// Edit, text), a few KiB of text each. `file` is the path the tools get:
/// relative for agentd's server sessions, absolute for the `claude` CLI (its
/// Read and Edit require one).
pub fn script(file: &str) -> Value {
    json!({"replies": [
        {"repeat": true, "when": {"last_user_contains": "bench turn"}, "content": [
            {"type": "text", "text": prose("Let me read the file and run the check.")},
            {"type": "tool_use", "name": "Read", "input": {"file_path": file}},
            {"type": "tool_use", "name": "Bash", "input": {"command": "true", "description": "check"}}
        ]},
        {"repeat": true, "when": {"last_tool_name": "Bash"}, "content": [
            {"type": "text", "text": prose("The check passed; now the edit.")},
            {"type": "tool_use", "name": "Edit", "input": {
                "file_path": file, "old_string": "counter", "new_string": "counter+", "replace_all": true}}
        ]},
        {"repeat": true, "when": {"last_tool_name": "Edit"}, "content": [
            {"type": "text", "text": prose("BENCH-DONE.")}
        ]},
        // Side requests the CLI may make on its own (titles, topic checks).
        {"repeat": true, "content": [{"type": "text", "text": "{\"isNewTopic\": false, \"title\": \"Bench\"}"}]}
    ]})
}

/// `agentd-model-server` (beside `agentd`) on `script`; it and its URL.
pub fn start_model_server(agentd: &Path, script: &Path) -> Result<(Child, String)> {
    let server = agentd.with_file_name("agentd-model-server");
    agentd_bench::start_model_server(&server, script)
}

pub fn claude_command(claude: &Path, home: &Path, url: &str, cwd: &Path) -> Command {
    let mut command = Command::new(claude);
    command
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
        .env("ANTHROPIC_BASE_URL", url)
        .env("ANTHROPIC_API_KEY", "any")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("IS_SANDBOX", "1");
    command
}

/// Environment of `agentd`: its own data dir, against the model server.
pub fn agentd_command(agentd: &Path, data: &Path, url: &str) -> Command {
    let mut command = Command::new(agentd);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", data)
        .env("AGENTD_DATA_DIR", data)
        .env("AGENTD_CONFIG", data.join("agentd.toml"))
        .env("AGENTD_LOG", "warn")
        .env("ANTHROPIC_BASE_URL", url)
        .env("ANTHROPIC_API_KEY", "any");
    command
}

/// How a waited-for process ran: its resource usage, the children it
/// waited for included.
pub struct Reaped {
    pub success: bool,
    pub cpu: Duration,
    pub max_rss_kib: u64,
    /// Thread switches: waits, preemptions.
    pub switches: (u64, u64),
}

/// Wait for `child` with `wait4`, which also returns its resource usage.
/// The `Child` must not be waited for otherwise.
#[allow(unsafe_code)]
pub fn wait4(child: &Child) -> Result<Reaped> {
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: all-zero is a valid `rusage` (plain integers).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `usage` are valid for writes for the call's duration.
        let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if got == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err).context("wait4");
        }
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let cpu = tv(usage.ru_utime) + tv(usage.ru_stime);
    Ok(Reaped {
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        cpu,
        max_rss_kib: usage.ru_maxrss as u64,
        switches: (usage.ru_nvcsw as u64, usage.ru_nivcsw as u64),
    })
}

/// VmRSS of a live process, KiB.
pub fn rss_kib(pid: u32) -> u64 {
    proc_field(pid, "status", |s| Some(named_value(s, "VmRSS:")))
}

/// The number after `name` on its line of a `/proc` file ("VmRSS:  812 kB",
/// "syscr: 40"); 0 when there is none.
pub fn named_value(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU of a live process, its waited children included.
pub fn cpu_of(pid: u32) -> Duration {
    let ticks = proc_field(pid, "stat", |s| {
        let after = s.rsplit_once(')')?.1;
        let f: Vec<u64> = after
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        // utime stime cutime cstime: fields 14–17 of stat, 12–15 after the name.
        Some(f.get(11)? + f.get(12)? + f.get(13)? + f.get(14)?)
    });
    Duration::from_millis(ticks * 10)
}

fn proc_field(pid: u32, file: &str, get: impl Fn(&str) -> Option<u64>) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .ok()
        .and_then(|s| get(&s))
        .unwrap_or(0)
}

/// Now, in microseconds since the epoch.
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// Raise the open-file limit to the hard limit (children inherit it).
pub fn raise_nofile() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    // Root may raise the hard limit too; others get the hard limit.
    let wanted = limit.maximum.map(|max| max.max(1 << 16));
    let raised = setrlimit(
        Resource::Nofile,
        rustix::process::Rlimit {
            current: wanted,
            maximum: wanted,
        },
    );
    if raised.is_err() {
        limit.current = limit.maximum;
        let _ = setrlimit(Resource::Nofile, limit);
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// `agentd serve` on a loopback port; returns it and its `host:port`.
pub async fn start_serve(agentd: &Path, data: &Path, url: &str) -> Result<(Child, String)> {
    start_serve_with(agentd, data, url, "").await
}

/// [`start_serve`] with more `agentd.toml` (say, a `[database]` section).
pub async fn start_serve_with(
    agentd: &Path,
    data: &Path,
    url: &str,
    more_toml: &str,
) -> Result<(Child, String)> {
    // One user holds every stream here: a shared server's caps per user and
    // on connections are lifted.
    std::fs::write(
        data.join("agentd.toml"),
        format!(
            "[server]\nauth = \"none\"\n{}[profiles.default]\nmode = \"bypass\"\n{more_toml}",
            agentd_bench::UNCAPPED
        ),
    )?;
    let mut child = agentd_command(agentd, data, url)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take().context("no stdout")?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().and_then(|l| l.ok()).unwrap_or_default();
        let _ = tx.send(first);
        for _ in lines {}
    });
    let line = tokio::time::timeout(Duration::from_secs(30), rx)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .map(|a| a.trim_end_matches('/').to_string());
    match addr {
        Some(addr) => Ok((child, addr)),
        // Not left running behind the failed scenario.
        None => {
            stop(child);
            bail!("agentd serve printed no URL within 30 s (first line: {line:?})")
        }
    }
}

/// Kill and reap a helper process.
pub fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Where an HTTP-created session keeps its files.
pub fn session_workspace(data: &Path, id: &str) -> PathBuf {
    data.join("workspaces").join(id)
}
