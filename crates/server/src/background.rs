//! Each session's background commands (`Bash` with `run_in_background`),
//! kept by this process: listed in `GET /v1/sessions/{id}`, killed when the
//! session is deleted or the server stops (a restart ends them anyway: their
//! sandboxes die with the server).
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use agentd_tools::{BackgroundShells, ShellInfo};

#[derive(Clone, Default)]
pub struct SessionShells(Arc<Mutex<HashMap<String, BackgroundShells>>>);

impl SessionShells {
    fn map(&self) -> MutexGuard<'_, HashMap<String, BackgroundShells>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session's registry, made on first use. Its ids start past
    /// `last_seq`, which only grows, so no id from before a restart (when
    /// the session had fewer events) is given again.
    pub fn for_session(&self, session_id: &str, idle: Duration, last_seq: u64) -> BackgroundShells {
        self.map()
            .entry(session_id.to_string())
            .or_insert_with(|| BackgroundShells::new(idle, last_seq + 1))
            .clone()
    }

    /// The session's commands still running here, oldest first.
    pub fn running(&self, session_id: &str) -> Vec<ShellInfo> {
        let shells = self.map().get(session_id).cloned();
        shells.map(|shells| shells.running()).unwrap_or_default()
    }

    /// Kill the session's commands and forget them.
    pub async fn end_session(&self, session_id: &str) {
        let shells = self.map().remove(session_id);
        if let Some(shells) = shells {
            shells.end_all().await;
        }
    }

    /// Kill every session's commands (the server is stopping).
    pub async fn shutdown(&self) {
        let all: Vec<BackgroundShells> = self.map().drain().map(|(_, shells)| shells).collect();
        futures::future::join_all(all.iter().map(BackgroundShells::end_all)).await;
    }
}
