//! Open permission requests and questions of a session, and answering them.

use agentd_engine::{Answer, Decision};
use agentd_protocol::{PendingKind, Resolver};
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::AppState;
use super::access_check::audit;
use super::auth::User;
use super::error::{ApiError, ApiJson, ApiPath, ApiResult, ErrorBody};
use super::sessions::owned_session;

#[derive(Debug, Serialize, ToSchema)]
pub struct PendingList {
    /// Oldest first.
    pub pending: Vec<PendingItem>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PendingItem {
    pub request_id: String,
    pub kind: PendingKind,
    pub turn_id: Option<String>,
    pub call_id: Option<String>,
    /// A permission request as in its `permission.requested` event (`tool`,
    /// `input`, `reason`, `session_rule`); a question as in `question.asked`
    /// (`questions`).
    #[schema(value_type = Object)]
    pub request: Value,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermissionChoice {
    Allow,
    Deny,
}

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Remember {
    /// Allow the same call without asking for the rest of the session.
    Session,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionAnswer {
    pub decision: PermissionChoice,
    /// Only with `allow`.
    pub remember: Option<Remember>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PermissionAnswered {
    pub request_id: String,
    pub decision: Decision,
}

/// Permission requests and questions waiting for an answer.
#[utoipa::path(get, path = "/v1/sessions/{id}/pending", tag = "approvals",
    params(("id" = String, Path, description = "Session id")),
    responses((status = 200, body = PendingList), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_pending(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<PendingList>> {
    owned_session(&state, &user, &id).await?;
    let open = state.sessions.pending(&id).await?;
    let pending = open
        .into_iter()
        .map(|record| PendingItem {
            request_id: record.id,
            kind: record.kind,
            turn_id: record.turn_id,
            call_id: record.call_id,
            request: record.data,
            created_at: record.created_at,
        })
        .collect();
    Ok(Json(PendingList { pending }))
}

/// Answer a permission request: the waiting turn runs or skips the call.
#[utoipa::path(post, path = "/v1/sessions/{id}/permissions/{request_id}", tag = "approvals",
    params(("id" = String, Path, description = "Session id"),
           ("request_id" = String, Path, description = "From `permission.requested`")),
    request_body = PermissionAnswer,
    responses(
        (status = 200, body = PermissionAnswered),
        (status = 400, body = ErrorBody),
        (status = 404, description = "No such request in this session", body = ErrorBody),
        (status = 409, description = "Already answered, or its turn is gone", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn answer_permission(
    State(state): State<AppState>,
    user: User,
    ApiPath((id, request_id)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<PermissionAnswer>,
) -> ApiResult<Json<PermissionAnswered>> {
    owned_session(&state, &user, &id).await?;
    let decision = match (body.decision, body.remember) {
        (PermissionChoice::Allow, None) => Decision::Allow,
        (PermissionChoice::Allow, Some(Remember::Session)) => Decision::AllowSession,
        (PermissionChoice::Deny, None) => Decision::Deny,
        (PermissionChoice::Deny, Some(_)) => {
            // An unknown or answered request says so first.
            let kind = agentd_protocol::PendingKind::Permission;
            state.sessions.open_request(&id, &request_id, kind).await?;
            return Err(ApiError::BadRequest(
                "`remember` goes with `allow` only".into(),
            ));
        }
    };
    let answer = Answer::new(decision.clone(), Resolver::User(user.name.as_str().into()));
    let record = state
        .sessions
        .answer_permission(&id, &request_id, answer)
        .await?;
    let detail = serde_json::json!({"request_id": request_id, "decision": decision.as_str(),
        "tool": record.data.get("tool")});
    audit(&state, &user, "permission.answer", Some(&id), detail).await;
    Ok(Json(PermissionAnswered {
        request_id,
        decision,
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QuestionAnswers {
    /// Question text → the chosen option label, several labels (for
    /// `multiSelect`), or the user's own text.
    #[schema(value_type = Object)]
    pub answers: Value,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct QuestionAnswered {
    pub request_id: String,
    #[schema(value_type = Object)]
    pub answers: Value,
}

/// Answer a question the agent asked (`question.asked`): the waiting turn
/// goes on with the answers.
#[utoipa::path(post, path = "/v1/sessions/{id}/questions/{request_id}", tag = "approvals",
    params(("id" = String, Path, description = "Session id"),
           ("request_id" = String, Path, description = "From `question.asked`")),
    request_body = QuestionAnswers,
    responses(
        (status = 200, body = QuestionAnswered),
        (status = 400, description = "Answers that do not fit the questions", body = ErrorBody),
        (status = 404, description = "No such question in this session", body = ErrorBody),
        (status = 409, description = "Already answered, or its turn is gone", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn answer_question(
    State(state): State<AppState>,
    user: User,
    ApiPath((id, request_id)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<QuestionAnswers>,
) -> ApiResult<Json<QuestionAnswered>> {
    owned_session(&state, &user, &id).await?;
    let by = Resolver::User(user.name.as_str().into());
    state
        .sessions
        .answer_question(&id, &request_id, body.answers.clone(), by)
        .await?;
    let detail = serde_json::json!({"request_id": request_id, "answers": body.answers});
    audit(&state, &user, "question.answer", Some(&id), detail).await;
    Ok(Json(QuestionAnswered {
        request_id,
        answers: body.answers,
    }))
}
