//! Session modes (agentd's permission modes, under Claude Code's ids) and
//! the model selector (a `model` session config option).
//!
//! agentd's store keeps no per-session mode: the mode is the editor's
//! selection, sent with each prompt as the message's `permission_mode`,
//! which agentd refuses when it is looser than the profile's. This process
//! remembers the selection while the editor is connected; a new `agentd
//! acp` process starts again from the profile's mode. The model is the
//! session's own (`PATCH /v1/sessions/{id}`), kept in agentd's store.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CurrentModeUpdate, SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption,
    SessionId, SessionMode, SessionModeState, SessionNotification, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionModeRequest,
};
use agentd_policy::permissions::PermissionMode;
use serde_json::{Value, json};

use super::{Acp, api_error, invalid};

/// The model selector's config option id.
const MODEL_OPTION: &str = "model";

/// Every mode, loosest first, with its name and what it does; its id is
/// Claude Code's spelling (`PermissionMode::claude_name`), which editors know.
const MODES: [(PermissionMode, &str, &str); 5] = [
    (
        PermissionMode::Bypass,
        "Bypass Permissions",
        "Every tool runs unless a deny rule matches",
    ),
    (
        PermissionMode::AcceptEdits,
        "Accept Edits",
        "File edits run unasked; commands ask",
    ),
    (
        PermissionMode::Default,
        "Default",
        "Reads run; edits and commands ask",
    ),
    (
        PermissionMode::DontAsk,
        "Don't Ask",
        "Only what the profile's rules allow runs; nothing asks",
    ),
    (
        PermissionMode::ReadOnly,
        "Plan (read only)",
        "Only reading tools run; edits and commands are refused",
    ),
];

/// A mode's id as the editor sees it.
fn mode_id(mode: PermissionMode) -> &'static str {
    mode.claude_name()
}

/// The profile's mode and every stricter one, `current` selected.
fn mode_state(profile: PermissionMode, current: PermissionMode) -> SessionModeState {
    let modes = MODES
        .iter()
        .filter(|(mode, ..)| !mode.is_looser_than(profile))
        .map(|(mode, name, about)| SessionMode::new(mode_id(*mode), *name).description(*about))
        .collect();
    SessionModeState::new(mode_id(current), modes)
}

/// What the editor can choose for one session.
pub struct Choices {
    pub modes: Option<SessionModeState>,
    pub options: Vec<SessionConfigOption>,
}

impl Acp {
    /// The session's modes and models, as `session/new` and `session/load`
    /// answer them.
    pub async fn choices(&self, session: &str) -> Result<Choices, agent_client_protocol::Error> {
        let view = self.api.session(session).await.map_err(api_error)?;
        let modes = self.profile_mode(&view).await?.map(|profile| {
            let current = self.selected_mode(session).unwrap_or(profile);
            mode_state(profile, current)
        });
        let options = vec![self.model_option(&view).await?];
        Ok(Choices { modes, options })
    }

    /// The mode of the session's profile (as `GET /v1/profiles` says);
    /// `None` when the profile is not listed for this user.
    async fn profile_mode(
        &self,
        view: &Value,
    ) -> Result<Option<PermissionMode>, agent_client_protocol::Error> {
        let profiles = self.api.get("/v1/profiles").await.map_err(api_error)?;
        Ok(profiles["profiles"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|profile| profile["name"] == view["profile"])
            .and_then(|profile| PermissionMode::parse(profile["permission_mode"].as_str()?)))
    }

