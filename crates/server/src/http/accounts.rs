//! Which agentd user an identity-provider account signs in as (OIDC and
//! JWT). The account is its `(issuer, sub)` pair, stored when the user is
//! made (or linked): later sign-ins find the user by that pair, never by
//! the name claim, which people can often change at the provider. A name
//! claim that names an existing agentd user not linked to this account is
//! refused unless the operator opts in (`link_existing_users = true`): else
//! anyone at the provider could take over `root` or an `[access] admins`
//! name. `local` (the owner of `agentd run`) is never a provider's.

use std::time::Duration;

use agentd_store::{IdentityRecord, StoreError, UserRecord};
use serde_json::{Map, Value};

use super::AppState;
use super::auth::{LOCAL_USER, configured_admin, valid_user_name};
use super::error::ApiError;

/// The audit log's actor for users the providers make.
const ACTOR: &str = "oidc";
/// A concurrent first sign-in of the same account may be between making
/// the user and linking it: how often and how long to look again.
const RACE_RETRIES: u32 = 5;
const RACE_WAIT: Duration = Duration::from_millis(50);

/// The operator's rules for accounts not linked yet.
#[derive(Debug, Clone, Copy)]
pub struct AccountRules {
    pub link_existing_users: bool,
    pub create_users: bool,
}

/// A provider account as its verified claims name it.
#[derive(Debug, Clone)]
pub struct Account {
    pub issuer: String,
    pub subject: String,
    /// The user name asked for on first sign-in (the `user_claim`).
    pub name: String,
}

impl Account {
    /// The account of verified `claims`: `sub`, and the user claim as a
    /// name. An `email` claim only counts when `email_verified` is `true`.
    pub fn from_claims(
        issuer: &str,
        claims: &Map<String, Value>,
        user_claim: &str,
    ) -> Result<Self, String> {
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|sub| !sub.is_empty() && sub.len() <= 255)
            .ok_or("the token has no sub claim")?;
        if user_claim == "email" && !email_verified(claims) {
            return Err("the email claim is not verified (email_verified is not true)".into());
        }
        let name = claims
            .get(user_claim)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("the token has no {user_claim:?} claim"))?;
        Ok(Account {
            issuer: issuer.trim_end_matches('/').to_string(),
            subject: subject.to_string(),
            name: name.to_string(),
        })
    }
}

pub(super) fn email_verified(claims: &Map<String, Value>) -> bool {
    claims.get("email_verified") == Some(&Value::Bool(true))
}

/// The user `account` signs in as: the one linked to it, else (by the
/// rules) an existing user of its name linked now, or a new user.
pub(super) async fn account_user(
    state: &AppState,
    rules: AccountRules,
    account: &Account,
) -> Result<UserRecord, ApiError> {
    let store = state.registry.runtime().store.clone();
    if let Some(linked) = store
        .user_by_identity(&account.issuer, &account.subject)
        .await?
    {
        return usable(linked.user);
    }
    let name = account.name.as_str();
    check_new_name(name)?;
    if let Some(existing) = store.get_user_by_name(name).await? {
        return link_existing(state, rules, account, existing).await;
    }
    if configured_admin(state, name) && !rules.link_existing_users {
        return Err(refuse_existing(account, "an [access] admins name"));
    }
    if !rules.create_users {
        tracing::warn!(issuer = %account.issuer, sub = %account.subject, name,
            "sign-in refused: no user is linked to this account and create_users = false");
        return Err(ApiError::Forbidden(
            "no agentd user is linked to this account, and this server makes none".into(),
        ));
    }
    if let Some(other) = store
        .list_users()
        .await?
        .into_iter()
        .find(|user| user.name.to_lowercase() == name.to_lowercase())
    {
        if other.name == name {
            // Made since the look-up above: by this account's other sign-in?
            return after_race(state, account).await;
        }
        return Err(refuse_existing(
            account,
            &format!("too like the existing user {:?}", other.name),
        ));
    }
    let user = match store.create_user(name).await {
        Ok(user) => user,
        // Another sign-in made it first: the same account's (look again) or
        // another's (refused).
        Err(StoreError::Database(_)) => return after_race(state, account).await,
        Err(err) => return Err(err.into()),
    };
    if let Err(err) = store
        .link_identity(&user.id, &account.issuer, &account.subject)
        .await
    {
        tracing::warn!(%err, "linking a new user to its account");
        return after_race(state, account).await;
    }
    audit(state, "user.create", name, account).await;
    Ok(user)
}

