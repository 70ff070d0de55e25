//! One configured server within one session: started on first use, its tool
//! list cached, stopped when idle or dead and started again on the next call.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd_sandbox::Policy;
use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, Tool as ToolDef};
use serde_json::Value;
use tokio::time::Instant;

use super::McpServerConfig;
use super::connection::{Connection, human};
use super::result::to_tool_result;
use crate::{ToolContext, ToolResult};

/// After a failed start, tool listings report the failure again rather than
/// retrying, for this long (a hanging server would stall every listing).
const RETRY_START_AFTER: Duration = Duration::from_secs(30);

pub(crate) struct ServerSlot {
    pub(crate) config: Arc<McpServerConfig>,
    /// The session's policy, for (re)starts.
    policy: Mutex<Policy>,
    state: tokio::sync::Mutex<State>,
    activity: Arc<Mutex<Activity>>,
    closed: AtomicBool,
}

#[derive(Default)]
struct State {
    connection: Option<Arc<Connection>>,
    /// The tool list from the latest start.
    tools: Option<Vec<ToolDef>>,
    failed_start: Option<(Instant, String)>,
}

struct Activity {
    last_used: Instant,
    in_flight: usize,
}

/// Counts a call as in flight until dropped.
struct Busy(Arc<Mutex<Activity>>);

impl Drop for Busy {
    fn drop(&mut self) {
        if let Ok(mut activity) = self.0.lock() {
            activity.in_flight -= 1;
            activity.last_used = Instant::now();
        }
    }
}

impl ServerSlot {
    pub(crate) fn new(config: Arc<McpServerConfig>, policy: Policy) -> Self {
        Self {
            config,
            policy: Mutex::new(policy),
            state: tokio::sync::Mutex::new(State::default()),
            activity: Arc::new(Mutex::new(Activity {
                last_used: Instant::now(),
                in_flight: 0,
            })),
            closed: AtomicBool::new(false),
        }
    }

    /// Use `policy` for the next start (a running server keeps its own).
    pub(crate) fn set_policy(&self, policy: &Policy) {
        if let Ok(mut current) = self.policy.lock() {
            *current = policy.clone();
        }
    }

    /// The server's tools: cached when it has ever started, else it is started.
    pub(crate) async fn tools(&self) -> Result<Vec<ToolDef>, String> {
        let mut state = self.state.lock().await;
        if let Some(tools) = &state.tools {
            return Ok(tools.clone());
        }
        if let Some((at, error)) = &state.failed_start
            && at.elapsed() < RETRY_START_AFTER
        {
            return Err(error.clone());
        }
        self.start(&mut state).await?;
        Ok(state.tools.clone().unwrap_or_default())
    }

