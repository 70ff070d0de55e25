//! Tokens for tools: minted, verified against the published keys, rotated.
#![allow(clippy::unwrap_used)]

use agentd_store::SigningKeyRecord;
use agentd_store::prelude::*;
use agentd_store::sqlite::SqliteStore;
use chrono::{Duration, Utc};
use jsonwebtoken::{DecodingKey, Validation, decode, decode_header};
use serde::Deserialize;

use super::keys::{Jwks, PUBLISH_LEAD, ToolKeys};
use crate::config::IdentityToml;

#[derive(Debug, Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    sid: String,
    jti: String,
    iat: i64,
    nbf: i64,
    exp: i64,
}

const AUDIENCE: &str = "agentd-tool:who";

/// `token` verified as a tool would: its `kid` found in `jwks`, EdDSA only,
/// audience and issuer checked.
fn verify(token: &str, jwks: &Jwks) -> Result<Claims, String> {
    let kid = decode_header(token)
        .map_err(|e| e.to_string())?
        .kid
        .unwrap();
    let jwk = jwks
        .keys
        .iter()
        .find(|k| k.kid == kid)
        .ok_or("unknown key")?;
    let key = DecodingKey::from_ed_components(&jwk.x).unwrap();
    let mut validation = Validation::new(jsonwebtoken::Algorithm::EdDSA);
    validation.set_audience(&[AUDIENCE]);
    validation.set_issuer(&["agentd"]);
    decode::<Claims>(token, &key, &validation)
        .map(|data| data.claims)
        .map_err(|e| e.to_string())
}

async fn store() -> SqliteStore {
    SqliteStore::open_url("sqlite::memory:").await.unwrap()
}

