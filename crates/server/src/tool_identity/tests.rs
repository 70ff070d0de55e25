//! Tokens for tools: minted, verified against the published keys, rotated.
#![allow(clippy::unwrap_used)]

use agentd_store::SigningKeyRecord;
use agentd_store::prelude::*;
use agentd_store::sqlite::SqliteStore;
use chrono::{Duration, Utc};
use jsonwebtoken::{DecodingKey, Validation, decode, decode_header};
use serde::Deserialize;

use super::keys::{AUDIENCE, Jwks, ToolKeys};
use crate::config::IdentityToml;

#[derive(Debug, Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    sid: String,
    iat: i64,
    exp: i64,
}

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
    assert!(ToolKeys::jwks(&store).await.unwrap().keys.is_empty());
    let keys = ToolKeys::default();
    let (token, expires) = keys.mint(&store, &config, "alice", "s1").await.unwrap();
    let jwks = ToolKeys::jwks(&store).await.unwrap();
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
    assert_eq!(claims.exp, expires.timestamp());

    // Another node (its own cache) signs with the same stored key.
    let (other, _) = ToolKeys::default()
        .mint(&store, &config, "bob", "s2")
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
        .mint(&store, &config, "alice", "s1")
        .await
        .unwrap();
    // A key set of another server (its own store) does not verify it, even
    // under the same kid.
    let elsewhere = self::store().await;
    ToolKeys::default()
        .mint(&elsewhere, &config, "alice", "s1")
        .await
        .unwrap();
    let mut foreign = ToolKeys::jwks(&elsewhere).await.unwrap();
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
        .mint(&store, &short, "alice", "s1")
        .await
        .unwrap();
    let jwks = ToolKeys::jwks(&store).await.unwrap();
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

#[tokio::test]
async fn an_old_key_is_rotated_and_stays_published_until_its_tokens_expire() {
    let store = store().await;
    let config = IdentityToml::default();
    let keys = ToolKeys::default();
    keys.mint(&store, &config, "alice", "s1").await.unwrap();
    // Make the key just past its 30 days, as if it had signed until now.
    let mut old = store.signing_keys().await.unwrap().remove(0);
    let old_token = keys.mint(&store, &config, "alice", "s1").await.unwrap().0;
    store
        .delete_signing_keys_before(Utc::now() + Duration::days(1))
        .await
        .unwrap();
    old.created_at = Utc::now() - Duration::days(30) - Duration::minutes(10);
    let later = Utc::now() + Duration::days(1);
    assert!(store.add_signing_key(&old, later).await.unwrap());
    // A key long retired (its tokens all expired) goes at the rotation.
    let ancient = SigningKeyRecord {
        kid: "ancient".into(),
        created_at: Utc::now() - Duration::days(90),
        ..old.clone()
    };
    assert!(store.add_signing_key(&ancient, later).await.unwrap());

    // A fresh node (nothing cached) rotates.
    let (token, _) = ToolKeys::default()
        .mint(&store, &config, "bob", "s2")
        .await
        .unwrap();
    let new_kid = decode_header(&token).unwrap().kid.unwrap();
    assert_ne!(new_kid, old.kid);
    let jwks = ToolKeys::jwks(&store).await.unwrap();
    let kids: Vec<&str> = jwks.keys.iter().map(|k| k.kid.as_str()).collect();
    assert_eq!(kids, [new_kid.as_str(), old.kid.as_str()]);
    assert_eq!(verify(&token, &jwks).unwrap().sub, "bob");
    assert_eq!(verify(&old_token, &jwks).unwrap().sub, "alice");
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
    ] {
        let got = crate::config::Config::parse(text).unwrap_err();
        assert!(got.contains(err), "{text}: {got}");
    }
    let config = crate::config::Config::parse(
        "[identity]\nissuer = \"https://agentd.example\"\ntoken_ttl_s = 600\n",
    )
    .unwrap();
    assert_eq!(config.identity.token_ttl_s, 600);
    assert_eq!(config.identity.key_rotation_days, 30);
}
