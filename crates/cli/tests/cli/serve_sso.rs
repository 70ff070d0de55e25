//! Sign-in for teams against the real `agentd serve` and the testkit's
//! identity provider: JWT Bearer tokens (issuer, audience, expiry, keys,
//! rotation) and several methods at once (header, token, JWT in that
//! order, failing closed).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::serve_harness::{Harness, Server};

use agentd_testkit::idp::{IdentityProvider, KeyKind, SigningKey};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const SECRET: &str = "proxy-secret-0123456789";
const AUDIENCE: &str = "agentd-api";
/// A little over `jwks_min_refetch_s = 1`.
const REFETCH_WAIT: std::time::Duration = std::time::Duration::from_millis(1100);

fn script() -> Value {
    json!({"replies": [{"repeat": true, "content": [{"type": "text", "text": "hello"}]}]})
}

/// A server taking `auth` methods, JWTs from `idp` (JWKS by discovery).
async fn serve(idp: &IdentityProvider, auth: &str, refetch_s: u64) -> (Harness, Server) {
    let toml = format!(
        "[server]\nauth = {auth}\nheader_name = \"X-Remote-User\"\nheader_secret = \"{SECRET}\"\n\
         [server.jwt]\nissuer = \"{}\"\naudience = \"{AUDIENCE}\"\nleeway_s = 30\n\
         jwks_min_refetch_s = {refetch_s}\n",
        idp.issuer()
    );
    let h = Harness::new(script(), &toml).await;
    let server = h.start().await;
    (h, server)
}

/// `(user, method)` of a signed-in request, or the refusal.
type Answer = Result<(String, String), StatusCode>;
/// What a row of the table sends, and what it must get.
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Answer);

/// Who `GET /v1/auth/me` says the request is, by which method; or the status.
async fn whoami(server: &Server, headers: &[(&str, &str)]) -> Answer {
    let mut builder = server.client.get(format!("{}/v1/auth/me", server.url));
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let (status, body) = server.send(builder).await;
    if status != StatusCode::OK {
        return Err(status);
    }
    Ok((
        body["user"].as_str().unwrap().into(),
        body["auth"].as_str().unwrap().into(),
    ))
}

