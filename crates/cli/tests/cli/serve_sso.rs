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
    bad("a user name that is not one", &|c| c["sub"] = json!("a b"));
    // An unknown key, with a kid the provider never published.
    let stranger = SigningKey::new(KeyKind::Es256, "stranger").unwrap();
    cases.push((
        "signed by an unknown key",
        stranger.sign(&idp.claims("carol", AUDIENCE)).unwrap(),
    ));
    // The provider's kid, but another key's signature.
    let forged = SigningKey::new(KeyKind::Es256, "rsa-1").unwrap();
    cases.push((
        "another key under a known kid",
        forged.sign(&idp.claims("carol", AUDIENCE)).unwrap(),
    ));
    cases.push(("not a JWT", "eyJhbGciOi.nope.nope".into()));
    for (what, token) in &cases {
        let answer = whoami(&server, &[("authorization", &bearer(token))]).await;
        assert_eq!(answer, Err(StatusCode::UNAUTHORIZED), "{what}");
    }
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
    let (_h, server) = serve(&idp, "\"jwt\"", 0).await;
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
