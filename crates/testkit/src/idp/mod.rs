//! A small OpenID Connect provider for tests, on a local port: discovery,
//! an authorization endpoint that signs in its current user at once
//! (auto-consent), a token endpoint that checks the client and the PKCE
//! verifier (S256), and a JWKS. Tests rotate its keys, mint JWTs with any
//! claims, and read the requests it got ([`IdentityProvider::requests`]).

mod keys;

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

pub use keys::{KeyKind, SigningKey};

/// One request the provider got: its path and its query or form fields.
#[derive(Debug, Clone)]
pub struct IdpRequest {
    pub path: String,
    pub params: BTreeMap<String, String>,
    /// For token requests: whether the PKCE verifier matched the challenge.
    pub pkce_ok: Option<bool>,
}

struct Pending {
    redirect_uri: String,
    nonce: Option<String>,
    challenge: String,
    claims: Value,
}

struct Inner {
    /// Published in the JWKS; the last one signs.
    keys: Vec<SigningKey>,
    /// The claims of the user the authorization endpoint signs in.
    user: Value,
    codes: HashMap<String, Pending>,
    requests: Vec<IdpRequest>,
    minted: u64,
    /// Merged into the next id_tokens last (`null` removes a claim).
    id_token_overrides: Value,
    /// Every answer is a 500 (the provider is down).
    down: bool,
}

struct Shared {
    issuer: String,
    client_id: String,
    client_secret: String,
    inner: Mutex<Inner>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The provider. Dropping it stops serving.
pub struct IdentityProvider {
    shared: Arc<Shared>,
    _stop: oneshot::Sender<()>,
}

impl IdentityProvider {
    /// Serves on a free port of 127.0.0.1 for the client `client_id` /
    /// `client_secret`, signing with the fixed RSA key (kid `rsa-1`).
    pub async fn start(client_id: &str, client_secret: &str) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .await
            .context("binding the identity provider")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            issuer: format!("http://{addr}"),
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            inner: Mutex::new(Inner {
                keys: vec![SigningKey::new(KeyKind::Rs256, "rsa-1")?],
                user: json!({"sub": "alice"}),
                codes: HashMap::new(),
                requests: Vec::new(),
                minted: 0,
                id_token_overrides: json!({}),
                down: false,
            }),
        });
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/jwks", get(jwks))
            .layer(axum::middleware::from_fn_with_state(shared.clone(), outage))
            .with_state(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(IdentityProvider {
            shared,
            _stop: stop,
        })
    }

    /// Its issuer URL (`http://127.0.0.1:PORT`).
    pub fn issuer(&self) -> &str {
        &self.shared.issuer
    }

    /// The claims of whoever signs in next (besides `iss`, `aud`, `exp`,
    /// `iat`, `nonce`), e.g. `{"sub": "bob", "groups": ["ops"]}`.
    pub fn set_user(&self, claims: Value) {
        self.shared.lock().user = claims;
    }

    /// Claims the id_tokens issued from now on get last, whatever the
    /// sign-in: a wrong `iss` or `aud`, an old `exp`, or `null` to leave a
    /// claim out (`{"nonce": null}`).
    pub fn override_id_tokens(&self, claims: Value) {
        self.shared.lock().id_token_overrides = claims;
    }

    /// Make every endpoint answer 500 (`true`) or work again.
    pub fn set_down(&self, down: bool) {
        self.shared.lock().down = down;
    }

    /// Replace every published key by a new one of `kind` (`kid` `key-N`);
    /// the new key signs from now on. Its kid.
    pub fn rotate(&self, kind: KeyKind) -> anyhow::Result<String> {
        let mut inner = self.shared.lock();
        inner.minted += 1;
        let key = SigningKey::new(kind, &format!("key-{}", inner.minted))?;
        let kid = key.kid.clone();
        inner.keys = vec![key];
        Ok(kid)
    }

    /// A JWT with exactly `claims`, signed by the current key.
    pub fn mint(&self, claims: &Value) -> anyhow::Result<String> {
        let key = self.current_key();
        key.sign(claims)
    }

    /// The key signing now.
    pub fn current_key(&self) -> SigningKey {
        let inner = self.shared.lock();
        inner
            .keys
            .last()
            .cloned()
            .unwrap_or_else(|| unreachable!("always one key"))
    }

    /// Claims a valid token for `audience` naming `sub` has: this issuer,
    /// an hour to live.
    pub fn claims(&self, sub: &str, audience: &str) -> Value {
        let now = now();
        json!({"iss": self.issuer(), "aud": audience, "sub": sub, "iat": now, "nbf": now,
            "exp": now + 3600})
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<IdpRequest> {
        self.shared.lock().requests.clone()
    }

    /// How many times the JWKS was fetched.
    pub fn jwks_fetches(&self) -> usize {
        self.requests().iter().filter(|r| r.path == "/jwks").count()
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

fn record(shared: &Shared, path: &str, params: &HashMap<String, String>, pkce_ok: Option<bool>) {
    let params = params.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    shared.lock().requests.push(IdpRequest {
        path: path.into(),
        params,
        pkce_ok,
    });
}

async fn discovery(State(shared): State<Arc<Shared>>) -> Json<Value> {
    record(
        &shared,
        "/.well-known/openid-configuration",
        &HashMap::new(),
        None,
    );
    let issuer = &shared.issuer;
    Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "jwks_uri": format!("{issuer}/jwks"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256", "ES256", "EdDSA"],
        "code_challenge_methods_supported": ["S256"],
    }))
}

