//! The session's commands without the model: list them, run one.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::AppState;
use super::access_check::{audit, check_choice};
use super::auth::User;
use super::error::{ApiError, ApiJson, ApiPath, ApiResult, ErrorBody};
use super::sessions::owned_session;
use agentd_tools::command::{CommandSpec, RunsOn};

#[derive(Debug, Serialize, ToSchema)]
pub struct CommandList {
    pub commands: Vec<CommandView>,
}

/// A command the session may run.
#[derive(Debug, Serialize, ToSchema)]
pub struct CommandView {
    pub name: String,
    pub description: String,
    /// The argv as configured; `{name}` elements are replaced by arguments.
    pub argv: Vec<String>,
    /// The JSON Schema its arguments must meet (an object; every property required).
    #[schema(value_type = Object)]
    pub parameters: Value,
    /// Changes things: running it needs `confirmed: true`.
    pub mutating: bool,
    /// Always confirmed by a human: running it needs `confirmed: true`.
    pub confirm: bool,
    /// `sandbox` (the session's) or `host`.
    pub runs_on: String,
    pub timeout_s: u64,
}

impl From<&CommandSpec> for CommandView {
    fn from(spec: &CommandSpec) -> Self {
        Self {
            name: spec.name.clone(),
            description: spec.description.clone(),
            argv: spec.argv_template(),
            parameters: spec.input_schema(),
            mutating: spec.mutating,
            confirm: spec.confirm,
            runs_on: match spec.runs_on {
                RunsOn::Sandbox => "sandbox".into(),
                RunsOn::Host { .. } => "host".into(),
            },
            timeout_s: spec.timeout.as_secs(),
        }
    }
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCommand {
    /// The arguments, by parameter name (see the command's `parameters`).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub arguments: serde_json::Map<String, Value>,
    /// Required to be true for `mutating` and `confirm` commands.
    #[serde(default)]
    pub confirmed: bool,
}

/// How a run ended.
#[derive(Debug, Serialize, ToSchema)]
pub struct CommandResult {
    pub command: String,
    /// Exactly what ran.
    pub argv: Vec<String>,
    /// Absent when it was killed (timeout or signal).
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// At most 64 KiB, the start.
    pub stdout: String,
    /// At most 16 KiB, the end.
    pub stderr: String,
    /// Stdout was longer than kept.
    pub truncated: bool,
    pub duration_ms: u64,
}

/// The commands this session may run, with their argument schemas.
#[utoipa::path(get, path = "/v1/sessions/{id}/commands", tag = "commands",
    params(("id" = String, Path, description = "Session id")),
    responses((status = 200, body = CommandList), (status = 403, description = "The session's profile or model is no longer granted to the caller", body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_commands(
    State(state): State<AppState>,
    user: User,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Json<CommandList>> {
    let session = owned_session(&state, &user, &id).await?;
    check_choice(&state, &user, &session.profile, &session.model).await?;
    let commands = state.sessions.commands(&session)?;
    Ok(Json(CommandList {
        commands: commands
            .iter()
            .map(|spec| CommandView::from(&**spec))
            .collect(),
    }))
}

/// Run one of the session's commands, as the model's tool call would, and
/// record it in the transcript (`command.ran`) and the audit log.
#[utoipa::path(post, path = "/v1/sessions/{id}/commands/{name}", tag = "commands",
    params(
        ("id" = String, Path, description = "Session id"),
        ("name" = String, Path, description = "Command name"),
    ),
    request_body = RunCommand,
    responses(
        (status = 200, description = "It ran (whatever its exit code)", body = CommandResult),
        (status = 400, description = "Arguments refused (nothing ran), or `confirmed` missing for a mutating or confirm command", body = ErrorBody),
        (status = 403, description = "The session's profile or model is no longer granted to the caller", body = ErrorBody),
        (status = 404, description = "No such session or command", body = ErrorBody),
        (status = 409, description = "A turn is running", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn run_command(
    State(state): State<AppState>,
    user: User,
    ApiPath((id, name)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<RunCommand>,
) -> ApiResult<Json<CommandResult>> {
    let session = owned_session(&state, &user, &id).await?;
    let arguments = Value::Object(body.arguments);
    let refused = |message: String| serde_json::json!({"command": name, "arguments": arguments, "refused": message});
    // A revoked profile or model runs none of its commands.
    if let Err(err) = check_choice(&state, &user, &session.profile, &session.model).await {
        let detail = refused(err.to_string());
        audit(&state, &user, "session.command", Some(&id), detail).await;
        return Err(err);
    }
    // The run and its record go on when the client goes away or the
    // request is dropped: what ran is always in the transcript.
    let sessions = state.sessions.clone();
    let (user_name, command, confirmed) = (user.name.clone(), name.clone(), body.confirmed);
    let args = arguments.clone();
    let outcome = tokio::spawn(async move {
        sessions
            .run_command(session, &user_name, &command, args, confirmed)
            .await
    })
    .await
    .map_err(|err| ApiError::Internal(format!("the command's run failed: {err}")));
    let ran = match outcome {
        Ok(Ok(ran)) => ran,
        Ok(Err(err)) => {
            let detail = refused(err.to_string());
            audit(&state, &user, "session.command", Some(&id), detail).await;
            return Err(err.into());
        }
        Err(err) => {
            let detail = refused(err.to_string());
            audit(&state, &user, "session.command", Some(&id), detail).await;
            return Err(err);
        }
    };
    let run = ran.run;
    let duration_ms = u64::try_from(run.duration.as_millis()).unwrap_or(u64::MAX);
    let detail = serde_json::json!({
        "command": name,
        "arguments": arguments,
        "argv": ran.argv,
        "exit_code": run.exit_code,
        "timed_out": run.timed_out,
    });
    audit(&state, &user, "session.command", Some(&id), detail).await;
    Ok(Json(CommandResult {
        command: name,
        argv: ran.argv,
        exit_code: run.exit_code,
        timed_out: run.timed_out,
        stdout: run.stdout,
        stderr: run.stderr,
        truncated: run.truncated,
        duration_ms,
    }))
}