    /// Call `tool` with `input`, starting the server if need be; an `Err` is
    /// the error result.
    pub(crate) async fn call(
        &self,
        tool: &str,
        input: Value,
        ctx: &ToolContext,
    ) -> Result<ToolResult, String> {
        let server = &self.config.name;
        let arguments = match input {
            Value::Object(arguments) => arguments,
            Value::Null => Default::default(),
            other => return Err(format!("the input must be an object, got {other}")),
        };
        let (connection, _busy) = tokio::select! {
            ready = self.connection() => ready
                .map_err(|err| format!("MCP server `{server}` is not available: {err}"))?,
            () = ctx.cancel.cancelled() => return Ok(interrupted(server)),
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        // Dropping the call (timeout, cancel) sends `notifications/cancelled`.
        Ok(tokio::select! {
            result = connection.peer().call_tool(params) => match result {
                Ok(result) => to_tool_result(result),
                Err(err) => self.failed(&connection, tool, err).await,
            },
            () = tokio::time::sleep(self.config.call_timeout) => ToolResult::error(format!(
                "MCP server `{server}` did not answer within {} (tool `{tool}`); \
                 the call was cancelled",
                human(self.config.call_timeout)
            )),
            () = ctx.cancel.cancelled() => interrupted(server),
        })
    }

    /// A live connection, marked busy; started (or restarted) if need be.
    async fn connection(&self) -> Result<(Arc<Connection>, Busy), String> {
        let mut state = self.state.lock().await;
        if self.closed.load(Ordering::Acquire) {
            return Err("the session's MCP servers were shut down".to_string());
        }
        if let Some(dead) = state
            .connection
            .take_if(|connection| connection.is_closed())
        {
            tracing::info!(server = %self.config.name, "MCP server is gone; restarting it");
            tokio::spawn(async move { dead.close().await });
        }
        if state.connection.is_none() {
            self.start(&mut state).await?;
        }
        let connection = state
            .connection
            .clone()
            .ok_or_else(|| "the server did not start".to_string())?;
        // Under the state lock, so the idle reaper sees the call.
        let busy = self.busy();
        Ok((connection, busy))
    }

    async fn start(&self, state: &mut State) -> Result<(), String> {
        let policy = self.policy.lock().map_err(|err| err.to_string())?.clone();
        let started = Instant::now();
        match Connection::start(&self.config, &policy).await {
            Ok((connection, tools)) => {
                tracing::info!(
                    server = %self.config.name,
                    tools = tools.len(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "MCP server started"
                );
                state.connection = Some(Arc::new(connection));
                state.tools = Some(tools);
                state.failed_start = None;
                self.touch();
                Ok(())
            }
            Err(err) => {
                tracing::warn!(server = %self.config.name, %err, "MCP server failed to start");
                state.failed_start = Some((Instant::now(), err.clone()));
                Err(err)
            }
        }
    }

    async fn failed(
        &self,
        connection: &Arc<Connection>,
        tool: &str,
        err: ServiceError,
    ) -> ToolResult {
        let server = &self.config.name;
        match err {
            ServiceError::McpError(error) => ToolResult::error(format!(
                "MCP server `{server}` refused the call to `{tool}`: {}",
                error.message
            )),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                let what = format!(
                    "MCP server `{server}` stopped or lost its connection \
                     during the call to `{tool}` ({err})"
                );
                let message = connection.failure(&what).await;
                self.forget(connection).await;
                ToolResult::error(format!("{message}\nIt will be restarted on the next call."))
            }
            other => ToolResult::error(format!(
                "MCP call to `{tool}` on `{server}` failed: {other}"
            )),
        }
    }

    /// Drop `connection` if it is still the current one, so the next call
    /// starts afresh.
    async fn forget(&self, connection: &Arc<Connection>) {
        let mut state = self.state.lock().await;
        if let Some(old) = state
            .connection
            .take_if(|current| Arc::ptr_eq(current, connection))
        {
            tokio::spawn(async move { old.close().await });
        }
    }

    fn busy(&self) -> Busy {
        if let Ok(mut activity) = self.activity.lock() {
            activity.in_flight += 1;
            activity.last_used = Instant::now();
        }
        Busy(self.activity.clone())
    }

    fn touch(&self) {
        if let Ok(mut activity) = self.activity.lock() {
            activity.last_used = Instant::now();
        }
    }

    /// Take the connection if nothing used it for `idle_timeout`; never
    /// waits for a start or call in progress.
    pub(crate) fn take_if_idle(&self) -> Option<Arc<Connection>> {
        let mut state = self.state.try_lock().ok()?;
        let idle = self
            .activity
            .lock()
            .is_ok_and(|a| a.in_flight == 0 && a.last_used.elapsed() >= self.config.idle_timeout);
        if idle { state.connection.take() } else { None }
    }

    /// Stop the server for good: later calls fail.
    pub(crate) async fn shutdown(&self) {
        self.closed.store(true, Ordering::Release);
        let connection = self.state.lock().await.connection.take();
        if let Some(connection) = connection {
            connection.close().await;
        }
    }
}

fn interrupted(server: &str) -> ToolResult {
    ToolResult::error(format!(
        "[interrupted by the user; the call to MCP server `{server}` was cancelled]"
    ))
}
