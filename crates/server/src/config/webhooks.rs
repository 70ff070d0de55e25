//! `[[webhooks]]`: where agentd tells a team that a session needs them or
//! has finished. Each delivery is signed with the webhook's secret and sent
//! from a durable outbox (see `crate::webhooks`).

use std::time::Duration;

use serde::Deserialize;

use super::Config;

/// The events a webhook can subscribe to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
pub enum WebhookEvent {
    #[serde(rename = "turn.finished")]
    TurnFinished,
    #[serde(rename = "permission.requested")]
    PermissionRequested,
    #[serde(rename = "question.asked")]
    QuestionAsked,
    /// A turn stopped on a budget or quota.
    #[serde(rename = "budget")]
    Budget,
}

impl WebhookEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookEvent::TurnFinished => "turn.finished",
            WebhookEvent::PermissionRequested => "permission.requested",
            WebhookEvent::QuestionAsked => "question.asked",
            WebhookEvent::Budget => "budget",
        }
    }
}

/// One `[[webhooks]]` entry.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookToml {
    /// Names the webhook in the delivery log (default: its `url`'s host; the
    /// rest of the URL may hold a secret and is never shown).
    pub name: Option<String>,
    /// Where deliveries are POSTed: `http://` or `https://`. Redirects are
    /// not followed.
    pub url: String,
    pub events: Vec<WebhookEvent>,
    /// The HMAC-SHA256 key of `X-Agentd-Signature`; or `secret_env`.
    pub secret: Option<String>,
    /// The environment variable holding the secret.
    pub secret_env: Option<String>,
    /// Only sessions of these owners (default: everyone's).
    #[serde(default)]
    pub users: Vec<String>,
    /// The server's address as users reach it (`https://agentd.example`):
    /// deliveries then carry links to the session and the answer route.
    pub public_url: Option<String>,
    /// Seconds one attempt may take, 1–300 (default 10).
    pub timeout_s: Option<u64>,
    /// Attempts before a delivery is given up (default 20: with the default
    /// backoff, about an hour of retries).
    pub max_attempts: Option<u32>,
    /// Seconds before the first retry (default 1); doubles each time.
    pub retry_first_s: Option<f64>,
    /// The longest wait between attempts, in seconds (default 300).
    pub retry_max_s: Option<f64>,
    /// Days delivered and failed deliveries stay in the log (default 7).
    pub retention_days: Option<u32>,
}

/// The secret is not shown.
impl std::fmt::Debug for WebhookToml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookToml")
            .field("name", &self.name())
            .field("events", &self.events)
            .field("secret", &self.secret.as_ref().map(|_| "[secret]"))
            .field("secret_env", &self.secret_env)
            .field("users", &self.users)
            .field("public_url", &self.public_url)
            .field("timeout_s", &self.timeout_s)
            .field("max_attempts", &self.max_attempts)
            .field("retry_first_s", &self.retry_first_s)
            .field("retry_max_s", &self.retry_max_s)
            .field("retention_days", &self.retention_days)
            .finish_non_exhaustive()
    }
}

const DEFAULT_TIMEOUT_S: u64 = 10;
const MAX_TIMEOUT_S: u64 = 300;
const DEFAULT_MAX_ATTEMPTS: u32 = 20;
const DEFAULT_RETRY_FIRST_S: f64 = 1.0;
const DEFAULT_RETRY_MAX_S: f64 = 300.0;
/// A hundred years: past it the cutoff date overflows.
const MAX_RETENTION_DAYS: u32 = 36_500;
const DEFAULT_RETENTION_DAYS: u32 = 7;
/// Each wait is this fraction longer or shorter at random, so receivers
/// that come back are not hit by every sender at once.
const JITTER: f64 = 0.2;

impl WebhookToml {
    /// The webhook's name: `name`, else its URL's host (never the URL's
    /// path, query or user info, which may hold a secret).
    pub fn name(&self) -> &str {
        if let Some(name) = &self.name {
            return name;
        }
        url_host(&self.url).unwrap_or("webhook")
    }

    pub fn timeout(&self) -> Duration {
        let seconds = self.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
        Duration::from_secs(seconds.clamp(1, MAX_TIMEOUT_S))
    }