/// Names a provider may ask for: ASCII (no look-alike letters), not `local`.
fn check_new_name(name: &str) -> Result<(), ApiError> {
    if name == LOCAL_USER {
        return Err(ApiError::Forbidden(format!(
            "the user name {LOCAL_USER:?} is reserved"
        )));
    }
    if !valid_user_name(name) || !name.is_ascii() {
        return Err(ApiError::Forbidden(
            "the token's user claim is not a user name (1-64 ASCII letters, digits and \
             . - _ @ +)"
                .into(),
        ));
    }
    Ok(())
}

async fn link_existing(
    state: &AppState,
    rules: AccountRules,
    account: &Account,
    existing: UserRecord,
) -> Result<UserRecord, ApiError> {
    if !rules.link_existing_users {
        // Made a moment ago: maybe by a concurrent first sign-in of this
        // very account, about to link it.
        let age = chrono::Utc::now() - existing.created_at;
        if age.num_seconds() < 5 {
            return after_race(state, account).await;
        }
        return Err(refuse_existing(account, "an existing user"));
    }
    let store = state.registry.runtime().store.clone();
    let linked = store.identities_of(&existing.id).await?;
    if linked.iter().any(|i| i.issuer == account.issuer) {
        return Err(refuse_existing(
            account,
            "linked to another account of this provider",
        ));
    }
    let existing = usable(existing)?;
    store
        .link_identity(&existing.id, &account.issuer, &account.subject)
        .await?;
    audit(state, "user.link", &existing.name, account).await;
    Ok(existing)
}

/// Record in the audit log that `user` was made for, or linked to, `account`.
async fn audit(state: &AppState, action: &str, user: &str, account: &Account) {
    let detail = serde_json::json!({"issuer": account.issuer, "sub": account.subject});
    let runtime = state.registry.runtime();
    runtime
        .access()
        .audit(ACTOR)
        .record(action, Some(user), detail)
        .await;
}

fn refuse_existing(account: &Account, why: &str) -> ApiError {
    tracing::warn!(issuer = %account.issuer, sub = %account.subject, name = %account.name,
        "sign-in refused: the name is {why}, not linked to this account \
         (link_existing_users = true adopts existing users)");
    ApiError::Forbidden(format!(
        "cannot sign in as {:?}: that name is taken here by a user not linked to this \
         account (the server log says more)",
        account.name
    ))
}

/// Look for the account again after a clash with another sign-in.
async fn after_race(state: &AppState, account: &Account) -> Result<UserRecord, ApiError> {
    let store = state.registry.runtime().store.clone();
    for _ in 0..RACE_RETRIES {
        let found: Option<IdentityRecord> = store
            .user_by_identity(&account.issuer, &account.subject)
            .await?;
        if let Some(found) = found {
            return usable(found.user);
        }
        tokio::time::sleep(RACE_WAIT).await;
    }
    Err(refuse_existing(account, "made by another sign-in"))
}

fn usable(user: UserRecord) -> Result<UserRecord, ApiError> {
    if user.disabled_at.is_some() {
        return Err(ApiError::Forbidden(format!(
            "the user {:?} is disabled",
            user.name
        )));
    }
    Ok(user)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn claims(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn an_email_names_a_user_only_when_verified() {
        let email = |verified: Value| {
            claims(json!({"sub": "s", "email": "a@x.example", "email_verified": verified}))
        };
        let ok = Account::from_claims("https://idp/", &email(json!(true)), "email").unwrap();
        assert_eq!(
            (ok.issuer.as_str(), ok.name.as_str()),
            ("https://idp", "a@x.example")
        );
        for bad in [json!(false), json!("true"), Value::Null] {
            assert!(Account::from_claims("https://idp", &email(bad), "email").is_err());
        }
        let no_sub = claims(json!({"preferred_username": "a"}));
        assert!(Account::from_claims("https://idp", &no_sub, "preferred_username").is_err());
    }

    #[test]
    fn local_and_look_alike_names_are_not_a_providers() {
        assert!(check_new_name("local").is_err());
        assert!(check_new_name("аlice").is_err(), "a Cyrillic a");
        assert!(check_new_name("a b").is_err());
        assert!(check_new_name("alice@example.com").is_ok());
    }
}