async fn jwks(State(shared): State<Arc<Shared>>) -> Json<Value> {
    record(&shared, "/jwks", &HashMap::new(), None);
    let keys: Vec<Value> = shared.lock().keys.iter().map(|k| k.jwk.clone()).collect();
    Json(json!({"keys": keys}))
}

/// While down, every request is recorded and answered 500.
async fn outage(
    State(shared): State<Arc<Shared>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if !shared.lock().down {
        return next.run(request).await;
    }
    record(&shared, request.uri().path(), &HashMap::new(), None);
    StatusCode::INTERNAL_SERVER_ERROR.into_response()
}

fn oauth_error(status: StatusCode, error: &str) -> Response {
    (status, Json(json!({"error": error}))).into_response()
}

/// Signs the current user in at once and sends the browser back with a code.
async fn authorize(
    State(shared): State<Arc<Shared>>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    record(&shared, "/authorize", &params, None);
    let get = |key: &str| params.get(key).cloned().unwrap_or_default();
    if get("client_id") != shared.client_id || get("response_type") != "code" {
        return oauth_error(StatusCode::BAD_REQUEST, "unauthorized_client");
    }
    if get("code_challenge_method") != "S256" || get("code_challenge").is_empty() {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_request");
    }
    let Ok(mut redirect) = url::Url::parse(&get("redirect_uri")) else {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_request");
    };
    let code = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>());
    {
        let mut inner = shared.lock();
        let claims = inner.user.clone();
        inner.codes.insert(
            code.clone(),
            Pending {
                redirect_uri: get("redirect_uri"),
                nonce: params.get("nonce").cloned(),
                challenge: get("code_challenge"),
                claims,
            },
        );
    }
    redirect
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &get("state"));
    Redirect::to(redirect.as_str()).into_response()
}

/// The client's id and secret, from HTTP Basic or the form.
fn client(headers: &HeaderMap, form: &HashMap<String, String>) -> (String, String) {
    let basic = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|v| STANDARD.decode(v).ok())
        .and_then(|v| String::from_utf8(v).ok());
    match basic.as_deref().and_then(|v| v.split_once(':')) {
        Some((id, secret)) => (id.into(), secret.into()),
        None => (
            form.get("client_id").cloned().unwrap_or_default(),
            form.get("client_secret").cloned().unwrap_or_default(),
        ),
    }
}

async fn token(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let get = |key: &str| form.get(key).cloned().unwrap_or_default();
    let pending = shared.lock().codes.remove(&get("code"));
    let verifier = get("code_verifier");
    let pkce_ok = pending
        .as_ref()
        .map(|p| URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes())) == p.challenge);
    record(&shared, "/token", &form, pkce_ok);
    if client(&headers, &form) != (shared.client_id.clone(), shared.client_secret.clone()) {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
    }
    let Some(pending) = pending else {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
    };
    if pkce_ok != Some(true) || get("redirect_uri") != pending.redirect_uri {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
    }
    let now = now();
    let mut claims = json!({"iss": shared.issuer, "aud": shared.client_id, "iat": now,
        "exp": now + 300});
    if let (Some(map), Some(user)) = (claims.as_object_mut(), pending.claims.as_object()) {
        map.extend(user.clone());
    }
    if let Some(nonce) = pending.nonce {
        claims["nonce"] = json!(nonce);
    }
    let overrides = shared.lock().id_token_overrides.clone();
    if let (Some(map), Some(overrides)) = (claims.as_object_mut(), overrides.as_object()) {
        for (key, value) in overrides {
            match value {
                Value::Null => map.remove(key),
                value => map.insert(key.clone(), value.clone()),
            };
        }
    }
    let key = shared.lock().keys.last().cloned();
    let Some(Ok(id_token)) = key.map(|k| k.sign(&claims)) else {
        return oauth_error(StatusCode::INTERNAL_SERVER_ERROR, "server_error");
    };
    Json(
        json!({"access_token": "opaque", "token_type": "Bearer", "expires_in": 300,
        "id_token": id_token}),
    )
    .into_response()
}
