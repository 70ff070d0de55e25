//! Which Tokio runtime runs what. `agentd serve` runs turns on a runtime of
//! their own: a turn burns CPU (building requests, parsing replies, starting
//! tools), and with hundreds of them runnable, every hop from a committed
//! event to its SSE clients would queue behind them. On the serving runtime
//! those hops (event writer, forwarder, streams) wait for the OS scheduler
//! only, which favours threads that mostly sleep.

use std::future::Future;

use tokio::runtime::Handle;
use tokio::task::JoinHandle;

/// Where turns and the event hand-off run; by default both on the current
/// runtime (tests, `agentd run`).
#[derive(Debug, Clone, Default)]
pub struct Threads {
    turns: Option<Handle>,
    serving: Option<Handle>,
}

impl Threads {
    /// Turns on `turns`, everything else on `serving`.
    pub fn split(turns: Handle, serving: Handle) -> Self {
        Self {
            turns: Some(turns),
            serving: Some(serving),
        }
    }

    /// The runtime for turns; `None` for the current one.
    pub fn turns(&self) -> Option<&Handle> {
        self.turns.as_ref()
    }

    /// The runtime that serves HTTP and hands events to streams.
    pub fn serving(&self) -> Handle {
        self.serving.clone().unwrap_or_else(Handle::current)
    }

    /// Spawn on the serving runtime.
    pub fn spawn_serving<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.serving {
            Some(handle) => handle.spawn(future),
            None => tokio::spawn(future),
        }
    }
}
