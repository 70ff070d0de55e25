//! Extended thinking: one budget type and one range check for a profile's
//! and a model's (`thinking = {budget_tokens = N}`), a session's own
//! (`PATCH /v1/sessions/{id}`) and a message's.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Extended thinking: tokens the model may think in before each answer, on
/// top of `max_output_tokens` (Anthropic models).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Thinking {
    #[schema(minimum = 1024, maximum = 1_000_000)]
    pub budget_tokens: u32,
}

/// Anthropic's least thinking budget, and more than any model thinks.
const BUDGETS: std::ops::RangeInclusive<u32> = 1024..=1_000_000;

impl Thinking {
    /// The budget within bounds, else what is wrong (the caller says where).
    pub fn check(self) -> Result<Self, String> {
        if BUDGETS.contains(&self.budget_tokens) {
            Ok(self)
        } else {
            Err(format!(
                "thinking.budget_tokens must be between {} and {}",
                BUDGETS.start(),
                BUDGETS.end()
            ))
        }
    }
}
