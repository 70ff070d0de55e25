//! OpenAI Chat Completions (`POST {base_url}/chat/completions`, streamed as
//! SSE). The same wire format serves OpenRouter, vLLM, Ollama and llama.cpp,
//! so the parser is lenient where those servers differ (see `stream`).
//!
//! The initial request is retried per [`RetryPolicy`] until response headers
//! arrive; failures after that end the stream with an error and are not retried.

mod api_error;
mod request;
mod stream;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName};

use crate::retry::{RetryPolicy, header_value, invalid_config, transport_error};
use crate::{ModelClient, ModelError, ModelRequest, ModelStream, sse};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Which request field carries the output token limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenLimitField {
    /// `max_completion_tokens` for OpenAI reasoning models (o1/o3/o4, gpt-5),
    /// which reject `max_tokens`; `max_tokens` for everything else.
    #[default]
    Auto,
    MaxTokens,
    MaxCompletionTokens,
}

#[derive(Clone)]
pub struct OpenAiConfig {
    /// The API root including its version path, e.g. `https://api.openai.com/v1`
    /// or `http://127.0.0.1:11434/v1`; a trailing `/` is tolerated.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; empty sends no header (local servers).
    pub api_key: String,
    pub retry: RetryPolicy,
    /// Time allowed to open a connection.
    pub connect_timeout: Duration,
    /// Longest silence allowed while waiting for response headers or between
    /// streamed chunks. Local servers may be slow to start: keep it generous.
    pub idle_timeout: Duration,
    pub token_limit_field: TokenLimitField,
    /// Extra headers for every request (e.g. OpenRouter's `HTTP-Referer`).
    pub extra_headers: Vec<(String, String)>,
}

/// The public OpenAI API with no key: set `api_key` (or `base_url` for a
/// local server).
impl Default for OpenAiConfig {
    fn default() -> Self {
        Self::new(DEFAULT_BASE_URL, "")
    }
}

impl OpenAiConfig {
    /// Defaults for `base_url` with this key.
    pub fn new(base_url: impl Into<String>, api_key: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: api_key.into(),
            retry: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(300),
            token_limit_field: TokenLimitField::Auto,
            extra_headers: Vec::new(),
        }
    }
}

// Hand-written so the key (and headers, which may hold keys) never land in logs.
impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.extra_headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &"<redacted>")
            .field("retry", &self.retry)
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("token_limit_field", &self.token_limit_field)
            .field("extra_headers", &header_names)
            .finish()
    }
}

#[derive(Debug, Clone)]
pub struct OpenAiClient {
    /// A configuration that cannot work fails every call with this error.
    http: Result<reqwest::Client, ModelError>,
    url: String,
    config: OpenAiConfig,
}

impl OpenAiClient {
    /// A client for `config`. If the configuration cannot work (the key or an
    /// extra header is not a valid header, no TLS roots), every call fails with
    /// that error; use [`OpenAiClient::try_new`] to find out up front.
    pub fn new(config: OpenAiConfig) -> Self {
        Self {
            http: http_client(&config),
            url: format!("{}/chat/completions", config.base_url.trim_end_matches('/')),
            config,
        }
    }

    /// Like [`OpenAiClient::new`], but fails on a configuration that cannot work.
    pub fn try_new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let client = Self::new(config);
        client.http.as_ref().map_err(Clone::clone)?;
        Ok(client)
    }
}

fn http_client(config: &OpenAiConfig) -> Result<reqwest::Client, ModelError> {
    let shape = format!(
        "openai\n{}\n{:?}\n{:?}\n{:?}",
        config.api_key, config.extra_headers, config.connect_timeout, config.idle_timeout
    );
    crate::http_cache::shared(shape, || build_http_client(config))
}

fn build_http_client(config: &OpenAiConfig) -> Result<reqwest::Client, ModelError> {
    let mut headers = HeaderMap::new();
    if !config.api_key.is_empty() {
        let mut auth = header_value(&format!("Bearer {}", config.api_key))?;
        auth.set_sensitive(true);
        headers.insert(AUTHORIZATION, auth);
    }
    for (name, value) in &config.extra_headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|err| invalid_config(format!("header name {name:?}: {err}")))?;
        let mut value = header_value(value)?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    reqwest::Client::builder()
        .default_headers(headers)
        .user_agent(concat!("agentd/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(config.connect_timeout)
        .read_timeout(config.idle_timeout)
        .build()
        .map_err(|err| transport_error(&err))
}

#[async_trait]
impl ModelClient for OpenAiClient {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let http = self.http.as_ref().map_err(Clone::clone)?;
        let body = sse::body_bytes(&request::body(&request, self.config.token_limit_field))?;
        tracing::debug!(model = %request.model, url = %self.url, "chat completions request");
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
