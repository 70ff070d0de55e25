//! Webhooks (`[[webhooks]]`): a session's events that need a person
//! (`permission.requested`, `question.asked`) or end its work
//! (`turn.finished`, `budget`) become rows of a durable outbox as they are
//! stored — one insert each, on the task that hands events out, never the
//! turn's — and a background sender ([`sender`]) POSTs them, signed, in
//! order per session, retrying with backoff. Rows survive a restart; with
//! several nodes on one PostgreSQL each row is leased to one sender at a time.
//!
//! The insert is not in the event's transaction: a failed one is retried a
//! few times, but a process killed between the two loses that delivery.

mod payload;
pub mod sender;
pub mod signature;

use std::sync::Arc;
use std::time::Duration;

use agentd_protocol::EventEnvelope;
use agentd_store::{NewDelivery, Store};
use tokio::sync::Notify;

use crate::config::{Config, WebhookToml};

/// Tries of one insert, the waits between them doubling from [`RETRY_FIRST`].
const INSERT_TRIES: u32 = 5;
const RETRY_FIRST: Duration = Duration::from_millis(100);

/// Whose session and turn an event is of.
pub struct TurnOf<'a> {
    pub owner: &'a str,
    /// The session's profile (its `approval_timeout_s`).
    pub profile: &'a str,
    pub turn_id: &'a str,
}

/// The outbox's writing side. Cheap to clone.
#[derive(Clone, Default)]
pub struct Webhooks {
    hooks: Arc<[WebhookToml]>,
    /// Each profile's `approval_timeout_s`: when a request expires.
    answer_within: Arc<std::collections::HashMap<String, u64>>,
    /// Wakes the sender: something was queued.
    kick: Arc<Notify>,
}

impl Webhooks {
    pub fn new(config: &Config) -> Self {
        let answer_within = config
            .profiles
            .keys()
            .filter_map(|name| {
                let profile = config.profile(name).ok()?;
                Some((name.clone(), profile.approval_timeout_s))
            })
            .collect();
        Self {
            hooks: config.webhooks.clone().into(),
            answer_within: Arc::new(answer_within),
            kick: Arc::default(),
        }
    }

    pub fn hooks(&self) -> &[WebhookToml] {
        &self.hooks
    }

    pub(crate) fn kick(&self) -> &Arc<Notify> {
        &self.kick
    }

    /// After `envelope` of a session was stored by someone who does not know
    /// its owner (a turn finished after a restart): read it, then as
    /// [`Self::event_stored`].
    pub async fn session_event_stored(
        &self,
        store: &dyn Store,
        turn_id: &str,
        envelope: &EventEnvelope,
    ) {
        if self.hooks.is_empty() || payload::notifications(envelope).is_empty() {
            return;
        }
        match store.get_session(&envelope.session_id).await {
            Ok(Some(session)) => {
                let about = TurnOf {
                    owner: &session.owner,
                    profile: &session.profile,
                    turn_id,
                };
                self.event_stored(store, &about, envelope).await;
            }
            Ok(None) => {}
            Err(err) => tracing::error!(
                %err, session = envelope.session_id,
                "cannot read the session's owner for its webhooks; its deliveries are lost"
            ),
        }
    }

    /// After `envelope` of a session was stored (during turn `about`):
    /// queue a delivery to each webhook that wants it. A store error is
    /// retried a few times, then logged, not returned: the turn goes on
    /// without its webhook.
    pub async fn event_stored(
        &self,
        store: &dyn Store,
        turn: &TurnOf<'_>,
        envelope: &EventEnvelope,
    ) {
        if self.hooks.is_empty() {
            return;
        }
        let owner = turn.owner;
        let turn_id = turn.turn_id;
        let default = crate::config::ProfileConfig::default().approval_timeout_s;
        let answer_within = self
            .answer_within
            .get(turn.profile)
            .copied()
            .unwrap_or(default);
        let mut queued = false;
        for (event, data) in payload::notifications(envelope) {
            for hook in self.hooks.iter().filter(|h| h.wants(event, owner)) {
                let id = uuid::Uuid::now_v7().to_string();
                let at = payload::About {
                    delivery_id: &id,
                    owner,
                    turn_id,
                    public_url: hook.public_url.as_deref(),
                    answer_within_s: answer_within,
                };
                let delivery = NewDelivery {
                    payload: payload::body(event, envelope, &at, data.clone()),
                    id,
                    webhook: hook.name().to_string(),
                    event: event.as_str().to_string(),
                    session_id: envelope.session_id.clone(),
                    created_at: chrono::Utc::now(),
                };
                match enqueue(store, &delivery).await {
                    Ok(()) => queued = true,
                    Err(err) => tracing::error!(
                        %err, webhook = hook.name(), event = event.as_str(),
                        session = envelope.session_id, seq = envelope.seq,
                        "cannot queue a webhook delivery; it is lost"
                    ),
                }
            }
        }
        if queued {
            self.kick.notify_one();
        }
    }
}

/// One insert, tried again after a store error (the same id: an insert
/// that committed but did not answer is not doubled).
async fn enqueue(store: &dyn Store, delivery: &NewDelivery) -> agentd_store::StoreResult<()> {
    let mut wait = RETRY_FIRST;
    let mut tries = 1;
    loop {
        match store.enqueue_delivery(delivery).await {
            Ok(()) => return Ok(()),
            Err(err) if tries < INSERT_TRIES => {
                tracing::warn!(%err, webhook = delivery.webhook, "cannot queue a webhook delivery yet");
                tokio::time::sleep(wait).await;
                wait *= 2;
                tries += 1;
            }
            Err(err) => return Err(err),
        }
    }
}
