//! Which profiles and models a user may choose: an admin any; everyone
//! those of `[access]` (by default every model and every profile that is not
//! admin-only) plus their own grants. Checked on session create, fork, and
//! every turn, so taking a grant back stops the next turn.

use std::collections::BTreeSet;

use agentd_store::{GrantKind, StoreError};

use super::Access;
use crate::config::Config;

/// What one user may choose.
#[derive(Debug, Clone, Default)]
pub struct Usable {
    admin: bool,
    profiles: BTreeSet<String>,
    models: BTreeSet<String>,
}

impl Usable {
    pub fn everything() -> Self {
        Usable {
            admin: true,
            ..Default::default()
        }
    }

    /// Whether the profile `name` is this user's to choose.
    pub fn profile(&self, config: &Config, name: &str) -> bool {
        if self.admin || self.profiles.contains(name) {
            return true;
        }
        match &config.access.profiles {
            Some(names) => names.iter().any(|n| n == name),
            None => config.profile(name).is_ok_and(|p| !p.admin_only()),
        }
    }

    /// Whether the model `spec` (a name of `GET /v1/models`) is this user's.
    pub fn model(&self, config: &Config, spec: &str) -> bool {
        if self.admin || self.models.contains(spec) {
            return true;
        }
        match &config.access.models {
            Some(names) => names.iter().any(|n| n == spec),
            None => true,
        }
    }

    /// Why `profile` and `model` are not both usable, if they are not.
    pub fn refusal(&self, config: &Config, profile: &str, model: &str) -> Option<String> {
        if !self.profile(config, profile) {
            let why = if config.profile(profile).is_ok_and(|p| p.admin_only()) {
                " (it bypasses permissions or the sandbox: admin-only unless granted by name)"
            } else {
                ""
            };
            return Some(format!(
                "you may not use the profile {profile:?}{why}; ask an admin for a grant"
            ));
        }
        self.model_refusal(config, model)
    }

    /// Why `model` is not usable, if it is not.
    pub fn model_refusal(&self, config: &Config, model: &str) -> Option<String> {
        (!self.model(config, model))
            .then(|| format!("you may not use the model {model:?}; ask an admin for a grant"))
    }
}

impl Access<'_> {
    /// What `user` may choose now (their grants are read each time).
    pub async fn usable(&self, user: &str, is_admin: bool) -> Result<Usable, StoreError> {
        if is_admin {
            return Ok(Usable::everything());
        }
        let mut usable = Usable::default();
        for grant in self.store.grants(Some(user)).await? {
            match grant.kind {
                GrantKind::Profile => usable.profiles.insert(grant.name),
                GrantKind::Model => usable.models.insert(grant.name),
            };
        }
        Ok(usable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(text).unwrap()
    }

    #[test]
    fn admin_only_profiles_need_a_grant_by_name() {
        let config = config(
            "[profiles.yolo]\nmode = \"bypass\"\n\
             [profiles.bare]\nsandbox = \"off\"\n\
             [profiles.safe]\nmode = \"accept_edits\"\n",
        );
        let user = Usable::default();
        assert!(user.profile(&config, "default"));
        assert!(user.profile(&config, "safe"));
        assert!(!user.profile(&config, "yolo"));
        assert!(!user.profile(&config, "bare"));
        assert!(!user.profile(&config, "missing"));
        let refusal = user.refusal(&config, "yolo", "demo").unwrap();
        assert!(refusal.contains("admin-only"), "{refusal}");
        let granted = Usable {
            profiles: ["yolo".to_string()].into(),
            ..Default::default()
        };
        assert!(granted.profile(&config, "yolo"));
        assert!(!granted.profile(&config, "bare"));
        assert!(Usable::everything().profile(&config, "bare"));
    }

    #[test]
    fn access_lists_narrow_the_defaults_and_grants_widen_them() {
        let config = config(
            "[access]\nprofiles = [\"default\"]\nmodels = [\"cheap\"]\n\
             [profiles.safe]\n\
             [models.cheap]\nprovider = \"scripted\"\n\
             [models.dear]\nprovider = \"scripted\"\n",
        );
        let user = Usable::default();
        assert!(user.profile(&config, "default"));
        assert!(!user.profile(&config, "safe"));
        assert!(user.model(&config, "cheap"));
        assert!(!user.model(&config, "dear"));
        assert!(user.refusal(&config, "default", "dear").is_some());
        let granted = Usable {
            models: ["dear".to_string()].into(),
            ..Default::default()
        };
        assert!(granted.refusal(&config, "default", "dear").is_none());
    }
}
