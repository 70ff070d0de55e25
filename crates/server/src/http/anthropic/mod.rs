//! Anthropic's Messages API on `agentd serve`: `POST /v1/messages` (streamed
//! and not) and `POST /v1/messages/count_tokens`, so Anthropic clients (the
//! SDKs, the `claude` CLI) can use any configured model, OpenAI-compatible
//! ones included. An agentd token is the API key (`x-api-key` or `Bearer`);
//! the model must be the caller's to use, and what a call costs counts
//! against their spend quotas. Errors are in Anthropic's shape.
//!
//! Not to be confused with `http/messages.rs`, a session's messages.

pub(crate) mod error;
pub(crate) mod estimate;
pub(crate) mod reply;
pub(crate) mod request;

use agentd_protocol::Usage;
use axum::extract::{FromRequestParts, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::AppState;
use super::access_check::check_model_call;
use super::auth::{User, authenticate};
use crate::access::metrics;
use crate::models::{ResolvedModel, resolve_served};
use error::{AnthropicError, AnthropicErrorBody, AnthropicJson};
use reply::{Call, answer};
use request::{Conversation, MessagesRequest, Target, to_model_request};

/// Largest body: room for images in base64, as a session's messages.
pub const BODY_LIMIT: usize = super::messages::MESSAGE_BODY_LIMIT;

/// The header Anthropic clients send their key in.
pub const API_KEY_HEADER: &str = "x-api-key";

/// The caller, authenticated as for the rest of the API, with the key in
/// `x-api-key` accepted as a Bearer token. Checked before the body is read.
pub struct Caller(pub User);

impl FromRequestParts<AppState> for Caller {
    type Rejection = AnthropicError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let key = (!parts.headers.contains_key(AUTHORIZATION))
            .then(|| parts.headers.get(API_KEY_HEADER))
            .flatten();
        let user =
            match key.map(|key| HeaderValue::from_bytes(&[b"Bearer ", key.as_bytes()].concat())) {
                Some(Ok(bearer)) => {
                    let mut headers = parts.headers.clone();
                    headers.insert(AUTHORIZATION, bearer);
                    authenticate(state, &parts.method, &headers).await
                }
                Some(Err(_)) => Err(super::error::ApiError::Unauthorized),
                None => authenticate(state, &parts.method, &parts.headers).await,
            };
        user.map(Caller).map_err(AnthropicError::from)
    }
}

/// A reply, for the OpenAPI document.
#[derive(Serialize, ToSchema)]
pub struct AnthropicMessage {
    /// `msg_…`, fresh for every reply.
    pub id: String,
    /// `message`.
    pub r#type: String,
    /// `assistant`.
    pub role: String,
    /// The model named in the request.
    pub model: String,
    /// `text`, `thinking` and `tool_use` blocks, as Anthropic's.
    #[schema(value_type = Vec<Object>)]
    pub content: Vec<Value>,
    /// `end_turn`, `tool_use`, `max_tokens`, `stop_sequence` or `refusal`.
    pub stop_reason: String,
    #[schema(value_type = Option<String>)]
    pub stop_sequence: Option<String>,
    pub usage: AnthropicUsage,
}

#[derive(Serialize, ToSchema)]
pub struct AnthropicUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
}

/// One server-sent event of a streamed reply, for the OpenAPI document:
/// `message_start`, `ping`, `content_block_start`, `content_block_delta`
/// (`text_delta`, `thinking_delta`, `signature_delta`, `input_json_delta`),
/// `content_block_stop`, `message_delta`, `message_stop`, or `error`.
#[derive(Serialize, ToSchema)]
pub struct AnthropicStreamEvent {
    pub event: String,
    /// A JSON object whose `type` is the event's name.
    pub data: String,
}

#[derive(Serialize, ToSchema)]
pub struct TokenCount {
    /// An estimate (about four characters a token): agentd has no
    /// provider's tokenizer.
    pub input_tokens: u64,
}

/// Create a message, as Anthropic's Messages API does, with any configured
/// model (OpenAI-compatible ones too). The key is an agentd token, in
/// `x-api-key` or `Authorization: Bearer`.
#[utoipa::path(post, path = "/v1/messages", tag = "anthropic",
    request_body = MessagesRequest,
    responses(
        (status = 200, description = "The reply; with `stream: true`, Anthropic's server-sent events",
            content((AnthropicMessage = "application/json"), (AnthropicStreamEvent = "text/event-stream"))),
        (status = 400, description = "`invalid_request_error`: malformed JSON, a missing or mistyped field, \
            a block in the wrong message, or the model refused the request", body = AnthropicErrorBody),
        (status = 401, description = "`authentication_error`: no usable agentd token", body = AnthropicErrorBody),
        (status = 403, description = "`permission_error`: the model is not the caller's, or spend is at its quota",
            body = AnthropicErrorBody),
        (status = 404, description = "`not_found_error`: no configured model of this name", body = AnthropicErrorBody),
        (status = 413, description = "`request_too_large`: body over 32 MiB", body = AnthropicErrorBody),
        (status = 415, description = "`invalid_request_error`: the body is not JSON", body = AnthropicErrorBody),
        (status = 429, description = "`rate_limit_error`: the model provider's rate limit", body = AnthropicErrorBody),
        (status = 500, description = "`api_error`", body = AnthropicErrorBody),
        (status = 502, description = "`api_error`: the model provider could not be reached or answered wrongly",
            body = AnthropicErrorBody),
        (status = 503, description = "`overloaded_error`: the database is unavailable", body = AnthropicErrorBody),
        (status = 529, description = "`overloaded_error`: the model provider is overloaded", body = AnthropicErrorBody),
    ),
    security(("bearer" = []), ("api_key" = [])))]
