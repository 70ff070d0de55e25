//! The lifecycle of a session's CLI: the live entry of each session (its
//! process when warm, its MCP endpoint), starting a process (warm, or fresh
//! and resumed from the transcript in the store), stopping idle ones, and
//! stopping them all at shutdown.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, OwnedMutexGuard};

use super::mcp::{Announced, McpEndpoint};
use super::process::{Launch, Process, Stopped};
use super::{ClaudeCode, ClaudeCodeSettings, TurnRequest, transcript};

/// How long a stopping CLI gets after stdin closes, and after TERM.
pub(super) const STOP_GRACE: Duration = Duration::from_secs(3);
/// A warm process without a turn for this long is stopped.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// How long shutdown waits for running turns to let go of their CLIs; the
/// processes still held then are killed when the server's tasks are dropped.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(20);
/// The reaper looks every quarter of the shortest idle timeout, within these.
const REAP_TICK_MIN: Duration = Duration::from_millis(100);
const REAP_TICK_MAX: Duration = Duration::from_secs(5);

/// One live session: its CLI (when warm) and its MCP endpoint.
pub(super) struct Live {
    pub(super) process: Option<Process>,
    /// What the process was started with: a turn with other settings (a
    /// model, a key, an endpoint, a command) starts a fresh one.
    pub(super) settings: ClaudeCodeSettings,
    pub(super) mcp: McpEndpoint,
    pub(super) announced: Announced,
    pub(super) config_dir: PathBuf,
    pub(super) cli_session_id: Option<String>,
    /// What the CLI's transcript holds once it has written the last turn
    /// (see [`transcript::save`]).
    pub(super) transcript_marker: Option<String>,
    pub(super) last_used: Instant,
    pub(super) idle_timeout: Duration,

    /// Taken out of the map (idle, or the session was deleted): a turn that
    /// waited for it takes a fresh entry instead.
    retired: bool,
}

type Entry = Arc<Mutex<Live>>;

impl ClaudeCode {
    fn entry(&self, session_id: &str) -> Option<Entry> {
        self.live.lock().ok()?.get(session_id).cloned()
    }

    /// The session's live entry, locked for one turn; created (with its MCP
    /// endpoint) on its first turn, or after it was retired.
    pub(super) async fn enter(
        &self,
        request: &TurnRequest<'_>,
    ) -> Result<OwnedMutexGuard<Live>, String> {
        self.start_reaper(request.settings.idle_timeout);
        loop {
            let entry = match self.entry(&request.session_id) {
                Some(entry) => entry,
                None => {
                    let announced: Announced = Default::default();
                    // Its tools are set at the start of each turn.
                    let mcp = McpEndpoint::start(announced.clone()).await.map_err(|err| {
                        format!("could not serve agentd's tools to the CLI: {err}")
                    })?;
                    let entry = Arc::new(Mutex::new(Live {
                        process: None,
                        settings: request.settings.clone(),
                        mcp,
                        announced,
                        config_dir: request
                            .data_dir
                            .join("claude-code")
                            .join(&request.session_id)
                            .join(".claude"),
                        cli_session_id: None,
                        transcript_marker: None,
                        last_used: Instant::now(),
                        idle_timeout: request.settings.idle_timeout,
                        retired: false,
                    }));
                    match self.live.lock() {
                        Ok(mut map) => map
                            .entry(request.session_id.to_string())
                            .or_insert(entry)
                            .clone(),
                        Err(_) => entry,
                    }
                }
            };
            let live = entry.lock_owned().await;
            if !live.retired {
                return Ok(live);
            }
        }
    }

    /// Start the idle reaper once, and make it look often enough for
    /// `idle_timeout`.
    fn start_reaper(&self, idle_timeout: Duration) {
        let tick = (idle_timeout / 4).clamp(REAP_TICK_MIN, REAP_TICK_MAX);
        self.reap_tick_ms
            .fetch_min(tick.as_millis() as u64, Ordering::Relaxed);
        let this = self.clone();
        self.reaper.get_or_init(|| {
            tokio::spawn(async move {
                loop {
                    let tick = this.reap_tick_ms.load(Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(tick)).await;
                    this.reap().await;
                }
            });
        });
    }

