//! The background sender: claims due deliveries (each the earliest pending
//! one of its webhook and session, so a session's events go out in order),
//! POSTs them signed, and records each attempt: 2xx is delivered, anything
//! else is retried with exponential backoff until `max_attempts`, then
//! given up. A claim is a lease a little longer than the attempt's timeout:
//! a sender that dies mid-attempt leaves the row to another after it; one
//! that stops hands its rows back. A sender claims only rows of the webhooks
//! its own config names. Delivered and failed rows are pruned after each
//! webhook's `retention_days`.

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
/// Due rows are looked for at least this often (other nodes' rows), and
/// sooner when a retry is due before.
const POLL: Duration = Duration::from_secs(5);
/// Never looked for more often than this, whatever is due.
const MIN_POLL: Duration = Duration::from_millis(500);
/// Delivered and failed rows past their retention are pruned this often.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
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
    /// The names of `targets`: the rows this sender claims.
    names: Vec<String>,
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
    let mut names: Vec<String> = targets.keys().cloned().collect();
    names.sort();
    let sender = Sender {
        store,
        targets,
        names,
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
        let mut pruned_at: Option<tokio::time::Instant> = None;
        loop {
            if pruned_at.is_none_or(|at| at.elapsed() >= PRUNE_EVERY) {
                this.prune().await;
                pruned_at = Some(tokio::time::Instant::now());
            }
            let room = MAX_IN_FLIGHT - in_flight.len();
            if room > 0 {
                for record in this.claim(room).await {
                    let this = this.clone();
                    in_flight.spawn(async move { this.attempt(record).await });
                }
            }
            let wait = this.wait().await;
            tokio::select! {
                () = stop.cancelled() => break,
                () = this.kick.notified() => {}
                () = tokio::time::sleep(wait) => {}
                Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
            }
        }
        // Unfinished attempts are handed back: whoever runs next sends them
        // again at once (a receiver may get them twice).
        in_flight.abort_all();
        while in_flight.join_next().await.is_some() {}
        if let Err(err) = this.store.release_deliveries(&this.owner).await {
            tracing::warn!(%err, "cannot hand back this node's webhook deliveries");
        }
    }

    /// How long to sleep before looking for due rows again: until the
    /// earliest pending one is due, at most [`POLL`].
    async fn wait(&self) -> Duration {
        match self.store.next_delivery_due(&self.names).await {
            Ok(Some(due)) => (due - Utc::now())
                .to_std()
                .unwrap_or_default()
                .clamp(MIN_POLL, POLL),
            Ok(None) => POLL,
            Err(err) => {
                tracing::warn!(%err, "cannot read when the next webhook delivery is due");
                POLL
            }
        }
    }

    async fn prune(&self) {
        for target in self.targets.values() {
            let Ok(keep) = chrono::Duration::from_std(target.hook.retention()) else {
                continue;
            };
            let name = target.hook.name();
            match self.store.prune_deliveries(name, Utc::now() - keep).await {
                Ok(0) => {}
                Ok(count) => tracing::info!(webhook = name, count, "pruned old webhook deliveries"),
                Err(err) => tracing::warn!(%err, webhook = name, "cannot prune webhook deliveries"),
            }
        }
    }

    async fn claim(&self, room: usize) -> Vec<DeliveryRecord> {
        let now = Utc::now();
        let until = now + self.lease;
        let limit = u32::try_from(room).unwrap_or(u32::MAX);
        match self
            .store
            .claim_deliveries(&self.owner, &self.names, now, until, limit)
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
        // Only rows of `targets` are claimed.
        let Some(target) = self.targets.get(&record.webhook) else {
            return;
        };
        let result = self.send(target, &record).await;
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
            Err(err) => (None, error_text(err)),
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

/// A request error with its causes, short, without the URL (it may hold a
/// secret).
fn error_text(err: reqwest::Error) -> String {
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text.chars().take(MAX_ERROR_CHARS).collect()
}