pub async fn post_messages(
    State(state): State<AppState>,
    Caller(user): Caller,
    AnthropicJson(body): AnthropicJson<MessagesRequest>,
) -> Response {
    let routed = match route(&state, &user, &body.conversation.model).await {
        Ok(routed) => routed,
        Err(err) => return err.into_response(),
    };
    let name = body.conversation.model.clone();
    let stream = body.stream.unwrap_or(false);
    let target = Target::from(&routed);
    let request = match body.into_model_request(&target) {
        Ok(request) => request,
        Err(err) => return err.into_response(),
    };
    let on_usage = spend_recorder(&state, &user, &routed);
    let call = Call {
        client: routed.client.clone(),
        request,
        model: name,
        stream,
        signs_thinking: target.thinking_on_top,
        stop: state.streams.clone(),
    };
    answer(call, on_usage).await
}

/// Count a request's input tokens (an estimate), as Anthropic's
/// `count_tokens` does; nothing is sent to the model.
#[utoipa::path(post, path = "/v1/messages/count_tokens", tag = "anthropic",
    request_body = Conversation,
    responses(
        (status = 200, description = "The estimate", body = TokenCount),
        (status = 400, description = "`invalid_request_error`", body = AnthropicErrorBody),
        (status = 401, description = "`authentication_error`", body = AnthropicErrorBody),
        (status = 403, description = "`permission_error`: the model is not the caller's", body = AnthropicErrorBody),
        (status = 404, description = "`not_found_error`: no configured model of this name", body = AnthropicErrorBody),
        (status = 413, description = "`request_too_large`", body = AnthropicErrorBody),
        (status = 415, description = "`invalid_request_error`: the body is not JSON", body = AnthropicErrorBody),
        (status = 500, description = "`api_error`", body = AnthropicErrorBody),
        (status = 503, description = "`overloaded_error`: the database is unavailable", body = AnthropicErrorBody),
    ),
    security(("bearer" = []), ("api_key" = [])))]
pub async fn count_tokens(
    State(state): State<AppState>,
    Caller(user): Caller,
    AnthropicJson(body): AnthropicJson<Conversation>,
) -> Result<axum::Json<TokenCount>, AnthropicError> {
    let routed = route(&state, &user, &body.model).await?;
    let request = to_model_request(body, u32::MAX, &Target::from(&routed))?;
    Ok(axum::Json(TokenCount {
        input_tokens: estimate::input_tokens(&request),
    }))
}

/// The configured model `name`, if the caller may use it now.
async fn route(state: &AppState, user: &User, name: &str) -> Result<ResolvedModel, AnthropicError> {
    let runtime = state.registry.runtime();
    if !runtime.config.models.contains_key(name) {
        // Only the models the caller may use are named.
        let usable = runtime.access().usable(&user.name, user.is_admin).await;
        let usable =
            usable.map_err(|err| AnthropicError::from(super::error::ApiError::from(err)))?;
        let names = crate::config::names(
            runtime
                .config
                .models
                .keys()
                .filter(|key| usable.model(&runtime.config, key)),
        );
        return Err(AnthropicError::new(
            StatusCode::NOT_FOUND,
            format!("model: {name:?} is not a model of this server (yours: {names})"),
        ));
    }
    check_model_call(state, user, name).await?;
    let env = state.registry.env().clone();
    let lookup = move |key: &str| env.get(key).cloned();
    resolve_served(&runtime.config, name, &lookup).map_err(|err| {
        // The detail (an environment variable, a path) is the operator's.
        tracing::warn!(%err, model = name, "anthropic endpoint: model unusable");
        AnthropicError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "model: {name:?} is not usable on this server now; its operator's log says why"
            ),
        )
    })
}

/// Adds what a call cost to the caller's spend (in the background: the
/// reply does not wait for the store), whether or not it completed.
fn spend_recorder(state: &AppState, user: &User, model: &ResolvedModel) -> reply::OnUsage {
    let store = state.registry.runtime().store.clone();
    let (owner, price, name) = (user.name.clone(), model.price, model.model_name.clone());
    Box::new(move |usage: Usage| {
        let cost = match price {
            Some(price) => price.cost(&usage),
            None => agentd_model::price::cost_usd(&name, &usage),
        };
        if cost <= 0.0 {
            return;
        }
        metrics::spent(&owner, cost);
        tokio::spawn(async move {
            if let Err(err) = store.record_spend(&owner, cost).await {
                tracing::warn!(%err, user = owner, "could not record the spend of a /v1/messages call");
            }
        });
    })
}

/// Documents the `x-api-key` scheme next to `bearer`.
pub(super) fn document_api_key(api: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
    let components = api.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "api_key",
        SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new(API_KEY_HEADER))),
    );
}
