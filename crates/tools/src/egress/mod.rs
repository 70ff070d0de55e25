//! A profile's network allowlist: the matcher ([`EgressAllowlist`]) and the
//! proxy that enforces it for sandboxed commands ([`EgressProxy`]).
mod allowlist;
mod proxy;

use std::sync::{Arc, Mutex};

pub use allowlist::{EgressAllowlist, Permit};
pub use proxy::EgressProxy;

/// A connection the proxy refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub host: String,
    pub port: u16,
    pub reason: String,
}

/// Refusals not yet reported; the engine turns them into `network.refused`
/// events after each tool call.
#[derive(Debug, Clone, Default)]
pub struct NetworkRefusals(Arc<Mutex<Vec<Refusal>>>);

impl NetworkRefusals {
    pub fn push(&self, refusal: Refusal) {
        let mut list = self.0.lock().unwrap_or_else(|err| err.into_inner());
        // Bounded: a client retrying in a loop must not grow this forever.
        if list.len() < 100 {
            list.push(refusal);
        }
    }

    pub fn take(&self) -> Vec<Refusal> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|err| err.into_inner()))
    }
}