    pub fn max_attempts(&self) -> u32 {
        self.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS)
    }

    pub fn retention(&self) -> Duration {
        let days = self.retention_days.unwrap_or(DEFAULT_RETENTION_DAYS);
        Duration::from_secs(u64::from(days) * 86_400)
    }

    /// The wait after the `attempts`-th failed attempt: exponential, capped,
    /// then ±20 % at random.
    pub fn retry_after(&self, attempts: u64) -> Duration {
        let spread = rand::random_range(-JITTER..=JITTER);
        self.retry_after_spread(attempts, spread)
    }

    /// [`Self::retry_after`] with its random part given (`-0.2..=0.2`).
    pub(crate) fn retry_after_spread(&self, attempts: u64, spread: f64) -> Duration {
        let first = self.retry_first_s.unwrap_or(DEFAULT_RETRY_FIRST_S);
        let max = self.retry_max_s.unwrap_or(DEFAULT_RETRY_MAX_S);
        let exponent = attempts.saturating_sub(1).min(30) as i32;
        let wait = (first * 2f64.powi(exponent)).min(max);
        Duration::from_secs_f64(wait * (1.0 + spread.clamp(-JITTER, JITTER)))
    }

    /// Whether deliveries of `owner`'s sessions go to this webhook.
    pub fn wants(&self, event: WebhookEvent, owner: &str) -> bool {
        self.events.contains(&event)
            && (self.users.is_empty() || self.users.iter().any(|u| u == owner))
    }
}

/// The host of `url`, a slice of it; `None` when it has none.
fn url_host(text: &str) -> Option<&str> {
    let rest = text.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => host.split(':').next()?,
    };
    (!host.is_empty()).then_some(host)
}

/// Refused URLs are named by scheme and host only: the rest may be secret.
fn check_url(at: &str, text: &str, what: &str) -> Result<(), String> {
    let url = url::Url::parse(text).map_err(|err| format!("{at}: {what} is not a URL: {err}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(format!(
            "{at}: {what} must be an http:// or https:// URL, not {}://{}",
            url.scheme(),
            url.host_str().unwrap_or_default()
        ));
    }
    Ok(())
}

pub(super) fn check(config: &Config) -> Result<(), String> {
    let mut names = std::collections::HashSet::new();
    for hook in &config.webhooks {
        let at = format!("[[webhooks]] {:?}", hook.name());
        check_url(&at, &hook.url, "url")?;
        if let Some(public) = &hook.public_url {
            check_url(&at, public, "public_url")?;
        }
        if !names.insert(hook.name()) {
            return Err(format!(
                "{at}: two webhooks have this name; give each its own `name`"
            ));
        }
        if hook.events.is_empty() {
            return Err(format!(
                "{at}: events is empty; list some of turn.finished, permission.requested, \
                 question.asked, budget"
            ));
        }
        match (&hook.secret, &hook.secret_env) {
            (Some(_), Some(_)) => return Err(format!("{at}: set secret or secret_env, not both")),
            (None, None) => {
                return Err(format!(
                    "{at}: a secret (secret or secret_env) signs deliveries"
                ));
            }
            (Some(secret), None) if secret.is_empty() => {
                return Err(format!("{at}: secret is empty"));
            }
            _ => {}
        }
        if hook.max_attempts == Some(0) {
            return Err(format!("{at}: max_attempts must be at least 1"));
        }
        if hook
            .timeout_s
            .is_some_and(|t| !(1..=MAX_TIMEOUT_S).contains(&t))
        {
            return Err(format!(
                "{at}: timeout_s is seconds from 1 to {MAX_TIMEOUT_S}"
            ));
        }
        if hook
            .retention_days
            .is_some_and(|days| !(1..=MAX_RETENTION_DAYS).contains(&days))
        {
            return Err(format!(
                "{at}: retention_days must be 1-{MAX_RETENTION_DAYS}"
            ));
        }
        for wait in [hook.retry_first_s, hook.retry_max_s].into_iter().flatten() {
            if !(wait.is_finite() && wait > 0.0 && wait <= 86_400.0) {
                return Err(format!(
                    "{at}: retry_first_s and retry_max_s are seconds in (0, 86400]"
                ));
            }
        }
    }
    Ok(())
}
