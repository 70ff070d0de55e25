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
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookToml {
    /// Names the webhook in the delivery log (default: its `url`).
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
    /// Seconds one attempt may take (default 10).
    pub timeout_s: Option<u64>,
    /// Attempts before a delivery is given up (default 8).
    pub max_attempts: Option<u32>,
    /// Seconds before the first retry (default 1); doubles each time.
    pub retry_first_s: Option<f64>,
    /// The longest wait between attempts, in seconds (default 300).
    pub retry_max_s: Option<f64>,
}

const DEFAULT_TIMEOUT_S: u64 = 10;
const DEFAULT_MAX_ATTEMPTS: u32 = 8;
const DEFAULT_RETRY_FIRST_S: f64 = 1.0;
const DEFAULT_RETRY_MAX_S: f64 = 300.0;

impl WebhookToml {
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.url)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S))
    }

    pub fn max_attempts(&self) -> u32 {
        self.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS)
    }

    /// The wait after the `attempts`-th failed attempt: exponential, capped.
    pub fn retry_after(&self, attempts: u64) -> Duration {
        let first = self.retry_first_s.unwrap_or(DEFAULT_RETRY_FIRST_S);
        let max = self.retry_max_s.unwrap_or(DEFAULT_RETRY_MAX_S);
        let exponent = attempts.saturating_sub(1).min(30) as i32;
        Duration::from_secs_f64((first * 2f64.powi(exponent)).min(max))
    }

    /// Whether deliveries of `owner`'s sessions go to this webhook.
    pub fn wants(&self, event: WebhookEvent, owner: &str) -> bool {
        self.events.contains(&event)
            && (self.users.is_empty() || self.users.iter().any(|u| u == owner))
    }
}

fn check_url(at: &str, text: &str, what: &str) -> Result<(), String> {
    let url = url::Url::parse(text).map_err(|err| format!("{at}: {what} {text:?}: {err}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(format!(
            "{at}: {what} must be an http:// or https:// URL, not {text:?}"
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
        if hook.timeout_s == Some(0) || hook.max_attempts == Some(0) {
            return Err(format!(
                "{at}: timeout_s and max_attempts must be at least 1"
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
