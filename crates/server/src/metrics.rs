//! Counters behind `/metrics`, kept as atomics so recording one never waits,
//! rendered in the Prometheus text format by hand (a dozen series need no
//! metrics library).

use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use agentd_protocol::{Event, EventEnvelope, TurnStatus};

/// Statuses in a fixed order, for the per-status turn counter.
const STATUSES: [TurnStatus; 7] = [
    TurnStatus::Completed,
    TurnStatus::Interrupted,
    TurnStatus::Failed,
    TurnStatus::MaxTurns,
    TurnStatus::Timeout,
    TurnStatus::BudgetExceeded,
    TurnStatus::CircuitBreaker,
];

#[derive(Debug, Default)]
pub struct Metrics {
    pub http_requests: AtomicU64,
    pub events: AtomicU64,
    /// Events appended anywhere in the cluster (this node's own included), as
    /// heard on its notification channel; not exported: it tells the search
    /// indexer the cluster is busy.
    pub events_heard: AtomicU64,
    pub sse_clients: AtomicU64,
    pub sse_lagged: AtomicU64,
    /// Event streams refused: the user had `max_streams_per_user` open.
    pub sse_refused: AtomicU64,
    pub connections_open: AtomicU64,
    /// Closed at once: `max_connections` were open.
    pub connections_refused: AtomicU64,
    /// Closed for sending no complete request head in time.
    pub connections_timed_out: AtomicU64,
    pub turns_started: AtomicU64,
    turns_finished: [AtomicU64; 7],
    input_tokens: AtomicU64,
    output_tokens: AtomicU64,
    cost: Mutex<f64>,
    model: Latency,
    tool: Latency,
    /// From an event's commit (`at`) to its hand-off to live subscribers.
    publish: Histogram,
}

/// Upper bounds, in seconds, of the publish delay histogram's buckets.
const PUBLISH_BUCKETS: [f64; 10] = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0, 5.0];

/// A Prometheus histogram over [`PUBLISH_BUCKETS`] (plus `+Inf`).
#[derive(Debug, Default)]
struct Histogram {
    buckets: [AtomicU64; PUBLISH_BUCKETS.len() + 1],
    micros: AtomicU64,
}

