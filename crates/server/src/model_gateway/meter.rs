//! One turn's calls through the loopback endpoint: each call's usage added
//! up and priced as the turn's model, and a call refused once the turn's
//! budget, its session's or its owner's spend quota is reached — the
//! native loop's limits ([`agentd_engine::budget_reached`]), applied
//! between the CLI's calls.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentd_claude_code::{BackendMeter, Metered};
use agentd_engine::{Agent, budget_reached};
use agentd_protocol::Usage;
use async_trait::async_trait;
use axum::http::StatusCode;
use tokio::sync::watch;

use crate::http::anthropic::error::AnthropicError;
use crate::http::anthropic::reply::OnUsage;

/// How long a settling turn waits for calls still being answered (an
/// interrupted CLI drops its connection; the call is then charged).
const SETTLE_WAIT: Duration = Duration::from_secs(3);

pub struct TurnMeter {
    /// The turn's agent: its price and its limits.
    agent: Arc<Agent>,
    state: Mutex<State>,
    in_flight: watch::Sender<usize>,
}

#[derive(Default)]
struct State {
    metered: Metered,
    /// The turn is over: no more calls.
    settled: bool,
}

impl TurnMeter {
    pub fn new(agent: Arc<Agent>) -> Arc<Self> {
        Arc::new(Self {
            agent,
            state: Mutex::default(),
            in_flight: watch::Sender::new(0),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A call may go to the model: what to tell of its usage. Refused once
    /// the turn is over or has spent its budget (a 403, which the CLI does
    /// not retry).
    pub fn admit(self: &Arc<Self>) -> Result<OnUsage, AnthropicError> {
        let mut state = self.state();
        if state.settled {
            return Err(AnthropicError::new(
                StatusCode::FORBIDDEN,
                "no agentd turn is running for this key",
            ));
        }
        let limits = &self.agent.config().limits;
        if let Some((code, message)) = budget_reached(limits, state.metered.cost_usd) {
            state.metered.stopped = Some((code, message.clone()));
            return Err(AnthropicError::new(StatusCode::FORBIDDEN, message));
        }
        drop(state);
        self.in_flight.send_modify(|n| *n += 1);
        let call = InFlight(self.clone());
        Ok(Box::new(move |usage: Usage| call.0.add(&usage)))
    }

    fn add(&self, usage: &Usage) {
        let cost = self.agent.config().cost(usage);
        let mut state = self.state();
        state.metered.usage.add(usage);
        state.metered.cost_usd += cost;
    }
}

/// A call being answered; its usage is told before this drops.
struct InFlight(Arc<TurnMeter>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.send_modify(|n| *n = n.saturating_sub(1));
    }
}

#[async_trait]
impl BackendMeter for TurnMeter {
    async fn settle(&self) -> Metered {
        let mut calls = self.in_flight.subscribe();
        let idle = calls.wait_for(|n| *n == 0);
        if tokio::time::timeout(SETTLE_WAIT, idle).await.is_err() {
            tracing::warn!("a backend call was still being answered as its turn ended");
        }
        let mut state = self.state();
        state.settled = true;
        state.metered.clone()
    }
}
