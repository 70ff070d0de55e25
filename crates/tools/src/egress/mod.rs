//! A profile's network allowlist: the matcher ([`EgressAllowlist`]) and the
//! proxy that enforces it for sandboxed commands ([`EgressProxy`]).
mod allowlist;
mod http;
mod idle;
mod proxy;
#[cfg(test)]
mod proxy_tests;

use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use allowlist::{EgressAllowlist, Permit};
pub use proxy::EgressProxy;

/// Why a host cannot be reached under the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EgressError {
    /// The list refuses it: not on it, or at an address it may not have.
    Refused(String),
    /// On the list, but its name did not resolve or nothing answered.
    Unreachable(String),
}

impl std::fmt::Display for EgressError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EgressError::Refused(reason) | EgressError::Unreachable(reason) => f.write_str(reason),
        }
    }
}

/// A connection the list refused.
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

/// What one session's proxy allows a client, so that no client (a slow or
/// silent one included) holds its resources for ever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyLimits {
    /// Connections open at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// The longest request head (request line and headers), in bytes.
    pub max_header_bytes: usize,
    /// How long a client may take to send a request head.
    pub header_timeout: Duration,
    /// How long a connection to a host may take to open.
    pub connect_timeout: Duration,
    /// How long either side of a connection may stay silent.
    pub idle_timeout: Duration,
}

impl Default for ProxyLimits {
    fn default() -> Self {
        Self {
            max_connections: 64,
            max_header_bytes: 64 * 1024,
            header_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
        }
    }
}
