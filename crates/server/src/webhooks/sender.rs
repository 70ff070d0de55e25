//! The background sender: claims due deliveries (each the earliest pending
//! one of its webhook and session, so a session's events go out in order),
//! POSTs them signed, and records each attempt: 2xx is delivered, anything
//! else is retried with exponential backoff until `max_attempts`, then
//! given up. A claim is a lease a little longer than the attempt's timeout:
//! a sender that dies mid-attempt leaves the row to another after it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agentd_store::{AttemptResult, DeliveryRecord, DeliveryStatus, Store};
use chrono::Utc;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::Webhooks;
use super::signature::sign;
use crate::config::WebhookToml;

/// Deliveries in flight at most (across sessions).
const MAX_IN_FLIGHT: usize = 32;
/// Due rows are looked for at least this often (retries, other nodes' rows).
const POLL: Duration = Duration::from_millis(500);
/// A lease outlives its attempt's timeout by this much.
const LEASE_MARGIN: Duration = Duration::from_secs(30);
/// The longest error text kept in the delivery log.
const MAX_ERROR_CHARS: usize = 300;

/// A webhook with its secret resolved.
struct Target {
    hook: WebhookToml,
    secret: Vec<u8>,
}

struct Sender {
    store: Arc<dyn Store>,
    targets: HashMap<String, Arc<Target>>,
    client: reqwest::Client,
    /// This process's name on its leases.
    owner: String,
    kick: Arc<Notify>,
    lease: Duration,
}

/// Start sending `webhooks`' deliveries until `stop`. Secrets named by
/// `secret_env` are read from `env`; a missing one is an error (nothing is
/// started).
pub fn start(
    webhooks: &Webhooks,
    store: Arc<dyn Store>,
    env: &HashMap<String, String>,
    stop: CancellationToken,
) -> Result<(), String> {
    if webhooks.hooks().is_empty() {
        return Ok(());
    }
    let mut targets = HashMap::new();
    for hook in webhooks.hooks() {
        let secret = match (&hook.secret, &hook.secret_env) {
            (Some(secret), _) => secret.clone(),
            (None, Some(var)) => {
                env.get(var)
                    .filter(|s| !s.is_empty())
                    .cloned()
                    .ok_or_else(|| {
                        format!(
                            "[[webhooks]] {:?}: secret_env {var} is not set",
                            hook.name()
                        )
                    })?
            }
            (None, None) => return Err(format!("[[webhooks]] {:?} has no secret", hook.name())),
        };
        let target = Target {
            hook: hook.clone(),
            secret: secret.into_bytes(),
        };
        targets.insert(hook.name().to_string(), Arc::new(target));
    }
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("agentd-webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|err| format!("cannot make the webhook HTTP client: {err}"))?;
    let longest = targets
        .values()
        .map(|t| t.hook.timeout())
        .max()
        .unwrap_or_default();
    let sender = Sender {
        store,
        targets,
        client,
        owner: format!("webhooks-{}", uuid::Uuid::new_v4().simple()),
        kick: webhooks.kick().clone(),
        lease: longest + LEASE_MARGIN,
    };
    tokio::spawn(sender.run(stop));
    Ok(())
}

impl Sender {
    async fn run(self, stop: CancellationToken) {
        let this = Arc::new(self);
        let mut in_flight = JoinSet::new();
        loop {
            let room = MAX_IN_FLIGHT - in_flight.len();
            if room > 0 {
                for record in this.claim(room).await {
                    let this = this.clone();
                    in_flight.spawn(async move { this.attempt(record).await });
                }
            }
            tokio::select! {
                () = stop.cancelled() => break,
                () = this.kick.notified() => {}
                () = tokio::time::sleep(POLL) => {}
                Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
            }
        }
        // Unfinished attempts keep their lease until it runs out; whoever
        // starts next sends them again.
        in_flight.abort_all();
    }

    async fn claim(&self, room: usize) -> Vec<DeliveryRecord> {
        let now = Utc::now();
        let until = now + self.lease;
        let limit = u32::try_from(room).unwrap_or(u32::MAX);
        match self
            .store
            .claim_deliveries(&self.owner, now, until, limit)
            .await
        {
            Ok(records) => records,
            Err(err) => {
                tracing::warn!(%err, "cannot read due webhook deliveries");
                Vec::new()
            }
        }
    }

    async fn attempt(&self, record: DeliveryRecord) {
        let result = match self.targets.get(&record.webhook) {
            Some(target) => self.send(target, &record).await,
            None => AttemptResult {
                status: DeliveryStatus::Failed,
                http_status: None,
                error: Some(format!(
                    "no webhook named {:?} is configured",
                    record.webhook
                )),
                next_attempt_at: None,
            },
        };
        if result.status != DeliveryStatus::Delivered {
            tracing::warn!(
                webhook = record.webhook,
                delivery = record.id,
                attempt = record.attempts + 1,
                error = result.error.as_deref().unwrap_or_default(),
                "webhook delivery failed"
            );
        }
        match self
            .store
            .record_attempt(&record.id, &self.owner, &result)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(delivery = record.id, "a webhook lease ran out mid-attempt")
            }
            Err(err) => {
                tracing::error!(%err, delivery = record.id, "cannot record a webhook attempt")
            }
        }
        // The session's next delivery may be due now.
        self.kick.notify_one();
    }

    async fn send(&self, target: &Target, record: &DeliveryRecord) -> AttemptResult {
        let timestamp = Utc::now().timestamp();
        let signature = sign(&target.secret, timestamp, &record.payload);
        let sent = self
            .client
            .post(&target.hook.url)
            .timeout(target.hook.timeout())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("X-Agentd-Event", &record.event)
            .header("X-Agentd-Delivery", &record.id)
            .header("X-Agentd-Timestamp", timestamp.to_string())
            .header("X-Agentd-Signature", signature)
            .body(record.payload.clone())
            .send()
            .await;
        let (http_status, error) = match sent {
            Ok(response) if response.status().is_success() => {
                return AttemptResult {
                    status: DeliveryStatus::Delivered,
                    http_status: Some(response.status().as_u16()),
                    error: None,
                    next_attempt_at: None,
                };
            }
            Ok(response) => {
                let status = response.status();
                (
                    Some(status.as_u16()),
                    format!("the receiver answered {status}"),
                )
            }
            Err(err) => (None, error_text(&err)),
        };
        let attempts = record.attempts + 1;
        let give_up = attempts >= u64::from(target.hook.max_attempts());
        AttemptResult {
            status: if give_up {
                DeliveryStatus::Failed
            } else {
                DeliveryStatus::Pending
            },
            http_status,
            error: Some(error),
            next_attempt_at: (!give_up).then(|| Utc::now() + target.hook.retry_after(attempts)),
        }
    }
}

/// A request error with its causes, short.
fn error_text(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text.chars().take(MAX_ERROR_CHARS).collect()
}