impl Histogram {
    fn observe(&self, micros: u64) {
        let seconds = micros as f64 / 1e6;
        let i = PUBLISH_BUCKETS
            .iter()
            .position(|le| seconds <= *le)
            .unwrap_or(PUBLISH_BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.micros.fetch_add(micros, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut total = 0;
        for (i, bucket) in self.buckets.iter().enumerate() {
            total += bucket.load(Ordering::Relaxed);
            let le = PUBLISH_BUCKETS.get(i).map_or("+Inf".into(), f64::to_string);
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {total}");
        }
        let sum = self.micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {total}");
    }
}

/// A Prometheus summary without quantiles: count and sum of seconds.
#[derive(Debug, Default)]
struct Latency {
    count: AtomicU64,
    micros: AtomicU64,
}

impl Latency {
    fn observe(&self, micros: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.micros.fetch_add(micros, Ordering::Relaxed);
    }
}

/// What the live gauges are at the time of a scrape.
#[derive(Debug, Default, Clone, Copy)]
pub struct Gauges {
    pub sessions_total: u64,
    pub sessions_live: u64,
    pub turns_running: u64,
    pub turns_queued: u64,
}

/// Per-turn bookkeeping to time model calls from the events alone: a model
/// call runs from `turn.started` (or the last `tool.finished`) to the next
/// `message.completed`.
#[derive(Debug, Default)]
pub struct TurnClock {
    since: Option<chrono::DateTime<chrono::Utc>>,
}

impl Metrics {
    /// Account for one stored event of a running turn.
    pub fn event(&self, envelope: &EventEnvelope, clock: &mut TurnClock) {
        self.events.fetch_add(1, Ordering::Relaxed);
        let delay = (chrono::Utc::now() - envelope.at).num_microseconds();
        self.publish
            .observe(delay.map_or(0, |us| u64::try_from(us).unwrap_or(0)));
        match &envelope.event {
            Event::TurnStarted { .. } => clock.since = Some(envelope.at),
            Event::ToolFinished { duration_ms, .. } => {
                self.tool.observe(duration_ms.saturating_mul(1000));
                clock.since = Some(envelope.at);
            }
            Event::MessageCompleted { .. } => {
                if let Some(since) = clock.since.take() {
                    let micros = (envelope.at - since).num_microseconds().unwrap_or(0);
                    self.model.observe(u64::try_from(micros).unwrap_or(0));
                }
            }
            Event::Usage {
                usage, cost_usd, ..
            } => {
                self.input_tokens
                    .fetch_add(usage.input_tokens, Ordering::Relaxed);
                self.output_tokens
                    .fetch_add(usage.output_tokens, Ordering::Relaxed);
                if let Ok(mut cost) = self.cost.lock() {
                    *cost += cost_usd;
                }
            }
            Event::TurnFinished(finished) => self.turn_finished(finished.status),
            _ => {}
        }
    }

    pub fn turn_finished(&self, status: TurnStatus) {
        if let Some(i) = STATUSES.iter().position(|s| *s == status) {
            self.turns_finished[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every counter and gauge with its lines, in the page's order.
    fn series(&self, gauges: Gauges) -> [Metric<'static>; 16] {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        let one = |value: f64| vec![(String::new(), value)];
        let finished = STATUSES
            .iter()
            .zip(&self.turns_finished)
            .map(|(s, n)| (format!("{{status=\"{}\"}}", s.as_str()), load(n)))
            .collect();
        let tokens = vec![
            ("{kind=\"input\"}".to_string(), load(&self.input_tokens)),
            ("{kind=\"output\"}".to_string(), load(&self.output_tokens)),
        ];
        let cost = self.cost.lock().map(|c| *c).unwrap_or(0.0);
        [
            (
                "agentd_sessions",
                "gauge",
                "Stored sessions.",
                one(gauges.sessions_total as f64),
            ),
            (
                "agentd_sessions_live",
                "gauge",
                "Sessions with a running turn or a subscriber.",
                one(gauges.sessions_live as f64),
            ),
            (
                "agentd_turns_running",
                "gauge",
                "Turns running now.",
                one(gauges.turns_running as f64),
            ),
            (
                "agentd_turns_queued",
                "gauge",
                "Turns waiting for the one before them.",
                one(gauges.turns_queued as f64),
            ),
            (
                "agentd_turns_started_total",
                "counter",
                "Turns started by this process.",
                one(load(&self.turns_started)),
            ),
            (
                "agentd_turns_finished_total",
                "counter",
                "Turns finished, by status.",
                finished,
            ),
            (
                "agentd_events_total",
                "counter",
                "Events stored and fanned out by this process.",
                one(load(&self.events)),
            ),
            (
                "agentd_sse_clients",
                "gauge",
                "Open event streams.",
                one(load(&self.sse_clients)),
            ),
            (
                "agentd_sse_refused_total",
                "counter",
                "Event streams refused: the user had max_streams_per_user open.",
                one(load(&self.sse_refused)),
            ),
            (
                "agentd_connections_open",
                "gauge",
                "Open HTTP connections.",
                one(load(&self.connections_open)),
            ),
            (
                "agentd_connections_refused_total",
                "counter",
                "Connections closed at once: max_connections were open.",
                one(load(&self.connections_refused)),
            ),
            (
                "agentd_connections_timed_out_total",
                "counter",
                "Connections closed for sending no complete request head within header_timeout_s.",
                one(load(&self.connections_timed_out)),
            ),
            (
                "agentd_sse_lagged_total",
                "counter",
                "Event streams ended because the client fell behind.",
                one(load(&self.sse_lagged)),
            ),
            (
                "agentd_http_requests_total",
                "counter",
                "HTTP requests served.",
                one(load(&self.http_requests)),
            ),
            (
                "agentd_tokens_total",
                "counter",
                "Model tokens used.",
                tokens,
            ),
            (
                "agentd_cost_usd_total",
                "counter",
                "Model cost in US dollars.",
                one(cost),
            ),
        ]
    }

    pub fn render(&self, gauges: Gauges) -> String {
        let mut out = String::with_capacity(4096);
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        for (name, kind, help, lines) in &self.series(gauges) {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, value) in lines {
                let _ = writeln!(out, "{name}{labels} {value}");
            }
        }
        for (name, help, latency) in [
            (
                "agentd_model_call_seconds",
                "Model call latency (request to completed message).",
                &self.model,
            ),
            ("agentd_tool_call_seconds", "Tool call latency.", &self.tool),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} summary");
            let _ = writeln!(out, "{name}_count {}", load(&latency.count));
            let _ = writeln!(out, "{name}_sum {}", load(&latency.micros) / 1e6);
        }
        self.publish.render(
            &mut out,
            "agentd_event_publish_delay_seconds",
            "From an event's commit to its hand-off to live streams.",
        );
        if let Some(rss) = resident_bytes() {
            let _ = writeln!(
                out,
                "# HELP process_resident_memory_bytes Resident memory size in bytes.\n\
                 # TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {rss}"
            );
        }
        out
    }
}

/// A metric as written: name, type, help, and its `(labels, value)` lines.
type Metric<'a> = (&'a str, &'a str, &'a str, Vec<(String, f64)>);

/// This process's resident set size, from `/proc/self/statm` (Linux).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}
