//! `GET /v1/identity/jwks`: the public keys of the tokens agentd signs for
//! tools (`{user_token}`, see `crate::tool_identity`). Unauthenticated, as
//! key sets are: a tool verifies tokens with it and holds no agentd
//! credential.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::{ApiResult, ErrorBody};
use crate::tool_identity::Jwks;

/// The public keys (JWKS, RFC 7517) that verify the `{user_token}` JWTs
/// tools get: EdDSA (Ed25519) keys, each with the `kid` of its tokens. The
/// current key, the next one (published ahead of use) and those whose
/// tokens may still be valid. No authentication; cacheable for 5 minutes.
#[utoipa::path(get, path = "/v1/identity/jwks", tag = "server",
    responses((status = 200, description = "The key set", content_type = "application/jwk-set+json", body = Jwks),
        (status = 503, description = "The database is unavailable", body = ErrorBody)))]
pub async fn jwks(State(state): State<AppState>) -> ApiResult<Response> {
    let runtime = state.registry.runtime();
    let jwks = runtime.tool_keys.jwks(runtime.store.as_ref()).await?;
    let mut response = Json(jwks).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/jwk-set+json"),
    );
    // Less than a new key is published before use (`PUBLISH_LEAD`).
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    Ok(response)
}
