//! `GET /v1/admin/webhooks/deliveries`: the webhook delivery log, for admins.

use agentd_store::{DeliveryRecord, DeliveryStatus};
use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::admin::admin;
use super::auth::User;
use super::error::{ApiError, ApiQuery, ApiResult, ErrorBody};

const DEFAULT_PAGE: u32 = 100;
const MAX_PAGE: u32 = 1000;

/// A delivery's state.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// Not yet sent, or waiting for its next attempt.
    Pending,
    Delivered,
    /// Given up after its last attempt.
    Failed,
}

impl From<DeliveryState> for DeliveryStatus {
    fn from(state: DeliveryState) -> Self {
        match state {
            DeliveryState::Pending => DeliveryStatus::Pending,
            DeliveryState::Delivered => DeliveryStatus::Delivered,
            DeliveryState::Failed => DeliveryStatus::Failed,
        }
    }
}

impl From<DeliveryStatus> for DeliveryState {
    fn from(status: DeliveryStatus) -> Self {
        match status {
            DeliveryStatus::Pending => DeliveryState::Pending,
            DeliveryStatus::Delivered => DeliveryState::Delivered,
            DeliveryStatus::Failed => DeliveryState::Failed,
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeliveryParams {
    /// Only deliveries in this state.
    #[param(nullable = false)]
    pub status: Option<DeliveryState>,
    /// Deliveries at most, 1–1000 (default 100).
    #[param(minimum = 1, maximum = 1000, nullable = false)]
    pub limit: Option<u32>,
}

/// One delivery of the log.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryView {
    pub id: String,
    /// The webhook's `name` (default: its `url`'s host).
    pub webhook: String,
    /// `turn.finished`, `permission.requested`, `question.asked` or `budget`.
    pub event: String,
    pub session_id: String,
    pub status: DeliveryState,
    pub attempts: u64,
    /// The HTTP status of the last attempt, when one came back.
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
    pub next_attempt_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
    /// The body as sent.
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
}

impl From<DeliveryRecord> for DeliveryView {
    fn from(record: DeliveryRecord) -> Self {
        let payload = serde_json::from_str(&record.payload)
            .unwrap_or(serde_json::Value::String(record.payload));
        Self {
            id: record.id,
            webhook: record.webhook,
            event: record.event,
            session_id: record.session_id,
            status: record.status.into(),
            attempts: record.attempts,
            last_status: record.last_status,
            last_error: record.last_error,
            next_attempt_at: record.next_attempt_at,
            created_at: record.created_at,
            delivered_at: record.delivered_at,
            payload,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryLog {
    pub deliveries: Vec<DeliveryView>,
}

/// The webhook delivery log, newest first: each delivery's attempts, last
/// status or error, and when it was delivered or will be tried again.
#[utoipa::path(get, path = "/v1/admin/webhooks/deliveries", tag = "admin",
    params(DeliveryParams),
    responses((status = 200, body = DeliveryLog), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "`admin_only`", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn deliveries(
    State(state): State<AppState>,
    user: User,
    ApiQuery(params): ApiQuery<DeliveryParams>,
) -> ApiResult<Json<DeliveryLog>> {
    admin(&user)?;
    let limit = params.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "limit must be 1 to {MAX_PAGE}"
        )));
    }
    let records = state
        .registry
        .runtime()
        .store
        .list_deliveries(params.status.map(Into::into), limit)
        .await?;
    let deliveries = records.into_iter().map(DeliveryView::from).collect();
    Ok(Json(DeliveryLog { deliveries }))
}
