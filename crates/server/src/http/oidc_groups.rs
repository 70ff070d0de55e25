//! Who may sign in by the provider (`allowed_groups`, `allowed_domains`),
//! and what `[server.oidc.groups]` give, synced at every sign-in: what the
//! groups gave before and no longer give is taken back (offboarding), what
//! an admin granted by hand is left alone. The store remembers what the
//! groups gave per account (`IdentityStore::set_group_given`).

use std::collections::BTreeSet;

use agentd_store::{GrantKind, GroupGiven, GroupGrant, UserRecord};

use super::AppState;
use super::error::{ApiError, ApiResult};
use super::oidc::Identity;
use crate::access::AdminError;
use crate::config::OidcToml;

/// The audit log's actor for what a sign-in's groups grant.
const ACTOR: &str = "oidc";

/// Refuse a sign-in the operator's allow-lists leave out.
pub(super) fn check_allowed(config: &OidcToml, identity: &Identity) -> ApiResult<()> {
    if !config.allowed_groups.is_empty()
        && !identity
            .groups
            .iter()
            .any(|group| config.allowed_groups.contains(group))
    {
        tracing::warn!(sub = %identity.account.subject, "sign-in refused: in no allowed group");
        return Err(ApiError::Forbidden(
            "this account is in none of the groups allowed to sign in here".into(),
        ));
    }
    if !config.allowed_domains.is_empty() {
        let domain = identity
            .verified_email
            .as_deref()
            .and_then(|email| email.rsplit_once('@'))
            .map(|(_, domain)| domain.to_ascii_lowercase());
        let allowed = domain.is_some_and(|domain| {
            config
                .allowed_domains
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(&domain))
        });
        if !allowed {
            tracing::warn!(sub = %identity.account.subject, "sign-in refused: email domain");
            return Err(ApiError::Forbidden(
                "this account has no verified email of a domain allowed to sign in here".into(),
            ));
        }
    }
    Ok(())
}

/// What the groups of `identity` give now.
fn wanted(config: &OidcToml, identity: &Identity) -> GroupGiven {
    let mut admin = false;
    let mut grants = BTreeSet::new();
    for grants_of in identity.groups.iter().filter_map(|g| config.groups.get(g)) {
        admin |= grants_of.admin;
        let kinds = [
            (GrantKind::Profile, &grants_of.profiles),
            (GrantKind::Model, &grants_of.models),
        ];
        for (kind, names) in kinds {
            for name in names {
                grants.insert(GroupGrant {
                    kind,
                    name: name.clone(),
                });
            }
        }
    }
    GroupGiven {
        admin,
        grants: grants.into_iter().collect(),
    }
}

/// Apply the groups of this sign-in to `user`: take back what they gave
/// before and no longer give, give what they give now, and remember what
/// was given by them (not what the user had already).
pub(super) async fn sync_groups(
    state: &AppState,
    config: &OidcToml,
    identity: &Identity,
    user: &UserRecord,
) -> ApiResult<()> {
    let runtime = state.registry.runtime();
    let access = runtime.access();
    let store = access.store;
    let account = &identity.account;
    let before = store
        .user_by_identity(&account.issuer, &account.subject)
        .await?
        .map(|linked| linked.group_given)
        .unwrap_or_default();
    let want = wanted(config, identity);
    let name = &user.name;
    let mut given = GroupGiven::default();
    if before.admin && !want.admin {
        access
            .set_user_flags(ACTOR, name, Some(false), None)
            .await
            .map_err(admin_error)?;
    }
    if want.admin {
        if !user.is_admin {
            access
                .set_user_flags(ACTOR, name, Some(true), None)
                .await
                .map_err(admin_error)?;
        }
        given.admin = before.admin || !user.is_admin;
    }
    for old in before.grants.iter().filter(|g| !want.grants.contains(g)) {
        access
            .set_grant(ACTOR, name, old.kind, &old.name, false)
            .await
            .map_err(admin_error)?;
    }
    for grant in want.grants {
        let added = access
            .set_grant(ACTOR, name, grant.kind, &grant.name, true)
            .await
            .map_err(admin_error)?;
        if added || before.grants.contains(&grant) {
            given.grants.push(grant);
        }
    }
    store
        .set_group_given(&account.issuer, &account.subject, &given)
        .await?;
    Ok(())
}

fn admin_error(err: AdminError) -> ApiError {
    tracing::warn!(%err, "applying [server.oidc.groups]");
    ApiError::Internal("applying [server.oidc.groups] failed (see the server log)".into())
}
