//! The web UI's sign-in: `POST /v1/auth/login` trades a pasted API token for
//! an `HttpOnly` cookie holding a token of its own, `POST /v1/auth/logout`
//! revokes that token, `GET /v1/auth/me` says who is signed in. Browsers
//! cannot put a token into an `EventSource`, and a cookie keeps the token out
//! of reach of the page's scripts.

use axum::Json;
use axum::extract::State;
use axum::http::header::{ORIGIN, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa::openapi::security::SecurityRequirement;

use super::AppState;
use super::auth::{
    SESSION_COOKIE, SESSION_MAX_AGE_S, authenticate_how, new_token, over_https, same_origin,
    session_cookie, token_record,
};
use super::error::{ApiError, ApiJson, ApiResult, ErrorBody};
use crate::config::AuthMode;

/// The label of the tokens sign-ins make (in `agentd tokens ls`).
pub const SIGN_IN_TOKEN_NAME: &str = "web sign-in";
/// The label of the tokens "Sign in with …" makes: they last
/// `[server.oidc] session_max_age_s`.
pub const OIDC_TOKEN_NAME: &str = "oidc sign-in";

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    /// An API token from `agentd tokens create` (ignored unless `auth` includes `"token"`).
    pub token: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SignedIn {
    /// The user the requests are made as.
    pub user: String,
    /// The method that signed this request in: `token` (a token or the
    /// cookie), `header` (the proxy in front), `jwt`, or `none` (nobody
    /// signs in).
    pub auth: String,
}

fn signed_in(user: String, mode: AuthMode) -> SignedIn {
    SignedIn {
        user,
        auth: mode.as_str().into(),
    }
}

/// Sign in with an API token: answers who it belongs to and sets the
/// `agentd_session` cookie (`HttpOnly; SameSite=Strict; Path=/`, 30 days)
/// to a new token of that user named `web sign-in`. With `auth = "none"` or
/// `"header"` nobody needs to sign in: the answer is the user, without a
/// cookie.
#[utoipa::path(post, path = "/v1/auth/login", tag = "auth",
    request_body = LoginRequest,
    responses(
        (status = 200, description = "Signed in; `Set-Cookie: agentd_session=…` with `auth = \"token\"`",
            body = SignedIn),
        (status = 401, description = "The token is unknown, revoked or malformed (no cookie)", body = ErrorBody),
        (status = 403, description = "`bad_origin`: sent from another site's page", body = ErrorBody),
    ))]
pub async fn login(
    State(state): State<AppState>,
    method: Method,
    headers: HeaderMap,
    ApiJson(body): ApiJson<LoginRequest>,
) -> ApiResult<Response> {
    if !state.auth.takes_tokens() {
        let (user, mode) = authenticate_how(&state, &method, &headers).await?;
        return Ok(Json(signed_in(user.name, mode)).into_response());
    }
    // Signing a browser in to someone else's account is forgery too.
    if headers.contains_key(ORIGIN) && !same_origin(&headers) {
        return Err(ApiError::BadOrigin);
    }
    let record = token_record(&state, body.token.trim()).await?;
    let access = state.registry.runtime().access();
    // This browser's previous sign-in, if any, is replaced.
    if let Some(old) = session_cookie(&headers)
        && let Ok(old) = token_record(&state, old).await
    {
        access.revoke_token(&old.id).await?;
    }
    let (token, hash, prefix) = new_token();
    access
        .create_token(&record.user_id, SIGN_IN_TOKEN_NAME, &hash, &prefix)
        .await?;
    let cookie = cookie(&headers, &token, SESSION_MAX_AGE_S)?;
    access
        .audit(&record.user_name)
        .record(
            "login",
            Some(&record.user_name),
            serde_json::json!({"token_id": record.id}),
        )
        .await;
    let mut response = Json(signed_in(record.user_name, AuthMode::Token)).into_response();
    response.headers_mut().insert(SET_COOKIE, cookie);
    Ok(response)
}

/// Sign out: revokes the cookie's token (a request signed in by it must
/// come from the UI's own origin) and clears the cookie. Answers `204` also
/// when nobody was signed in.
#[utoipa::path(post, path = "/v1/auth/logout", tag = "auth",
    responses(
        (status = 204, description = "Signed out; `Set-Cookie: agentd_session=; Max-Age=0`"),
        (status = 403, description = "`bad_origin`: sent from another site's page", body = ErrorBody),
    ))]
pub async fn logout(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    if let Some(token) = session_cookie(&headers) {
        if !same_origin(&headers) {
            return Err(ApiError::BadOrigin);
        }
        if state.auth.takes_tokens()
            && let Ok(record) = token_record(&state, token).await
        {
            let access = state.registry.runtime().access();
            access.revoke_token(&record.id).await?;
            access
                .audit(&record.user_name)
                .record("logout", Some(&record.user_name), serde_json::json!({}))
                .await;
        }
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response
        .headers_mut()
        .insert(SET_COOKIE, cookie(&headers, "", 0)?);
    Ok(response)
}

/// Who the request is signed in as (by Bearer token, cookie, proxy header,
/// or `local` with `auth = "none"`); `401` when nobody. The web UI asks this
/// first to know whether to show its sign-in form.
#[utoipa::path(get, path = "/v1/auth/me", tag = "auth",
    responses((status = 200, body = SignedIn), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn me(
    State(state): State<AppState>,
    method: Method,
    headers: HeaderMap,
) -> ApiResult<Json<SignedIn>> {
    let (user, mode) = authenticate_how(&state, &method, &headers).await?;
    Ok(Json(signed_in(user.name, mode)))
}

/// The `Set-Cookie` value for the session cookie; `Secure` when the browser
/// came over HTTPS.
fn cookie(headers: &HeaderMap, token: &str, max_age_s: i64) -> ApiResult<HeaderValue> {
    session_cookie_value(token, max_age_s, over_https(headers))
}

/// The `Set-Cookie` value signing a browser in with `token` for `max_age_s`.
pub(super) fn session_cookie_value(
    token: &str,
    max_age_s: i64,
    secure: bool,
) -> ApiResult<HeaderValue> {
    let secure = if secure { "; Secure" } else { "" };
    let value = format!(
        "{SESSION_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age={max_age_s}{secure}"
    );
    HeaderValue::try_from(value).map_err(|err| ApiError::Internal(err.to_string()))
}

/// Say in the OpenAPI document that every route taking a Bearer token also
/// takes the session cookie.
pub fn document_cookie(api: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
    let components = api.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "cookie",
        SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
            SESSION_COOKIE,
            "Set by `POST /v1/auth/login` (for the web UI). Requests other than \
             GET/HEAD/OPTIONS signed in by it need an `Origin` header naming this \
             server (else `403 bad_origin`).",
        ))),
    );
    let bearer = SecurityRequirement::new("bearer", Vec::<String>::new());
    let cookie = SecurityRequirement::new("cookie", Vec::<String>::new());
    for item in api.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            if let Some(security) = &mut operation.security
                && security.contains(&bearer)
                && !security.contains(&cookie)
            {
                security.push(cookie.clone());
            }
        }
    }
}
