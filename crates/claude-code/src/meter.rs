//! What a turn on a `backend` spent, as the loopback endpoint serving the
//! CLI metered it call by call: recorded in place of the CLI's own figures,
//! which are missing when the CLI is interrupted, times out or crashes, and
//! priced by a table that does not know the backend.

use agentd_engine::TurnOutcome;
use agentd_protocol::{ErrorCode, ErrorInfo, TurnStatus, Usage};
use async_trait::async_trait;

/// The endpoint's count of one turn's model calls.
#[async_trait]
pub trait BackendMeter: Send + Sync {
    /// Once the CLI's turn is over: waits (briefly) for calls still being
    /// answered, refuses any later one, and says what the turn's calls used.
    async fn settle(&self) -> Metered;
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metered {
    pub usage: Usage,
    pub cost_usd: f64,
    /// The budget (the turn's, the session's or the owner's spend quota)
    /// was reached and the endpoint refused the CLI's next call: the code
    /// and the message.
    pub stopped: Option<(ErrorCode, String)>,
}

impl Metered {
    /// `outcome` with what was metered; a refused call ends the turn as
    /// `budget_exceeded`, as the native loop's budgets do.
    pub fn apply(self, outcome: &mut TurnOutcome) {
        outcome.usage = self.usage;
        outcome.cost_usd = self.cost_usd;
        if let Some((code, message)) = self.stopped
            && outcome.status != TurnStatus::Interrupted
        {
            outcome.status = TurnStatus::BudgetExceeded;
            outcome.error = Some(ErrorInfo {
                code,
                message,
                retryable: false,
            });
        }
    }
}
