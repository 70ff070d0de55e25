//! What admins change — users' flags and grants — the same from the API and
//! the command line, each change in the audit log; and the view of a user
//! both show.

use agentd_store::{GrantKind, StoreError, UserRecord};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use super::Access;
use super::{Audit, UsageReport};

/// Longest model name a grant may name.
const MAX_GRANT_CHARS: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A user as admins see them.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UserView {
    pub name: String,
    /// An admin by the database or by `[access] admins`.
    pub is_admin: bool,
    pub disabled: bool,
    /// When the user got a row (`null` for a proxy's user without one).
    pub created_at: Option<DateTime<Utc>>,
    pub grants: Grants,
    pub usage: UsageReport,
}

/// Profiles and models granted to one user beyond the defaults.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct Grants {
    pub profiles: Vec<String>,
    pub models: Vec<String>,
}

impl Access<'_> {
    /// How admins see `name` (with or without a row).
    pub async fn user_view(&self, name: &str) -> Result<UserView, StoreError> {
        let row = self.store.get_user_by_name(name).await?;
        self.view_of(name, row.as_ref()).await
    }

    /// Every user with a row or a grant, by name.
    pub async fn user_views(&self) -> Result<Vec<UserView>, StoreError> {
        let rows = self.store.list_users().await?;
        let mut names: Vec<String> = rows.iter().map(|u| u.name.clone()).collect();
        for grant in self.store.grants(None).await? {
            names.push(grant.user_name);
        }
        names.extend(self.config.access.admins.iter().cloned());
        names.sort();
        names.dedup();
        let mut views = Vec::with_capacity(names.len());
        for name in names {
            let row = rows.iter().find(|u| u.name == name);
            views.push(self.view_of(&name, row).await?);
        }
        Ok(views)
    }

    async fn view_of(&self, name: &str, row: Option<&UserRecord>) -> Result<UserView, StoreError> {
        let mut grants = Grants::default();
        for grant in self.store.grants(Some(name)).await? {
            match grant.kind {
                GrantKind::Profile => grants.profiles.push(grant.name),
                GrantKind::Model => grants.models.push(grant.name),
            }
        }
        let configured = self.config.access.admins.iter().any(|a| a == name);
        Ok(UserView {
            name: name.to_string(),
            is_admin: configured || row.is_some_and(|u| u.is_admin),
            disabled: row.is_some_and(|u| u.disabled_at.is_some()),
            created_at: row.map(|u| u.created_at),
            grants,
            usage: self.usage_report(name).await?,
        })
    }

    /// Set `name`'s admin flag and/or disabled state (a row is made for a
    /// user without one), by `actor`.
    pub async fn set_user_flags(
        &self,
        actor: &str,
        name: &str,
        admin: Option<bool>,
        disabled: Option<bool>,
    ) -> Result<UserView, AdminError> {
        if !crate::http::auth::valid_user_name(name) {
            return Err(AdminError::Invalid(format!(
                "invalid user name {name:?}: use 1-64 letters, digits and . - _ @ +"
            )));
        }
        if self.store.get_user_by_name(name).await?.is_none() {
            self.store.create_user(name).await?;
        }
        self.store.set_user_flags(name, admin, disabled).await?;
        let detail = json!({"is_admin": admin, "disabled": disabled});
        Audit::new(self.store, actor)
            .record("user.update", Some(name), detail)
            .await;
        Ok(self.user_view(name).await?)
    }

    /// Grant `user` the profile or model `grant` (or take it back), by
    /// `actor`. `false` when nothing changed.
    pub async fn set_grant(
        &self,
        actor: &str,
        user: &str,
        kind: GrantKind,
        grant: &str,
        granted: bool,
    ) -> Result<bool, AdminError> {
        if !crate::http::auth::valid_user_name(user) {
            return Err(AdminError::Invalid(format!("invalid user name {user:?}")));
        }
        if granted {
            match kind {
                GrantKind::Profile => {
                    self.config
                        .profile(grant)
                        .map_err(|err| AdminError::Invalid(err.to_string()))?;
                }
                GrantKind::Model => {
                    let name = grant.trim();
                    if name.is_empty() || name.chars().count() > MAX_GRANT_CHARS {
                        return Err(AdminError::Invalid(format!(
                            "a model grant names a model of `GET /v1/models` \
                             (1 to {MAX_GRANT_CHARS} characters)"
                        )));
                    }
                }
            }
        }
        if grant.chars().any(char::is_control) {
            return Err(AdminError::Invalid(
                "a grant's name has no control characters".into(),
            ));
        }
        let changed = self.store.set_grant(user, kind, grant, granted).await?;
        if changed {
            let action = if granted { "grant.add" } else { "grant.remove" };
            let detail = json!({"kind": kind.as_str(), "name": grant});
            Audit::new(self.store, actor)
                .record(action, Some(user), detail)
                .await;
        }
        Ok(changed)
    }
}