/// The `agentd_session` cookie `POST /v1/auth/login` sets for `token`.
async fn sign_in_cookie(server: &Server, token: &str) -> String {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/auth/login", server.url))
        .json(&json!({"token": token}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let cookie = response.headers()["set-cookie"].to_str().unwrap();
    let pair = cookie.split(';').next().unwrap();
    pair.trim_start_matches("agentd_session=").to_string()
}

/// `token` with its payload replaced by `claims`, its signature kept.
fn tampered(token: &str, claims: &Value) -> String {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let parts: Vec<&str> = token.split('.').collect();
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    format!("{}.{payload}.{}", parts[0], parts[2])
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[tokio::test]
async fn jwts_are_checked_for_issuer_audience_time_and_key() {
    let idp = IdentityProvider::start("agentd-web", "web-secret")
        .await
        .unwrap();
    let (_h, server) = serve(&idp, "\"jwt\"", 3600).await;
    let good = idp.mint(&idp.claims("carol", AUDIENCE)).unwrap();
    assert_eq!(
        whoami(&server, &[("authorization", &bearer(&good))]).await,
        Ok(("carol".into(), "jwt".into()))
    );
    // A good JWT reaches the API as carol: her session is hers.
    let carol = server.as_user(&good);
    let session = carol.session().await;
    let (status, _) = carol.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(status, StatusCode::OK);

    let now = idp.claims("carol", AUDIENCE)["iat"].as_u64().unwrap();
    let mut cases: Vec<(&str, String)> = Vec::new();
    let mut bad = |what: &'static str, edit: &dyn Fn(&mut Value)| {
        let mut claims = idp.claims("carol", AUDIENCE);
        edit(&mut claims);
        cases.push((what, idp.mint(&claims).unwrap()));
    };
    bad("wrong audience", &|c| c["aud"] = json!("someone-else"));
    bad("wrong issuer", &|c| c["iss"] = json!("http://127.0.0.1:1"));
    bad("expired beyond the leeway", &|c| {
        c["exp"] = json!(now - 120)
    });
    bad("not yet valid beyond the leeway", &|c| {
        c["nbf"] = json!(now + 120)
    });
    bad("no expiry", &|c| {
        c.as_object_mut().unwrap().remove("exp");
    });
    // An unknown key, with a kid the provider never published.
    let stranger = SigningKey::new(KeyKind::Es256, "stranger").unwrap();
    cases.push((
        "signed by an unknown key",
        stranger.sign(&idp.claims("carol", AUDIENCE)).unwrap(),
    ));
    // The provider's kid, but another algorithm (refused before any key).
    let other_alg = SigningKey::new(KeyKind::Es256, "rsa-1").unwrap();
    cases.push((
        "another algorithm under a known kid",
        other_alg.sign(&idp.claims("carol", AUDIENCE)).unwrap(),
    ));
    cases.push(("not a JWT", "eyJhbGciOi.nope.nope".into()));
    for (what, token) in &cases {
        let answer = whoami(&server, &[("authorization", &bearer(token))]).await;
        assert_eq!(answer, Err(StatusCode::UNAUTHORIZED), "{what}");
    }
    // A signed token naming no user name: refused, saying so.
    let mut claims = idp.claims("a b", AUDIENCE);
    claims["iat"] = json!(now);
    let unnamed = idp.mint(&claims).unwrap();
    let answer = whoami(&server, &[("authorization", &bearer(&unnamed))]).await;
    assert_eq!(
        answer,
        Err(StatusCode::FORBIDDEN),
        "a user name that is not one"
    );
    // Expired, but within the 30 s leeway: still good.
    let mut claims = idp.claims("carol", AUDIENCE);
    claims["exp"] = json!(now - 10);
    let late = idp.mint(&claims).unwrap();
    assert!(
        whoami(&server, &[("authorization", &bearer(&late))])
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn rotated_keys_are_fetched_again_and_removed_ones_stop_working() {
    let idp = IdentityProvider::start("agentd-web", "web-secret")
        .await
        .unwrap();
    let (_h, server) = serve(&idp, "\"jwt\"", 1).await;
    let old = idp.mint(&idp.claims("dave", AUDIENCE)).unwrap();
    let auth = |t: &str| bearer(t);
    assert!(
        whoami(&server, &[("authorization", &auth(&old))])
            .await
            .is_ok()
    );
    let fetched = idp.jwks_fetches();
    assert_eq!(fetched, 1, "the JWKS is cached");
    assert!(
        whoami(&server, &[("authorization", &auth(&old))])
            .await
            .is_ok()
    );
    assert_eq!(idp.jwks_fetches(), 1, "a known kid needs no fetch");

    // The provider rotates to an EdDSA key: its kid is unknown, so the
    // server fetches the JWKS again and accepts it.
    let kid = idp.rotate(KeyKind::EdDsa).unwrap();
    let new = idp.mint(&idp.claims("dave", AUDIENCE)).unwrap();
    tokio::time::sleep(REFETCH_WAIT).await;
    assert_eq!(idp.current_key().kid, kid);
    assert_eq!(
        whoami(&server, &[("authorization", &auth(&new))]).await,
        Ok(("dave".into(), "jwt".into()))
    );
    assert_eq!(idp.jwks_fetches(), 2);
    // The old key is gone from the JWKS just fetched: refused.
    assert_eq!(
        whoami(&server, &[("authorization", &auth(&old))]).await,
        Err(StatusCode::UNAUTHORIZED)
    );
    // And ES256 after another rotation.
    idp.rotate(KeyKind::Es256).unwrap();
    let es = idp.mint(&idp.claims("dave", AUDIENCE)).unwrap();
    tokio::time::sleep(REFETCH_WAIT).await;
    assert!(
        whoami(&server, &[("authorization", &auth(&es))])
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn unknown_kids_refetch_at_most_once_per_interval() {
    let idp = IdentityProvider::start("agentd-web", "web-secret")
        .await
        .unwrap();
    let (_h, server) = serve(&idp, "\"jwt\"", 3600).await;
    let good = idp.mint(&idp.claims("erin", AUDIENCE)).unwrap();
    assert!(
        whoami(&server, &[("authorization", &bearer(&good))])
            .await
            .is_ok()
    );
    // Forged kids cannot make the server hammer the provider.
    for n in 0..5 {
        let key = SigningKey::new(KeyKind::Es256, &format!("forged-{n}")).unwrap();
        let token = key.sign(&idp.claims("erin", AUDIENCE)).unwrap();
        let answer = whoami(&server, &[("authorization", &bearer(&token))]).await;
        assert_eq!(answer, Err(StatusCode::UNAUTHORIZED));
    }
    assert!(idp.jwks_fetches() <= 2, "{} fetches", idp.jwks_fetches());
}

#[tokio::test]
async fn header_then_token_then_jwt_decides_and_nothing_falls_through() {
    let idp = IdentityProvider::start("agentd-web", "web-secret")
        .await
        .unwrap();
    let (h, server) = serve(&idp, "[\"jwt\", \"token\", \"header\"]", 3600).await;
    let token = h.token("tina").await;
    let jwt = idp.mint(&idp.claims("jade", AUDIENCE)).unwrap();
    let bad_jwt = idp.mint(&idp.claims("jade", "other-audience")).unwrap();
    let wrong_token = format!("agentd_{}", "0".repeat(64));
    let (tok, good_jwt, bad_jwt) = (bearer(&token), bearer(&jwt), bearer(&bad_jwt));
    let wrong_tok = bearer(&wrong_token);
    let proxy = ("x-agentd-proxy-secret", SECRET);
    let wrong_proxy = ("x-agentd-proxy-secret", "not-the-secret-at-all");
    let user = ("x-remote-user", "hana");
    let ok = |user: &str, how: &str| Ok((user.to_string(), how.to_string()));
    let no = || Err(StatusCode::UNAUTHORIZED);
    let table: Vec<Case> = vec![
        ("nothing: fail closed", vec![], no()),
        ("the proxy alone", vec![proxy, user], ok("hana", "header")),
        (
            "the proxy wins over a token",
            vec![proxy, user, ("authorization", &tok)],
            ok("hana", "header"),
        ),
        (
            "the proxy wins over a JWT",
            vec![proxy, user, ("authorization", &good_jwt)],
            ok("hana", "header"),
        ),
        (
            "a wrong proxy secret does not fall through to a good token",
            vec![wrong_proxy, user, ("authorization", &tok)],
            no(),
        ),
        (
            "the proxy without a user does not fall through",
            vec![proxy, ("authorization", &tok)],
            no(),
        ),
        (
            "a user header without the secret is no credential",
            vec![user],
            no(),
        ),
        (
            "a user header without the secret: the token decides",
            vec![user, ("authorization", &tok)],
            ok("tina", "token"),
        ),
        (
            "a token",
            vec![("authorization", &tok)],
            ok("tina", "token"),
        ),
        (
            "a wrong token does not fall through to the JWT method",
            vec![("authorization", &wrong_tok)],
            no(),
        ),
        (
            "a JWT",
            vec![("authorization", &good_jwt)],
            ok("jade", "jwt"),
        ),
        ("a bad JWT", vec![("authorization", &bad_jwt)], no()),
        (
            "a non-Bearer Authorization",
            vec![("authorization", "Basic dGluYTp4")],
            no(),
        ),
    ];
    for (what, headers, expected) in table {
        assert_eq!(whoami(&server, &headers).await, expected, "{what}");
    }
    // A wrong Bearer next to a good session cookie: the Bearer decides.
    let cookie = format!("agentd_session={}", sign_in_cookie(&server, &token).await);
    assert_eq!(
        whoami(&server, &[("cookie", &cookie)]).await,
        ok("tina", "token")
    );
    for (what, bearer) in [("a wrong token", &wrong_tok), ("a bad JWT", &bad_jwt)] {
        let headers = [("authorization", bearer.as_str()), ("cookie", &cookie)];
        assert_eq!(
            whoami(&server, &headers).await,
            no(),
            "{what} + a good cookie"
        );
    }
    // Writes through the proxy from another site's page: refused; from
    // this server's page (as the proxy names it) or no browser: fine.
    let write = |origin: Option<&str>| {
        let mut builder = server
            .request(Method::POST, "/v1/sessions")
            .header(proxy.0, proxy.1)
            .header(user.0, user.1)
            .header("x-forwarded-host", "agentd.example")
            .json(&json!({}));
        if let Some(origin) = origin {
            builder = builder.header("origin", origin);
        }
        server.send(builder)
    };
    let (status, body) = write(Some("https://evil.example")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "bad_origin", "{body}");
    let (status, body) = write(Some("https://agentd.example")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = write(None).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // The methods are told, in the order they are tried.
    let (status, body) = server.get("/v1/auth/methods").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"methods": ["header", "token", "jwt"], "oidc": null})
    );
    // Writes by JWT work like any Bearer: no Origin needed.
    let builder = server
        .request(Method::POST, "/v1/sessions")
        .header("authorization", &good_jwt)
        .json(&json!({}));
    let (status, body) = server.send(builder).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn bad_auth_lists_are_refused_at_start() {
    let h = Harness::new(script(), "[server]\nauth = [\"none\", \"token\"]\n").await;
    let (code, _, stderr) = h.cli(&["serve", "--bind", "127.0.0.1:0"]).await;
    assert_ne!(code, 0);
    assert!(stderr.contains("cannot be combined"), "{stderr}");
    let h = Harness::new(script(), "[server]\nauth = [\"token\", \"jwt\"]\n").await;
    let (code, _, stderr) = h.cli(&["serve", "--bind", "127.0.0.1:0"]).await;
    assert_ne!(code, 0);
    assert!(stderr.contains("[server.jwt]"), "{stderr}");
    let h = Harness::new(script(), "[server]\nauth = [\"hs256\"]\n").await;
    let (code, _, stderr) = h.cli(&["serve", "--bind", "127.0.0.1:0"]).await;
    assert_ne!(code, 0);
    assert!(stderr.contains("one of"), "{stderr}");
    let toml = "[server]\nauth = \"jwt\"\n[server.jwt]\nissuer = \"http://idp\"\n\
                audience = \"a\"\nalgorithms = [\"HS256\"]\n";
    let h = Harness::new(script(), toml).await;
    let (code, _, stderr) = h.cli(&["serve", "--bind", "127.0.0.1:0"]).await;
    assert_ne!(code, 0);
    assert!(stderr.contains("HS256"), "{stderr}");
}

#[tokio::test]
async fn a_signature_must_be_the_published_keys_own() {
    let idp = IdentityProvider::start("agentd-web", "web-secret")
        .await
        .unwrap();
    // An ES256 key of the provider's, before the server fetched anything.
    let kid = idp.rotate(KeyKind::Es256).unwrap();
    let (_h, server) = serve(&idp, "\"jwt\"", 3600).await;
    let good = idp.mint(&idp.claims("carol", AUDIENCE)).unwrap();
    assert_eq!(
        whoami(&server, &[("authorization", &bearer(&good))]).await,
        Ok(("carol".into(), "jwt".into()))
    );
    // Same kid, same algorithm, another key: the signature does not verify.
    let impostor = SigningKey::new(KeyKind::Es256, &kid).unwrap();
    let forged = impostor.sign(&idp.claims("carol", AUDIENCE)).unwrap();
    // The provider's own signature over other claims.
    let edited = tampered(&good, &idp.claims("root", AUDIENCE));
    for (what, token) in [
        ("another key, same kid and alg", forged),
        ("a tampered payload", edited),
    ] {
        let answer = whoami(&server, &[("authorization", &bearer(&token))]).await;
        assert_eq!(answer, Err(StatusCode::UNAUTHORIZED), "{what}");
    }
}

#[tokio::test]
async fn a_provider_account_keeps_its_user_and_takes_over_nobody() {
    let idp = IdentityProvider::start("agentd-web", "web-secret")
        .await
        .unwrap();
    let toml = format!(
        "[server]\nauth = [\"token\", \"jwt\"]\n[server.jwt]\nissuer = \"{}\"\n\
         audience = \"{AUDIENCE}\"\nuser_claim = \"preferred_username\"\n[access]\nadmins = [\"boss\"]\n",
        idp.issuer()
    );
    let h = Harness::new(script(), &toml).await;
    let (code, _, stderr) = h
        .cli(&["tokens", "create", "--user", "root", "--admin"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let server = h.start().await;
    let jwt = |sub: &str, name: &str| {
        let mut claims = idp.claims(sub, AUDIENCE);
        claims["preferred_username"] = json!(name);
        bearer(&idp.mint(&claims).unwrap())
    };
    let as_ = |user: &str| Ok((user.to_string(), "jwt".to_string()));
    let forbidden = || Err(StatusCode::FORBIDDEN);
    let table = [
        ("an existing admin's name", jwt("s-1", "root"), forbidden()),
        ("an [access] admins name", jwt("s-2", "boss"), forbidden()),
        ("the reserved local", jwt("s-3", "local"), forbidden()),
        (
            "a new account makes its user",
            jwt("s-4", "kim"),
            as_("kim"),
        ),
        (
            "the account keeps its user, whatever the name",
            jwt("s-4", "root"),
            as_("kim"),
        ),
        (
            "another account naming that user",
            jwt("s-5", "kim"),
            forbidden(),
        ),
        (
            "a name differing in case only",
            jwt("s-6", "KIM"),
            forbidden(),
        ),
        ("a look-alike name", jwt("s-7", "kіm"), forbidden()),
    ];
    for (what, token, expected) in table {
        assert_eq!(
            whoami(&server, &[("authorization", &token)]).await,
            expected,
            "{what}"
        );
    }
    assert!(
        server.log().contains("link_existing_users"),
        "{}",
        server.log()
    );
    // kim is no admin, and root is still root's own.
    let root = h.token("root").await;
    let (_, kim) = server.as_user(&root).get("/v1/admin/users/kim").await;
    assert_eq!(kim["is_admin"], false, "{kim}");
}

#[tokio::test]
async fn a_provider_down_keeps_the_keys_and_is_not_hammered() {
    let idp = IdentityProvider::start("agentd-web", "web-secret")
        .await
        .unwrap();
    let (_h, server) = serve(&idp, "\"jwt\"", 1).await;
    let good = bearer(&idp.mint(&idp.claims("erin", AUDIENCE)).unwrap());
    assert!(whoami(&server, &[("authorization", &good)]).await.is_ok());
    idp.set_down(true);
    tokio::time::sleep(REFETCH_WAIT).await;
    let before = idp.jwks_fetches();
    for n in 0..6 {
        let key = SigningKey::new(KeyKind::Es256, &format!("forged-{n}")).unwrap();
        let token = bearer(&key.sign(&idp.claims("erin", AUDIENCE)).unwrap());
        let answer = whoami(&server, &[("authorization", &token)]).await;
        assert_eq!(answer, Err(StatusCode::UNAUTHORIZED));
        // The keys at hand still work while the provider is down.
        assert!(whoami(&server, &[("authorization", &good)]).await.is_ok());
    }
    let attempts = idp.jwks_fetches() - before;
    assert_eq!(attempts, 1, "one attempt, then backing off");
}
