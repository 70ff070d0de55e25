//! What running a turn's tool calls needs of the turn: the agent, the sink,
//! the turn's id and cancel token, and what the runs of the turn share. The
//! tool executor, the permission gate and the engine's own tools take this,
//! not the loop's state (its transcript and spend are not theirs).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use agentd_protocol::{Event, OutputLimit, Usage};
use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::live_budget::TurnStreamBudget;
use crate::sink::TurnSink;

/// One turn (or a subagent's run inside it) as its tool calls see it.
#[derive(Clone, Copy)]
pub(crate) struct TurnContext<'a> {
    pub agent: &'a Agent,
    pub sink: &'a dyn TurnSink,
    pub turn_id: &'a str,
    pub cancel: &'a CancellationToken,
    pub shared: &'a Arc<TurnShared>,
}

/// The one `output.truncated` of a stream that reached a limit.
pub(crate) fn truncated(
    turn_id: &str,
    call_id: Option<&str>,
    (limit, limit_bytes): (OutputLimit, u64),
) -> Event {
    Event::OutputTruncated {
        turn_id: turn_id.to_string(),
        call_id: call_id.map(str::to_string),
        limit,
        limit_bytes,
        parent_call_id: None,
    }
}

/// What the runs of one turn (the agent's and its subagents') share.
#[derive(Default)]
pub(crate) struct TurnShared {
    pub(crate) timed_out: AtomicBool,
    subagents_started: AtomicU32,
    /// Usage and cost of finished subagent runs, not yet added to a parent's.
    subagent_spend: Mutex<(Usage, f64)>,
    /// Everything the turn has spent so far, subagents included, live.
    spent_usd: Mutex<f64>,
    /// Set once the turn's checkpoint was taken (or tried).
    pub(crate) checkpoint: tokio::sync::OnceCell<()>,
    /// Live output the turn has streamed, against `max_turn_stream_bytes`.
    pub(crate) streamed: TurnStreamBudget,
}

impl TurnShared {
    pub(crate) fn spent_usd(&self) -> f64 {
        self.spent_usd.lock().map_or(0.0, |spent| *spent)
    }

    pub(crate) fn add_spent(&self, cost_usd: f64) {
        if let Ok(mut spent) = self.spent_usd.lock() {
            *spent += cost_usd;
        }
    }

    /// Counts one more subagent; `false` when `max` were already started.
    pub(crate) fn claim_subagent(&self, max: u32) -> bool {
        self.subagents_started
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
    }

    pub(crate) fn add_subagent_spend(&self, usage: &Usage, cost_usd: f64) {
        if let Ok(mut spend) = self.subagent_spend.lock() {
            spend.0.add(usage);
            spend.1 += cost_usd;
        }
    }

    pub(crate) fn take_subagent_spend(&self) -> (Usage, f64) {
        self.subagent_spend
            .lock()
            .map(|mut spend| std::mem::take(&mut *spend))
            .unwrap_or_default()
    }
}