    /// Stop the CLIs idle for longer than their timeout, and forget their
    /// entries (the MCP endpoint stops with it); the next turn resumes from
    /// the store.
    async fn reap(&self) {
        let entries: Vec<(String, Entry)> = self
            .live
            .lock()
            .map(|l| l.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        for (id, entry) in entries {
            let Ok(mut live) = entry.clone().try_lock_owned() else {
                continue; // a turn is running, or its transcript is being kept
            };
            if live.retired {
                continue;
            }
            if live.last_used.elapsed() < live.idle_timeout {
                // A CLI that died between turns is reaped now, not left a
                // zombie until the timeout; the next turn starts a fresh one.
                if live.process.as_mut().is_some_and(Process::exited)
                    && let Some(stopped) = stop_process(&mut live).await
                {
                    tracing::warn!(session = %id, status = ?stopped.status, stderr = %stopped.stderr, "a claude process exited between turns");
                }
                continue;
            }
            // Stopped before the entry leaves the map, and under its lock: a
            // new turn never runs a second CLI in the same config dir.
            live.retired = true;
            if let Some(process) = live.process.take() {
                tracing::info!(session = %id, pid = ?process.pid(), "stopping an idle claude process");
                process.stop(STOP_GRACE).await;
            }
            self.forget(&id, &entry);
        }
    }

    /// Remove `entry` from the map if it is still the session's.
    fn forget(&self, session_id: &str, entry: &Entry) {
        if let Ok(mut map) = self.live.lock()
            && map.get(session_id).is_some_and(|e| Arc::ptr_eq(e, entry))
        {
            map.remove(session_id);
        }
    }

    /// Stop one session's CLI (e.g. the session was deleted).
    pub async fn stop_session(&self, session_id: &str) {
        let Some(entry) = self.entry(session_id) else {
            return;
        };
        let mut live = entry.lock().await;
        live.retired = true;
        if let Some(process) = live.process.take() {
            process.stop(STOP_GRACE).await;
        }
        self.forget(session_id, &entry);
    }

    /// Stop every CLI: close stdin, wait, TERM, KILL. Bounded: a CLI still
    /// held by a turn after [`SHUTDOWN_WAIT`] is killed with its process group
    /// when the turn's task is dropped.
    pub async fn shutdown(&self) {
        let ids: Vec<String> = self
            .live
            .lock()
            .map(|l| l.keys().cloned().collect())
            .unwrap_or_default();
        let all = futures::future::join_all(ids.iter().map(|id| self.stop_session(id)));
        if tokio::time::timeout(SHUTDOWN_WAIT, all).await.is_err() {
            tracing::warn!(
                "claude processes still busy {SHUTDOWN_WAIT:?} into shutdown; killing them"
            );
        }
    }
}

/// Make sure a CLI runs for this session: warm, or fresh and resumed from the
/// transcript kept in the store.
pub(super) async fn ensure_process(
    live: &mut Live,
    request: &TurnRequest<'_>,
) -> Result<(), String> {
    live.idle_timeout = request.settings.idle_timeout;
    let warm = match live.process.as_mut() {
        Some(process) => !process.exited() && live.settings == request.settings,
        None => false,
    };
    if warm {
        return Ok(());
    }
    stop_process(live).await;
    // A fresh config dir each start: what the CLI resumes comes from the store.
    let _ = tokio::fs::remove_dir_all(&live.config_dir).await;
    // Private: it holds the transcript (and the CLI's settings).
    tokio::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&live.config_dir)
        .await
        .map_err(|e| format!("cannot create {}: {e}", live.config_dir.display()))?;
    let pointer = transcript::latest(
        request.store.as_ref(),
        &request.session_id,
        request.session_turns,
    )
    .await
    .map_err(|e| e.to_string())?;
    if let Some(pointer) = &pointer {
        transcript::restore(request.store.as_ref(), pointer, &live.config_dir).await?;
    }
    let launch = Launch {
        settings: request.settings.clone(),
        workspace: request.workspace.clone(),
        config_dir: live.config_dir.clone(),
        mcp_config: live.mcp.config(),
        resume: pointer.map(|pointer| pointer.cli_session_id),
        max_turns: request.max_turns,
    };
    let process = Process::spawn(&launch)
        .map_err(|e| format!("could not start {}: {e}", launch.settings.command.display()))?;
    tracing::info!(session = request.session_id.as_str(), pid = ?process.pid(), resume = ?launch.resume, "claude process started");
    live.process = Some(process);
    live.settings = request.settings.clone();
    Ok(())
}

/// Stop the session's CLI, if it has one; how it ended.
pub(super) async fn stop_process(live: &mut Live) -> Option<Stopped> {
    let process = live.process.take()?;
    let pid = process.pid();
    let stopped = process.stop(STOP_GRACE).await;
    tracing::info!(pid = ?pid, status = ?stopped.status, "claude process stopped");
    Some(stopped)
}
