//! The Vercel AI SDK's UI message stream on `agentd serve`, for `useChat`
//! front ends (`DefaultChatTransport`): `POST /v1/sessions/{id}/chat` starts
//! a turn from the chat's last user message (or answers tool approvals) and
//! streams it; `GET /v1/sessions/{id}/chat/stream` replays the running
//! turn's stream for a client that lost it (the SDK's `resume`). A thin
//! layer: turns go through the session service as `POST …/messages` does,
//! and the stream is read from the session's event log.

mod chunks;
mod request;
mod stream;

use agentd_engine::{Answer, Decision};
use agentd_protocol::Resolver;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use utoipa::ToSchema;

use super::AppState;
use super::access_check::audit;
use super::attachments::to_content_blocks;
use super::auth::User;
use super::error::{ApiError, ApiJson, ApiPath, ApiResult, ErrorBody};
use super::messages::submit_turn;
use super::sessions::owned_session;
use crate::content::check_content;
use crate::registry::TurnKind;
use crate::session::SessionError;
use request::{ApprovalAnswer, ChatAction, ChatRequest};
use stream::{TurnCursor, respond, stream_slot};

/// One SSE event of a UI message stream, for the OpenAPI document: `data`
/// is a chunk's JSON (`{"type": "start" | "start-step" | "text-delta" | …}`)
/// or, last, `[DONE]`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct UiMessageStreamEvent {
    data: String,
}

/// Send the chat's new message (the AI SDK's `useChat` request) and stream
/// the turn it starts as the AI SDK's UI message stream. An assistant
/// message whose tool parts answer approvals answers those permission
/// requests instead, and streams the rest of the turn that asked.
#[utoipa::path(post, path = "/v1/sessions/{id}/chat", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    request_body = ChatRequest,
    responses(
        (status = 200, description = "The turn as a UI message stream (`x-vercel-ai-ui-message-stream: v1`), \
            ending with `data: [DONE]` when the turn ends or waits for an approval",
            content_type = "text/event-stream", body = UiMessageStreamEvent),
        (status = 400, description = "Malformed body, no text or file in the last user message, \
            a file that is not a base64 image or PDF, or `regenerate-message`", body = ErrorBody),
        (status = 403, description = "`not_granted` or `quota_exceeded`, as for a message", body = ErrorBody),
        (status = 404, description = "No such session, or no such approval", body = ErrorBody),
        (status = 409, description = "A turn is running, or the approval's turn is gone", body = ErrorBody),
        (status = 413, description = "Body over 32 MiB, or an image over 5 MiB", body = ErrorBody),
        (status = 429, description = "`rate_limited`, or `max_streams_per_user` streams open; see `Retry-After`",
            body = ErrorBody),
        (status = 503, description = "`shutting_down` or `store_unavailable`", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn post_chat(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ChatRequest>,
) -> ApiResult<Response> {
    let session = owned_session(&state, &user, &id).await?;
    let action = body.action()?;
    let slot = stream_slot(&state, &user)?;
    match action {
        ChatAction::Turn {
            content,
            request_id,
        } => {
            let last_seq = session.last_seq;
            let blocks = check_content(content)?;
            let content = to_content_blocks(&state, &session, blocks).await?;
            let kind = TurnKind::from_blocks(content, None);
            let (_, accepted) = submit_turn(
                &state,
                &user,
                session,
                kind,
                Some(request_id.clone()),
                false,
            )
            .await?;
            // A resent message: its turn began before `last_seq`.
            let retried = match accepted.state.as_str() {
                "duplicate" => state.sessions.turn_of_request(&id, &request_id).await?,
                _ => None,
            };
            let after = match retried {
                Some(turn) => {
                    state
                        .sessions
                        .seq_before(&id, turn.started_at, last_seq)
                        .await?
                }
                None => last_seq,
            };
            let cursor = TurnCursor {
                session_id: id,
                turn_id: accepted.0.turn_id,
                after,
                continue_after: None,
            };
            Ok(respond(&state, slot, cursor))
        }
        ChatAction::Approvals(answers) => {
            // Found first: once answered, the turn may end at once.
            // Nothing is answered when no turn waits for the answers.
            let waiting = running_turn(&state, &id, session.last_seq).await?;
            let mut cursor = waiting.ok_or_else(|| {
                ApiError::from(SessionError::NotWaiting(
                    "no turn is waiting for these approvals any more".into(),
                ))
            })?;
            answer_approvals(&state, &user, &id, &answers).await?;
            cursor.continue_after = answers.last().map(|answer| answer.request_id.clone());
            Ok(respond(&state, slot, cursor))
        }
    }
}

/// Replay the running turn's UI message stream from its start (the AI
/// SDK's `resumeStream`), then follow it live; 204 when no turn runs.
#[utoipa::path(get, path = "/v1/sessions/{id}/chat/stream", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The running turn as a UI message stream, from its start",
            content_type = "text/event-stream", body = UiMessageStreamEvent),
        (status = 204, description = "No turn is running"),
        (status = 404, body = ErrorBody),
        (status = 429, description = "`max_streams_per_user` streams open; see `Retry-After`", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn resume_chat_stream(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let session = owned_session(&state, &user, &id).await?;
    match running_turn(&state, &id, session.last_seq).await? {
        Some(cursor) => Ok(respond(&state, stream_slot(&state, &user)?, cursor)),
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

/// Where the session's running turn begins, if one runs.
async fn running_turn(
    state: &AppState,
    session_id: &str,
    last_seq: u64,
) -> ApiResult<Option<TurnCursor>> {
    let Some(turn) = state.sessions.running_turn(session_id).await? else {
        return Ok(None);
    };
    let after = state
        .sessions
        .seq_before(session_id, turn.started_at, last_seq)
        .await?;
    Ok(Some(TurnCursor {
        session_id: session_id.to_string(),
        turn_id: turn.id,
        after,
        continue_after: None,
    }))
}

/// Answer the approvals as `POST …/permissions/{request_id}` does; one
/// answered already (a resent request) is left as it was.
async fn answer_approvals(
    state: &AppState,
    user: &User,
    session_id: &str,
    answers: &[ApprovalAnswer],
) -> ApiResult<()> {
    for answer in answers {
        let decision = if answer.approved {
            Decision::Allow
        } else {
            Decision::Deny
        };
        let by = Resolver::User(user.name.as_str().into());
        let answered = state
            .sessions
            .answer_permission(
                session_id,
                &answer.request_id,
                Answer::new(decision.clone(), by),
            )
            .await;
        match answered {
            Ok(record) => {
                let detail = serde_json::json!({"request_id": answer.request_id,
                    "decision": decision.as_str(), "tool": record.data.get("tool")});
                audit(state, user, "permission.answer", Some(session_id), detail).await;
            }
            Err(SessionError::AlreadyAnswered(_)) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}
