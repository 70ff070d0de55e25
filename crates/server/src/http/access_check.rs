//! What handlers ask before they create or start anything: the caller's
//! grants and quotas (see `crate::access`), refusals counted per user; and
//! the audit entries of what they did.

use agentd_store::SessionRecord;
use serde_json::Value;

use super::AppState;
use super::auth::User;
use super::error::{ApiError, ApiResult};
use crate::access::quotas::QuotaCheckError;
use crate::access::{QuotaRefusal, metrics};

fn refused(user: &User, err: QuotaCheckError) -> ApiError {
    match err {
        QuotaCheckError::Store(err) => err.into(),
        QuotaCheckError::Refused(QuotaRefusal::Rate {
            limit,
            message,
            retry_after_s,
        }) => {
            metrics::refused(&user.name, limit);
            ApiError::RateLimited {
                message,
                retry_after_s,
            }
        }
        QuotaCheckError::Refused(QuotaRefusal::Exceeded { limit, message }) => {
            metrics::refused(&user.name, limit);
            ApiError::QuotaExceeded(message)
        }
    }
}

/// `403 not_granted` unless `user` may choose `profile` and `model`.
pub(super) async fn check_choice(
    state: &AppState,
    user: &User,
    profile: &str,
    model: &str,
) -> ApiResult<()> {
    let runtime = state.registry.runtime();
    let usable = runtime.access().usable(&user.name, user.is_admin).await?;
    match usable.refusal(&runtime.config, profile, model) {
        None => Ok(()),
        Some(message) => {
            metrics::refused(&user.name, "not_granted");
            Err(ApiError::NotGranted(message))
        }
    }
}

/// Before a model call outside any session (`POST /v1/messages`): the
/// model granted, and spend within the caller's quotas.
pub(super) async fn check_model_call(state: &AppState, user: &User, model: &str) -> ApiResult<()> {
    let runtime = state.registry.runtime();
    let usable = runtime.access().usable(&user.name, user.is_admin).await?;
    if let Some(message) = usable.model_refusal(&runtime.config, model) {
        metrics::refused(&user.name, "not_granted");
        return Err(ApiError::NotGranted(message));
    }
    runtime
        .access()
        .check_spend_quotas(&user.name)
        .await
        .map_err(|err| refused(user, err))
}

/// Before a session is created or forked: grants, stored sessions, bytes.
pub(super) async fn check_new_session(
    state: &AppState,
    user: &User,
    profile: &str,
    model: &str,
) -> ApiResult<()> {
    check_choice(state, user, profile, model).await?;
    let runtime = state.registry.runtime();
    runtime
        .access()
        .check_session_quotas(&user.name)
        .await
        .map_err(|err| refused(user, err))
}

/// Before a turn of `session` is accepted: its profile and model still
/// granted, and the turn within the caller's quotas (hold
/// `Admissions::serialize` from before this until the turn is accepted).
pub(super) async fn check_turn(
    state: &AppState,
    user: &User,
    session: &SessionRecord,
) -> ApiResult<()> {
    check_choice(state, user, &session.profile, &session.model).await?;
    let in_flight = state.registry.admissions().in_flight(&user.name);
    let runtime = state.registry.runtime();
    runtime
        .access()
        .check_turn_quotas(&user.name, in_flight)
        .await
        .map_err(|err| refused(user, err))
}

/// Append `action` by `user` to the audit log.
pub(super) async fn audit(
    state: &AppState,
    user: &User,
    action: &str,
    target: Option<&str>,
    detail: Value,
) {
    let access = state.registry.runtime().access();
    access
        .audit(&user.name)
        .record(action, target, detail)
        .await;
}
