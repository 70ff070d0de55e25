//! The routes of "Sign in with …" (see `oidc`): `GET /v1/auth/methods`
//! (what the sign-in view offers; no credentials needed),
//! `GET /v1/auth/oidc/login` and `GET /v1/auth/oidc/callback`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::header::{CONTENT_TYPE, HOST, LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::accounts::{AccountRules, account_user};
use super::auth::{cookie_value, new_token, over_https, session_cookie, token_record};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::oidc::{CALLBACK_PATH, FLOW_COOKIE, FLOW_MAX_AGE_S, Flow, Oidc};
use super::oidc_groups::{check_allowed, sync_groups};
use super::sign_in::{OIDC_TOKEN_NAME, session_cookie_value};

#[derive(Debug, Serialize, ToSchema)]
pub struct AuthMethodsView {
    /// The methods on, in the order they are tried: `header`, `token`,
    /// `jwt`; or `none`.
    pub methods: Vec<String>,
    /// Present when the web UI can sign in at an identity provider.
    pub oidc: Option<OidcView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OidcView {
    /// For the button: "Sign in with <name>".
    pub name: String,
    /// Where the button goes (add `?next=/path` to come back there).
    pub login_url: String,
}

/// How one signs in here, for the web UI's sign-in view. Needs no
/// credentials: it names the methods, never a user.
#[utoipa::path(get, path = "/v1/auth/methods", tag = "auth",
    responses((status = 200, body = AuthMethodsView)))]
pub async fn methods(State(state): State<AppState>) -> Json<AuthMethodsView> {
    let view = match state.auth.methods() {
        None => AuthMethodsView {
            methods: vec!["none".into()],
            oidc: None,
        },
        Some(methods) => AuthMethodsView {
            methods: methods.names().into_iter().map(String::from).collect(),
            oidc: methods.oidc.as_ref().map(|oidc| OidcView {
                name: oidc.display_name(),
                login_url: "/v1/auth/oidc/login".into(),
            }),
        },
    };
    Json(view)
}

fn oidc(state: &AppState) -> ApiResult<Arc<Oidc>> {
    state
        .auth
        .methods()
        .and_then(|m| m.oidc.clone())
        .ok_or_else(|| ApiError::NotFound("no [server.oidc] is configured".into()))
}

/// Where the provider sends the browser back: configured, or this server
/// as the browser named it (allowed on loopback only, see `auth_methods`).
fn redirect_uri(oidc: &Oidc, headers: &HeaderMap) -> ApiResult<String> {
    if let Some(url) = &oidc.config.redirect_url {
        return Ok(url.clone());
    }
    let host = headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        })
        .ok_or_else(|| ApiError::BadRequest("no usable Host header".into()))?;
    let scheme = if over_https(headers) { "https" } else { "http" };
    Ok(format!("{scheme}://{host}{CALLBACK_PATH}"))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LoginQuery {
    /// A path on this server to land on once signed in (default `/`).
    pub next: Option<String>,
}

/// Start signing in at the identity provider: `303` to its authorization
/// endpoint (code flow, PKCE S256), with a short-lived, signed
/// `agentd_oidc` cookie holding the state, nonce and PKCE verifier. This
/// browser's previous sign-in (its `agentd_session` cookie, sent since the
/// UI's button is on this site) is revoked.
#[utoipa::path(get, path = "/v1/auth/oidc/login", tag = "auth",
    params(LoginQuery),
    responses(
        (status = 303, description = "To the identity provider; `Set-Cookie: agentd_oidc=…`"),
        (status = 404, description = "No `[server.oidc]` is configured", body = ErrorBody),
        (status = 500, description = "The identity provider cannot be reached", body = ErrorBody),
    ))]