    /// The models this user may choose (`GET /v1/models`), the session's
    /// own selected.
    async fn model_option(
        &self,
        view: &Value,
    ) -> Result<SessionConfigOption, agent_client_protocol::Error> {
        let listed = self.api.get("/v1/models").await.map_err(api_error)?;
        let current = view["model"].as_str().unwrap_or_default().to_string();
        let mut choices: Vec<SessionConfigSelectOption> = listed["models"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|model| {
                let id = model["id"].as_str()?;
                let name = model["model"].as_str().unwrap_or(id);
                Some(
                    SessionConfigSelectOption::new(id.to_string(), id.to_string())
                        .description(name.to_string()),
                )
            })
            .collect();
        // A session may run on a model spelled otherwise than the list's.
        if !choices.iter().any(|choice| *choice.value.0 == *current) {
            choices.insert(
                0,
                SessionConfigSelectOption::new(current.clone(), current.clone()),
            );
        }
        Ok(
            SessionConfigOption::select(MODEL_OPTION, "Model", current, choices)
                .category(SessionConfigOptionCategory::Model),
        )
    }

    /// The mode the editor chose for `session` in this connection.
    pub fn selected_mode(&self, session: &str) -> Option<PermissionMode> {
        let selected = self.modes.lock().ok()?;
        selected.get(session).copied()
    }

    /// `session/set_mode`: checked against the profile's mode now (agentd
    /// checks it again with every prompt), then announced.
    pub async fn set_mode(
        &self,
        request: &SetSessionModeRequest,
        connection: &ConnectionTo<Client>,
    ) -> Result<(), agent_client_protocol::Error> {
        let session = request.session_id.0.to_string();
        let asked = &*request.mode_id.0;
        let mode = PermissionMode::parse(asked).ok_or_else(|| {
            let ids: Vec<&str> = MODES.iter().map(|(mode, ..)| mode_id(*mode)).collect();
            invalid(format!("unknown mode {asked:?}: one of {}", ids.join(", ")))
        })?;
        let view = self.api.session(&session).await.map_err(api_error)?;
        let Some(profile) = self.profile_mode(&view).await? else {
            return Err(invalid(format!(
                "the session's profile {} is not available to you",
                view["profile"]
            )));
        };
        if mode.is_looser_than(profile) {
            return Err(invalid(format!(
                "mode {asked:?} is looser than the session profile's ({}): \
                 choose it or a stricter one",
                mode_id(profile)
            )));
        }
        if let Ok(mut selected) = self.modes.lock() {
            selected.insert(session, mode);
        }
        let update = SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode_id(mode)));
        notify(connection, &request.session_id, update)
    }

    /// `session/set_config_option`: the model, changed in agentd's store
    /// for the session's next turns; the options as they are now.
    pub async fn set_option(
        &self,
        request: &SetSessionConfigOptionRequest,
    ) -> Result<Vec<SessionConfigOption>, agent_client_protocol::Error> {
        let session = request.session_id.0.to_string();
        if *request.config_id.0 != *MODEL_OPTION {
            return Err(invalid(format!(
                "unknown config option {:?}: agentd has {MODEL_OPTION:?}",
                request.config_id.0
            )));
        }
        let Some(model) = request.value.as_value_id() else {
            return Err(invalid("the model is one of the option's values".into()));
        };
        let path = format!("/v1/sessions/{session}");
        let body = json!({"model": &*model.0});
        self.api.patch(&path, body).await.map_err(api_error)?;
        Ok(self.choices(&session).await?.options)
    }
}

fn notify(
    connection: &ConnectionTo<Client>,
    session: &SessionId,
    update: SessionUpdate,
) -> Result<(), agent_client_protocol::Error> {
    connection.send_notification(SessionNotification::new(session.clone(), update))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_offers_its_mode_and_every_stricter_one() {
        let ids = |profile| -> Vec<String> {
            let state = mode_state(profile, profile);
            let ids = state.available_modes.iter().map(|m| m.id.0.to_string());
            ids.collect()
        };
        assert_eq!(ids(PermissionMode::Default), ["default", "dontAsk", "plan"]);
        assert_eq!(ids(PermissionMode::Bypass).len(), 5);
        // The two strictest do not stand in for each other.
        assert_eq!(ids(PermissionMode::ReadOnly), ["plan"]);
        assert_eq!(ids(PermissionMode::DontAsk), ["dontAsk"]);
        for (mode, ..) in MODES {
            let id = mode_id(mode);
            assert_eq!(PermissionMode::parse(id), Some(mode), "{id}");
        }
    }
}
