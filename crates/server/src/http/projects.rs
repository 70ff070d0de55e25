//! `GET /v1/projects`: the configured projects a user may open a session on.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::auth::User;
use super::error::{ApiResult, ErrorBody};

#[derive(Debug, Serialize, ToSchema)]
pub struct ProjectList {
    pub projects: Vec<ProjectInfo>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ProjectInfo {
    /// What `POST /v1/sessions {"project": …}` names.
    pub name: String,
    /// The profile its sessions run on; the caller's choice when absent.
    pub profile: Option<String>,
    /// A user has at most one session on it.
    pub single_session: bool,
    /// The first message of its sessions.
    pub greeting: Option<String>,
}

/// Projects whose profile the caller may use (a project without one: all).
#[utoipa::path(get, path = "/v1/projects", tag = "server",
    responses((status = 200, body = ProjectList), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn projects(State(state): State<AppState>, user: User) -> ApiResult<Json<ProjectList>> {
    let runtime = state.registry.runtime();
    let usable = runtime.access().usable(&user.name, user.is_admin).await?;
    let config = &runtime.config;
    let projects = config
        .projects
        .iter()
        .filter(|p| {
            p.profile
                .as_ref()
                .is_none_or(|name| usable.profile(config, name))
        })
        .map(|p| ProjectInfo {
            name: p.name.clone(),
            profile: p.profile.clone(),
            single_session: p.single_session,
            greeting: p.greeting.clone(),
        })
        .collect();
    Ok(Json(ProjectList { projects }))
}
