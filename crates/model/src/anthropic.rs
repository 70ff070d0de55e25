//! The Anthropic Messages API (`POST /v1/messages`, streamed as SSE).
//!
//! The initial request is retried per [`RetryPolicy`] until response headers
//! arrive; failures after that (an `error` event, a cut connection) end the
//! stream with an error and are not retried, since deltas may have been shown.

mod api_error;
mod request;
mod stream;
pub mod wire;
#[cfg(test)]
mod wire_cache_tests;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use reqwest::header::{HeaderMap, HeaderValue};

use crate::retry::{RetryPolicy, header_value, transport_error};
use crate::{ModelClient, ModelError, ModelRequest, ModelStream, sse};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header sent with every request.
pub const API_VERSION: &str = "2023-06-01";

#[derive(Clone)]
pub struct AnthropicConfig {
    /// Scheme and host, e.g. `https://api.anthropic.com`; a trailing `/` or
    /// `/v1` is tolerated.
    pub base_url: String,
    pub api_key: String,
    pub retry: RetryPolicy,
    /// Time allowed to open a connection.
    pub connect_timeout: Duration,
    /// Longest silence allowed while waiting for response headers or between
    /// streamed chunks. The API sends pings, so this trips only on a dead peer.
    pub idle_timeout: Duration,
    /// Mark cache breakpoints (last tool, end of the conversation) so repeated
    /// calls of a turn read their shared prefix from the prompt cache.
    pub prompt_caching: bool,
}

/// The public API with no key: set `api_key`.
impl Default for AnthropicConfig {
    fn default() -> Self {
        Self::new("")
    }
}

impl AnthropicConfig {
    /// Defaults for the public API with this key.
    pub fn new(api_key: impl Into<String>) -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.into(),
            api_key: api_key.into(),
            retry: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(300),
            prompt_caching: true,
        }
    }
}

// Hand-written so the key never lands in logs.
impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &"<redacted>")
            .field("retry", &self.retry)
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("prompt_caching", &self.prompt_caching)
            .finish()
    }
}

#[derive(Debug, Clone)]
pub struct AnthropicClient {
    /// A configuration that cannot work fails every call with this error.
    http: Result<reqwest::Client, ModelError>,
    url: String,
    config: AnthropicConfig,
}

impl AnthropicClient {
    /// A client for `config`. If the configuration cannot work (the key is not
    /// a valid header value, no TLS roots), every call fails with that error;
    /// use [`AnthropicClient::try_new`] to find out up front.
    pub fn new(config: AnthropicConfig) -> Self {
        let base = config.base_url.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base);
        Self {
            http: http_client(&config),
            url: format!("{base}/v1/messages"),
            config,
        }
    }

    /// Like [`AnthropicClient::new`], but fails on a configuration that cannot work.
    pub fn try_new(config: AnthropicConfig) -> Result<Self, ModelError> {
        let client = Self::new(config);
        client.http.as_ref().map_err(Clone::clone)?;
        Ok(client)
    }
}

fn http_client(config: &AnthropicConfig) -> Result<reqwest::Client, ModelError> {
    let shape = format!(
        "anthropic\n{}\n{:?}\n{:?}",
        config.api_key, config.connect_timeout, config.idle_timeout
    );
    crate::http_cache::shared(shape, || build_http_client(config))
}

fn build_http_client(config: &AnthropicConfig) -> Result<reqwest::Client, ModelError> {
    let mut key = header_value(&config.api_key)?;
    key.set_sensitive(true);
    let mut headers = HeaderMap::new();
    headers.insert("x-api-key", key);
    headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
    reqwest::Client::builder()
        .default_headers(headers)
        .user_agent(concat!("agentd/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(config.connect_timeout)
        .read_timeout(config.idle_timeout)
        .build()
        .map_err(|err| transport_error(&err))
}

#[async_trait]
impl ModelClient for AnthropicClient {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let http = self.http.as_ref().map_err(Clone::clone)?;
        let body = request::body_bytes(&request, self.config.prompt_caching)?;
        tracing::debug!(model = %request.model, url = %self.url, "anthropic messages request");
        sse::post_stream(
            http,
            &self.url,
            &self.config.retry,
            body,
            api_error::from_response,
            stream::Parser::new(),
        )
        .await
    }
}