#[tokio::test]
async fn a_token_verifies_against_the_published_key_with_its_claims() {
    let store = store().await;
    let config = IdentityToml::default();
    assert!(ToolKeys::stored_jwks(&store).await.unwrap().keys.is_empty());
    let keys = ToolKeys::default();
    let (token, expires) = keys
        .mint(&store, &config, "alice", "s1", AUDIENCE)
        .await
        .unwrap();
    let jwks = ToolKeys::stored_jwks(&store).await.unwrap();
    assert_eq!(jwks.keys.len(), 1);
    let claims = verify(&token, &jwks).unwrap();
    assert_eq!(
        (
            claims.iss.as_str(),
            claims.sub.as_str(),
            claims.sid.as_str()
        ),
        ("agentd", "alice", "s1")
    );
    assert_eq!(claims.exp - claims.iat, 3600);
    assert_eq!(claims.nbf, claims.iat);
    assert_eq!(claims.exp, expires.timestamp());
    // Each token its own id; another audience is refused.
    let (again, _) = keys
        .mint(&store, &config, "alice", "s1", AUDIENCE)
        .await
        .unwrap();
    assert_ne!(verify(&again, &jwks).unwrap().jti, claims.jti);
    let (elsewhere, _) = keys
        .mint(&store, &config, "alice", "s1", "agentd-tool:other")
        .await
        .unwrap();
    assert!(
        verify(&elsewhere, &jwks)
            .unwrap_err()
            .contains("InvalidAudience")
    );

    // Another node (its own cache) signs with the same stored key.
    let (other, _) = ToolKeys::default()
        .mint(&store, &config, "bob", "s2", AUDIENCE)
        .await
        .unwrap();
    assert_eq!(verify(&other, &jwks).unwrap().sub, "bob");
    assert_eq!(store.signing_keys().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_token_of_another_key_or_expired_is_refused() {
    let store = store().await;
    let config = IdentityToml::default();
    let (token, _) = ToolKeys::default()
        .mint(&store, &config, "alice", "s1", AUDIENCE)
        .await
        .unwrap();
    // A key set of another server (its own store) does not verify it, even
    // under the same kid.
    let elsewhere = self::store().await;
    ToolKeys::default()
        .mint(&elsewhere, &config, "alice", "s1", AUDIENCE)
        .await
        .unwrap();
    let mut foreign = ToolKeys::stored_jwks(&elsewhere).await.unwrap();
    assert!(
        verify(&token, &foreign)
            .unwrap_err()
            .contains("unknown key")
    );
    foreign.keys[0].kid = decode_header(&token).unwrap().kid.unwrap();
    let err = verify(&token, &foreign).unwrap_err();
    assert!(err.contains("InvalidSignature"), "{err}");

    // Expired: a TTL of 60 s, checked two minutes on (no leeway).
    let short = IdentityToml {
        token_ttl_s: 60,
        ..IdentityToml::default()
    };
    let (token, _) = ToolKeys::default()
        .mint(&store, &short, "alice", "s1", AUDIENCE)
        .await
        .unwrap();
    let jwks = ToolKeys::stored_jwks(&store).await.unwrap();
    let kid = decode_header(&token).unwrap().kid.unwrap();
    let jwk = jwks.keys.iter().find(|k| k.kid == kid).unwrap();
    let key = DecodingKey::from_ed_components(&jwk.x).unwrap();
    let mut validation = Validation::new(jsonwebtoken::Algorithm::EdDSA);
    validation.set_audience(&[AUDIENCE]);
    validation.leeway = 0;
    validation.reject_tokens_expiring_in_less_than = 120;
    let err = decode::<Claims>(&token, &key, &validation).unwrap_err();
    assert_eq!(
        err.kind(),
        &jsonwebtoken::errors::ErrorKind::ExpiredSignature
    );
    // And the wrong audience.
    let mut validation = Validation::new(jsonwebtoken::Algorithm::EdDSA);
    validation.set_audience(&["something-else"]);
    assert!(decode::<Claims>(&token, &key, &validation).is_err());
}

/// A stored key made `age` ago.
async fn key_aged(store: &SqliteStore, kid: &str, age: Duration) -> SigningKeyRecord {
    let elsewhere = self::store().await;
    ToolKeys::default()
        .mint(&elsewhere, &IdentityToml::default(), "x", "s", AUDIENCE)
        .await
        .unwrap();
    let mut key = elsewhere.signing_keys().await.unwrap().remove(0);
    key.kid = kid.into();
    key.created_at = chrono::SubsecRound::trunc_subsecs(Utc::now() - age, 3);
    assert!(
        store
            .add_signing_key(&key, Utc::now() + Duration::days(1))
            .await
            .unwrap()
    );
    key
}

#[tokio::test]
async fn a_key_is_published_before_it_signs_and_kept_until_its_tokens_expire() {
    let store = store().await;
    let config = IdentityToml::default();
    // The current key, nearly 30 days old; one retired long ago.
    let old = key_aged(&store, "old", Duration::days(30) - Duration::minutes(5)).await;
    key_aged(&store, "ancient", Duration::days(90)).await;
    let old_token = {
        let mut key = old.clone();
        key.created_at = Utc::now();
        let token_store = self::store().await;
        token_store.add_signing_key(&key, Utc::now()).await.unwrap();
        ToolKeys::default()
            .mint(&token_store, &config, "alice", "s1", AUDIENCE)
            .await
            .unwrap()
            .0
    };

    // Within the lead of rotation: a new key is stored and published, but
    // the old one still signs (a tool's cached key set may not know it).
    let (token, _) = ToolKeys::default()
        .mint(&store, &config, "bob", "s2", AUDIENCE)
        .await
        .unwrap();
    assert_eq!(decode_header(&token).unwrap().kid.unwrap(), "old");
    let jwks = ToolKeys::stored_jwks(&store).await.unwrap();
    let kids: Vec<&str> = jwks.keys.iter().map(|k| k.kid.as_str()).collect();
    assert_eq!(kids.len(), 2, "{kids:?}");
    assert_eq!(kids[1], "old");
    let new_kid = kids[0].to_string();
    assert_eq!(verify(&token, &jwks).unwrap().sub, "bob");
    assert_eq!(verify(&old_token, &jwks).unwrap().sub, "alice");

    // Once published for the lead, the new key signs; the old one stays.
    let store2 = self::store().await;
    for key in store.signing_keys().await.unwrap() {
        let mut key = key;
        if key.kid == new_kid {
            key.created_at -= PUBLISH_LEAD + Duration::seconds(1);
        }
        store2
            .add_signing_key(&key, Utc::now() + Duration::days(1))
            .await
            .unwrap();
    }
    let (token, _) = ToolKeys::default()
        .mint(&store2, &config, "bob", "s2", AUDIENCE)
        .await
        .unwrap();
    assert_eq!(decode_header(&token).unwrap().kid.unwrap(), new_kid);
    assert_eq!(store2.signing_keys().await.unwrap().len(), 2);
}

/// The stored keys' ids, newest first, after a fresh node minted a token.
async fn kids_after_a_mint(store: &SqliteStore, config: &IdentityToml) -> Vec<String> {
    ToolKeys::default()
        .mint(store, config, "alice", "s1", AUDIENCE)
        .await
        .unwrap();
    let keys = store.signing_keys().await.unwrap();
    keys.into_iter().map(|k| k.kid).collect()
}

#[tokio::test]
async fn a_key_goes_by_when_it_stopped_signing_not_by_its_age() {
    let store = store().await;
    // A lowered `key_rotation_days` (or a node with another setting): the
    // only key is older than a rotation plus a token's life, yet it signed
    // until now. Rotating must not delete it with the tokens it signed.
    let live = key_aged(&store, "live", Duration::days(10)).await;
    let config = IdentityToml {
        key_rotation_days: 1,
        ..IdentityToml::default()
    };
    let kids = kids_after_a_mint(&store, &config).await;
    assert!(kids.contains(&live.kid), "{kids:?}");
    assert_eq!(kids.len(), 2);

    // Its successor long in use: now it goes (and a key before it).
    let store = self::store().await;
    key_aged(&store, "before", Duration::days(20)).await;
    key_aged(&store, "retired", Duration::days(10)).await;
    key_aged(&store, "successor", Duration::hours(3)).await;
    let kids = kids_after_a_mint(&store, &IdentityToml::default()).await;
    assert_eq!(kids, ["successor"]);
}

#[test]
fn identity_config_bounds_are_checked() {
    for (text, err) in [
        ("[identity]\ntoken_ttl_s = 5\n", "token_ttl_s"),
        ("[identity]\nkey_rotation_days = 0\n", "key_rotation_days"),
        ("[identity]\nissuer = \" \"\n", "issuer"),
        (
            "[[mcp_servers]]\nname = \"x\"\ncommand = \"x\"\nenv = { T = \"{user_tokn}\" }\n",
            "unknown placeholder {user_tokn}",
        ),
        (
            "[[mcp_servers]]\nname = \"x\"\nurl = \"http://x\"\nheaders = { A = \"{sesion}\" }\n",
            "headers \"A\"",
        ),
        (
            "[[mcp_servers]]\nname = \"x\"\nurl = \"http://x/{user}\"\n",
            "filled in `env` and `headers` only",
        ),
        (
            "[[mcp_servers]]\nname = \"x\"\ncommand = \"x\"\nargs = [\"--as={user}\"]\n",
            "filled in `env` and `headers` only",
        ),
        (
            "[[commands]]\nname = \"c\"\ndescription = \"d\"\nargv = [\"true\"]\nenv = { T = \"{User_token}\" }\n",
            "command \"c\": env \"T\": unknown placeholder {User_token}",
        ),
        (
            "[[mcp_servers]]\nname = \"x\"\ncommand = \"x\"\naudience = \" \"\n",
            "audience",
        ),
    ] {
        let got = crate::config::Config::parse(text).unwrap_err();
        assert!(got.contains(err), "{text}: {got}");
    }
    let config = crate::config::Config::parse(
        "[identity]\nissuer = \"https://agentd.example\"\ntoken_ttl_s = 600\n\
         [[mcp_servers]]\nname = \"x\"\ncommand = \"x\"\n\
         env = { LOGURU_FORMAT = \"{time} {level} {message}\", T = \"{user_token}\" }\n",
    )
    .unwrap();
    // Other words in braces (a log format) are left alone.
    let server = &config.mcp_servers[0];
    assert_eq!(server.audience(), "agentd-tool:x");
    assert_eq!(
        super::render_text(&server.env["LOGURU_FORMAT"]),
        "{time} {level} {message}"
    );
    assert_eq!(config.identity.token_ttl_s, 600);
    assert_eq!(config.identity.key_rotation_days, 30);
}

#[test]
fn escapes_are_rendered_and_user_names_percent_encoded_in_headers() {
    use agentd_tools::mcp::{McpServerConfig, McpTransport};
    // A server without placeholders (a shared one) gets its escapes rendered too.
    let shared = McpServerConfig::new(
        "x",
        McpTransport::Http {
            url: "http://x".into(),
            headers: [("A".to_string(), "{{user}} {x}".to_string())].into(),
        },
    );
    assert!(!super::server_has_placeholder(&shared));
    let McpTransport::Http { headers, .. } = super::render_server(shared).transport else {
        unreachable!()
    };
    assert_eq!(headers["A"], "{user} {x}");
    assert_eq!(
        super::percent_encode_non_ascii("zoë 100%"),
        "zo%C3%AB 100%25"
    );
}
