//! The webhook outbox ([`WebhookStore`]): deliveries written when an event
//! happens and sent later by a background sender, in order per webhook and
//! session, claimed under a lease so two senders (two nodes on one
//! PostgreSQL) never send the same row at once.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::StoreResult;

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// Not yet sent, or waiting for its next attempt.
    Pending,
    /// A receiver answered 2xx.
    Delivered,
    /// Given up after the last attempt (or the webhook is gone).
    Failed,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "pending" => DeliveryStatus::Pending,
            "delivered" => DeliveryStatus::Delivered,
            "failed" => DeliveryStatus::Failed,
            _ => return None,
        })
    }
}

/// A delivery to write: the payload is the request body, as it will be sent.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDelivery {
    pub id: String,
    /// The webhook's name in the config.
    pub webhook: String,
    pub event: String,
    pub session_id: String,
    pub payload: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryRecord {
    pub id: String,
    pub webhook: String,
    pub event: String,
    pub session_id: String,
    pub payload: String,
    pub status: DeliveryStatus,
    pub attempts: u64,
    /// The HTTP status of the last attempt, when one came back.
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
    pub next_attempt_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
}

/// How one attempt went, and what happens next.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptResult {
    /// `Pending` to try again at `next_attempt_at`.
    pub status: DeliveryStatus,
    pub http_status: Option<u16>,
    pub error: Option<String>,
    pub next_attempt_at: Option<DateTime<Utc>>,
}

#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Add a delivery to the outbox (one insert). Adding an id again, or a
    /// delivery of a session that no longer exists, adds nothing.
    async fn enqueue_delivery(&self, delivery: &NewDelivery) -> StoreResult<()>;

    /// Take up to `limit` deliveries of `webhooks` due at `now`, each the
    /// earliest pending one of its webhook and session, and lease them to
    /// `owner` until `lease_until`. A row leased to someone else (lease not
    /// expired) or rescheduled past `now` meanwhile is skipped; two callers
    /// at once never get the same row.
    async fn claim_deliveries(
        &self,
        owner: &str,
        webhooks: &[String],
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<DeliveryRecord>>;

    /// Record an attempt of a delivery leased to `owner` and release the
    /// lease. `false` when the lease is no longer `owner`'s.
    async fn record_attempt(
        &self,
        id: &str,
        owner: &str,
        result: &AttemptResult,
    ) -> StoreResult<bool>;

    /// Give back the pending deliveries leased to `owner` (it stops), so
    /// another sender may take them at once. Returns how many.
    async fn release_deliveries(&self, owner: &str) -> StoreResult<u64>;

    /// Delete `webhook`'s delivered and failed deliveries created before
    /// `created_before`. Returns how many.
    async fn prune_deliveries(
        &self,
        webhook: &str,
        created_before: DateTime<Utc>,
    ) -> StoreResult<u64>;

    /// When the earliest pending delivery of `webhooks` is due, if any is
    /// pending.
    async fn next_delivery_due(&self, webhooks: &[String]) -> StoreResult<Option<DateTime<Utc>>>;

    /// The delivery log, newest first, of one status or all.
    async fn list_deliveries(
        &self,
        status: Option<DeliveryStatus>,
        limit: u32,
    ) -> StoreResult<Vec<DeliveryRecord>>;
}