pub async fn login(
    State(state): State<AppState>,
    Query(query): Query<LoginQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let oidc = oidc(&state)?;
    let flow = Flow::start(query.next.as_deref());
    let redirect = redirect_uri(&oidc, &headers)?;
    let url = oidc.authorize_url(&flow, &redirect).await?;
    // The callback comes from the provider's site: `SameSite=Strict` keeps
    // the old cookie from it, so the old sign-in is ended here.
    if let Some(old) = session_cookie(&headers)
        && let Ok(old) = token_record(&state, old).await
    {
        state
            .registry
            .runtime()
            .access()
            .revoke_token(&old.id)
            .await?;
    }
    let cookie = flow_cookie(
        secure(&redirect, &headers),
        &flow.to_cookie(oidc.flow_key()),
        FLOW_MAX_AGE_S,
    )?;
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    headers.insert(LOCATION, header(&url)?);
    headers.insert(SET_COOKIE, cookie);
    Ok(response)
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CallbackQuery {
    pub code: Option<String>,
    pub state: Option<String>,
    /// The provider's refusal (`access_denied`, …).
    pub error: Option<String>,
}

/// Where the identity provider sends the browser back: checks the state,
/// trades the code (with the PKCE verifier) for an id_token, checks it,
/// checks the allow-lists, finds the user linked to the account (or makes
/// one on first sign-in), applies `[server.oidc.groups]` (taking back what
/// groups no longer give), and sets the `agentd_session` cookie (for
/// `session_max_age_s`). Answers a page that moves on to `next`.
#[utoipa::path(get, path = "/v1/auth/oidc/callback", tag = "auth",
    params(CallbackQuery),
    responses(
        (status = 200, description = "Signed in; `Set-Cookie: agentd_session=…`; an HTML page that moves on",
            content_type = "text/html"),
        (status = 400, description = "No sign-in under way, or its state does not match", body = ErrorBody),
        (status = 403, description = "The provider or its id_token refused; not allowed here; the name belongs to a user not linked to this account; the user is disabled", body = ErrorBody),
        (status = 404, description = "No `[server.oidc]` is configured", body = ErrorBody),
        (status = 500, description = "The identity provider cannot be reached", body = ErrorBody),
    ))]
pub async fn callback(
    State(state): State<AppState>,
    Query(query): Query<CallbackQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let oidc = oidc(&state)?;
    if let Some(error) = &query.error {
        return Err(ApiError::Forbidden(format!(
            "the identity provider refused the sign-in: {error}"
        )));
    }
    let flow = cookie_value(&headers, FLOW_COOKIE)
        .and_then(|value| Flow::from_cookie(value, oidc.flow_key()))
        .ok_or_else(|| ApiError::BadRequest("no sign-in is under way here; start again".into()))?;
    let (Some(code), Some(returned)) = (&query.code, &query.state) else {
        return Err(ApiError::BadRequest("code and state are required".into()));
    };
    if !flow.state_matches(returned) {
        return Err(ApiError::BadRequest(
            "the state is not this browser's sign-in; start again".into(),
        ));
    }
    let redirect = redirect_uri(&oidc, &headers)?;
    let identity = oidc.finish(&flow, code, &redirect).await?;
    check_allowed(&oidc.config, &identity)?;
    let rules = AccountRules {
        link_existing_users: oidc.config.link_existing_users,
        create_users: oidc.config.create_users,
    };
    let user = account_user(&state, rules, &identity.account).await?;
    sync_groups(&state, &oidc.config, &identity, &user).await?;
    let access = state.registry.runtime().access();
    let (token, hash, prefix) = new_token();
    access
        .create_token(&user.id, OIDC_TOKEN_NAME, &hash, &prefix)
        .await?;
    access
        .audit(&user.name)
        .record(
            "login",
            Some(&user.name),
            serde_json::json!({"method": "oidc", "groups": identity.groups}),
        )
        .await;
    let secure = secure(&redirect, &headers);
    let max_age = i64::try_from(oidc.config.session_max_age_s).unwrap_or(i64::MAX);
    let mut response = (StatusCode::OK, moving_on(&flow.next)).into_response();
    let out = response.headers_mut();
    out.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    out.append(SET_COOKIE, session_cookie_value(&token, max_age, secure)?);
    out.append(SET_COOKIE, flow_cookie(secure, "", 0)?);
    Ok(response)
}

/// Cookies are `Secure` when the browser comes back over https: as the
/// callback address says (a top-level GET from the provider carries no
/// `Origin` to tell).
fn secure(redirect_uri: &str, headers: &HeaderMap) -> bool {
    redirect_uri.to_ascii_lowercase().starts_with("https://") || over_https(headers)
}

/// A page that moves the browser on to `next` (a checked local path). Not
/// a redirect: the `SameSite=Strict` cookie just set is then sent with the
/// next page, which this site's own page asks for.
fn moving_on(next: &str) -> String {
    let next = next
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    format!(
        "<!doctype html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url={next}\">\
         <title>Signed in</title><p>Signed in. <a href=\"{next}\">Continue</a></p>\n"
    )
}

/// The flow cookie: `SameSite=Lax`, since the provider's redirect back is
/// a top-level navigation from another site; only its own routes see it.
fn flow_cookie(secure: bool, value: &str, max_age_s: i64) -> ApiResult<HeaderValue> {
    let secure = if secure { "; Secure" } else { "" };
    header(&format!(
        "{FLOW_COOKIE}={value}; HttpOnly; SameSite=Lax; Path=/v1/auth/oidc; Max-Age={max_age_s}{secure}"
    ))
}

fn header(value: &str) -> ApiResult<HeaderValue> {
    HeaderValue::try_from(value).map_err(|err| ApiError::Internal(err.to_string()))
}
