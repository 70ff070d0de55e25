//! Webhooks (`[[webhooks]]`): a session's events that need a person
//! (`permission.requested`, `question.asked`) or end its work
//! (`turn.finished`, `budget`) become rows of a durable outbox as they are
//! stored — one insert each, on the task that hands events out, never the
//! turn's — and a background sender ([`sender`]) POSTs them, signed, in
//! order per session, retrying with backoff. Rows survive a restart; with
//! several nodes on one PostgreSQL each row is leased to one sender at a time.

mod payload;
pub mod sender;
pub mod signature;

use std::sync::Arc;

use agentd_protocol::EventEnvelope;
use agentd_store::{NewDelivery, Store};
use tokio::sync::Notify;

use crate::config::{Config, WebhookToml};

/// The outbox's writing side. Cheap to clone.
#[derive(Clone, Default)]
pub struct Webhooks {
    hooks: Arc<[WebhookToml]>,
    /// Wakes the sender: something was queued.
    kick: Arc<Notify>,
}

impl Webhooks {
    pub fn new(config: &Config) -> Self {
        Self {
            hooks: config.webhooks.clone().into(),
            kick: Arc::default(),
        }
    }

    pub fn hooks(&self) -> &[WebhookToml] {
        &self.hooks
    }

    pub(crate) fn kick(&self) -> &Arc<Notify> {
        &self.kick
    }

    /// After `envelope` of `owner`'s session was stored (during turn
    /// `turn_id`): queue a delivery to each webhook that wants it. A store
    /// error is logged, not returned: the turn goes on without its webhook.
    pub async fn event_stored(
        &self,
        store: &dyn Store,
        owner: &str,
        turn_id: &str,
        envelope: &EventEnvelope,
    ) {
        if self.hooks.is_empty() {
            return;
        }
        let mut queued = false;
        for (event, data) in payload::notifications(envelope) {
            for hook in self.hooks.iter().filter(|h| h.wants(event, owner)) {
                let id = uuid::Uuid::now_v7().to_string();
                let at = payload::About {
                    delivery_id: &id,
                    owner,
                    turn_id,
                    public_url: hook.public_url.as_deref(),
                };
                let delivery = NewDelivery {
                    payload: payload::body(event, envelope, &at, data.clone()),
                    id,
                    webhook: hook.name().to_string(),
                    event: event.as_str().to_string(),
                    session_id: envelope.session_id.clone(),
                    created_at: chrono::Utc::now(),
                };
                match store.enqueue_delivery(&delivery).await {
                    Ok(()) => queued = true,
                    Err(err) => tracing::error!(
                        %err, webhook = hook.name(), event = event.as_str(),
                        "cannot queue a webhook delivery"
                    ),
                }
            }
        }
        if queued {
            self.kick.notify_one();
        }
    }
}
