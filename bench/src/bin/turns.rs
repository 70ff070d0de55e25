//! N sequential tool-using turns in one session, measuring agentd's own cost.
//!
//! The model is the testkit model server in its own process (`agentd-model-server`,
//! Anthropic wire format over loopback HTTP); the tools are the
//! real ones (Read, sandboxed Bash, Edit); events and messages go to a real
//! SQLite store. Model and tool time are measured around each call and
//! subtracted, so "host overhead" is everything else a turn costs: building
//! requests, parsing streams, coalescing and storing events and messages.
//!
//!     cargo build --release -p agentd-cli -p agentd-bench
//!     target/release/turns [N]

use agentd_store::prelude::*;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentd_bench::{micros, peak_rss_kib, quantile};
use agentd_engine::{Agent, AgentConfig, TurnInput, TurnLimits};
use agentd_model::anthropic::{AnthropicClient, AnthropicConfig};
use agentd_model::{ModelClient, ModelError, ModelEvent, ModelRequest, ModelStream};
use agentd_protocol::{Message, TurnStatus};
use agentd_server::StoreSink;
use agentd_store::NewSession;
use agentd_store::sqlite::SqliteStore;
use agentd_tools::{Tool, ToolContext, ToolRegistry, ToolResult, builtin_tools};
use anyhow::bail;
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Time spent inside model calls and tool calls, summed.
#[derive(Default)]
struct Clock {
    model: Mutex<Duration>,
    tools: Mutex<Duration>,
}

impl Clock {
    fn add(cell: &Mutex<Duration>, d: Duration) {
        if let Ok(mut total) = cell.lock() {
            *total += d;
        }
    }

    fn take(&self) -> (Duration, Duration) {
        let take = |cell: &Mutex<Duration>| {
            cell.lock()
                .map(|mut d| std::mem::take(&mut *d))
                .unwrap_or_default()
        };
        (take(&self.model), take(&self.tools))
    }
}

/// Times a model call from the request to the last item of its stream.
struct TimedModel {
    inner: AnthropicClient,
    clock: Arc<Clock>,
}

#[async_trait]
impl ModelClient for TimedModel {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let started = Instant::now();
        let clock = self.clock.clone();
        let stream = self.inner.stream(request).await?;
        // The call ends with its last item: `Completed` or an error.
        Ok(Box::pin(stream.inspect(move |item| {
            if matches!(item, Ok(ModelEvent::Completed(_)) | Err(_)) {
                Clock::add(&clock.model, started.elapsed());
            }
        })))
    }
}

/// Times each call of the wrapped tool.
struct TimedTool {
    inner: Arc<dyn Tool>,
    clock: Arc<Clock>,
}

#[async_trait]
impl Tool for TimedTool {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn input_schema(&self) -> Value {
        self.inner.input_schema()
    }
    fn is_read_only(&self) -> bool {
        self.inner.is_read_only()
    }
    async fn call(&self, input: Value, ctx: &ToolContext) -> ToolResult {
        let started = Instant::now();
        let result = self.inner.call(input, ctx).await;
        Clock::add(&self.clock.tools, started.elapsed());
        result
    }
}

fn start_model_server() -> anyhow::Result<(std::process::Child, String)> {
    let server = std::env::current_exe()?.with_file_name("agentd-model-server");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/turns-script.json");
    agentd_bench::start_model_server(&server, Path::new(script))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let turns: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(50);
    let (mut server, url) = start_model_server()?;
    let outcome = run(turns, &url).await;
    let _ = server.kill();
    outcome
}

async fn run(turns: usize, url: &str) -> anyhow::Result<()> {
    let data = tempfile::tempdir()?;
    let workspace = tempfile::tempdir()?;
    std::fs::create_dir_all(workspace.path().join("src"))?;
    std::fs::write(
        workspace.path().join("src/main.txt"),
        "counter = 1\n".repeat(40),
    )?;
    let store = Arc::new(SqliteStore::open(&data.path().join("agentd.db")).await?);
    let session = store
        .create_session(NewSession {
            id: None,
            owner: "bench".into(),
            title: None,
            workspace: workspace.path().display().to_string(),
            existing_workspace: false,
            model: "bench".into(),
            profile: "default".into(),
        })
        .await?;

    let clock = Arc::new(Clock::default());
    let model = TimedModel {
        inner: AnthropicClient::new(AnthropicConfig {
            base_url: url.to_string(),
            api_key: "bench".into(),
            ..AnthropicConfig::default()
        }),
        clock: clock.clone(),
    };
    let tools = ToolRegistry::new(
        builtin_tools()
            .iter()
            .map(|tool| {
                Arc::new(TimedTool {
                    inner: tool.clone(),
                    clock: clock.clone(),
                }) as Arc<dyn Tool>
            })
            .collect(),
    );
    let agent = Agent::new(
        Arc::new(model),
        tools,
        ToolContext::for_workspace(workspace.path())?,
        AgentConfig {
            price: None,
            model_name: "claude-sonnet-4-5".into(),
            system_prompt: "You are a benchmark agent.".into(),
            limits: TurnLimits::default(),
        },
    );
    let sink = StoreSink::new(
        store.clone(),
        session.id.clone(),
        None,
        &tokio::runtime::Handle::current(),
    );

    let mut overheads = Vec::with_capacity(turns);
    let (mut wall_total, mut model_total, mut tool_total) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut history: Vec<Message> = Vec::new();
    for n in 0..turns {
        let input = TurnInput {
            turn_id: format!("turn-{n}"),
            history: history.clone(),
            message: Message::user_text(format!("bench turn {n}: bump the counter")),
        };
        let started = Instant::now();
        let finished = agent.run_turn(input, &sink, CancellationToken::new()).await;
        let wall = started.elapsed();
        if finished.status != TurnStatus::Completed {
            bail!("turn {n} ended {:?}: {:?}", finished.status, finished.error);
        }
        let (model, tools) = clock.take();
        overheads.push(wall.saturating_sub(model + tools));
        wall_total += wall;
        model_total += model;
        tool_total += tools;
        history = store
            .messages(&session.id)
            .await?
            .into_iter()
            .map(|m| m.message)
            .collect();
    }
    let events = store.events_after(&session.id, 0, u32::MAX).await?.len();
    let n = turns as u32;
    println!(
        "agentd turn benchmark: {turns} turns × 3 model calls (Read + sandboxed Bash + Edit), SQLite store"
    );
    println!("  wall per turn          {}", micros(wall_total / n));
    println!(
        "  model time per turn    {}   (HTTP to the model server, streamed)",
        micros(model_total / n)
    );
    println!(
        "  tool time per turn     {}   (Read, bwrap Bash, Edit)",
        micros(tool_total / n)
    );
    println!(
        "  host overhead per turn median {}  p99 {}  mean {}",
        micros(quantile(&mut overheads, 0.5)),
        micros(quantile(&mut overheads, 0.99)),
        micros((wall_total - model_total - tool_total) / n)
    );
    println!(
        "  events stored          {events} ({:.1} per turn)",
        events as f64 / turns as f64
    );
    println!("  transcript messages    {}", history.len());
    println!(
        "  peak RSS               {} KiB",
        peak_rss_kib().unwrap_or(0)
    );
    Ok(())
}
