//! `session/prompt`: the editor's message sent as an agentd turn, the turn's
//! events streamed back as `session/update`s, its permission requests asked
//! with `session/request_permission` and answered through agentd's
//! approvals API, and its end as the stop reason.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock as AcpBlock, EmbeddedResourceResource, PermissionOption, PermissionOptionKind,
    PromptRequest, PromptResponse, RequestPermissionOutcome, RequestPermissionRequest,
    SessionNotification, SessionUpdate, StopReason, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use agentd_protocol::{Event, TurnFinished, TurnStatus};
use futures::StreamExt;
use serde_json::{Value, json};

use super::tools::{self, Call};
use super::{Acp, api_error, updates};

const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT: &str = "reject_once";
const SKIP: &str = "skip";

impl Acp {
    /// Run the prompt as a turn and follow it to its end.
    pub async fn prompt(
        &self,
        request: PromptRequest,
        connection: &ConnectionTo<Client>,
    ) -> Result<PromptResponse, agent_client_protocol::Error> {
        let session = request.session_id.0.to_string();
        let content = blocks(&request.prompt)?;
        let workspace = self.workspace_of(&session).await;
        let view = self.api.session(&session).await.map_err(api_error)?;
        let after = view["last_seq"].as_u64().unwrap_or(0);
        // Opened before the turn starts: none of its events is missed.
        let mut events = self.api.events(&session, after).await.map_err(api_error)?;
        let path = format!("/v1/sessions/{session}/messages");
        let mut body = json!({"content": content});
        // The editor's mode; none: the profile's.
        if let Some(mode) = self.selected_mode(&session) {
            body["permission_mode"] = json!(mode.name());
        }
        let accepted = self.api.post(&path, body).await.map_err(api_error)?;
        let turn_id = accepted["turn_id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| {
                agent_client_protocol::Error::internal_error()
                    .data("agentd's answer had no turn_id")
            })?;
        let mut started = false;
        let mut announced = Vec::new();
        while let Some(envelope) = events.next().await {
            let event = envelope.map_err(api_error)?.event;
            match &event {
                Event::TurnStarted { turn_id: id, .. } if *id == turn_id => started = true,
                // What comes before belongs to earlier turns.
                _ if !started => {}
                Event::TurnFinished(finished) if finished.turn_id == turn_id => {
                    return stop_reason(finished).map(PromptResponse::new);
                }
                Event::PermissionRequested {
                    request_id,
                    call_id,
                    tool,
                    input,
                    parent_call_id,
                    reason,
                } => {
                    let call = Call {
                        id: call_id,
                        name: tool,
                        input,
                        workspace: workspace.as_deref(),
                    };
                    // The editor shows the call it is asked about.
                    if parent_call_id.is_none() && !announced.contains(call_id) {
                        announced.push(call_id.clone());
                        let update =
                            SessionUpdate::ToolCall(call.announce(ToolCallStatus::Pending));
                        send(connection, &request, update)?;
                    }
                    self.ask(connection, &request, &session, request_id, &call, reason)
                        .await?;
                }
                Event::QuestionAsked {
                    request_id,
                    call_id,
                    questions,
                    ..
                } => {
                    self.ask_questions(
                        connection, &request, &session, request_id, call_id, questions,
                    )
                    .await?;
                }
                event => {
                    for update in updates::live(event, workspace.as_deref(), &mut announced) {
                        send(connection, &request, update)?;
                    }
                }
            }
        }
        Err(agent_client_protocol::Error::internal_error().data("agentd ended the event stream"))
    }

    /// Ask the editor about a permission request; its answer goes to
    /// agentd's approvals API (one answered elsewhere first is left be).
    async fn ask(
        &self,
        connection: &ConnectionTo<Client>,
        prompt: &PromptRequest,
        session: &str,
        request_id: &str,
        call: &Call<'_>,
        reason: &str,
    ) -> Result<(), agent_client_protocol::Error> {
        let options = vec![
            PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
            PermissionOption::new(
                ALLOW_ALWAYS,
                "Allow always (this session)",
                PermissionOptionKind::AllowAlways,
            ),
            PermissionOption::new(REJECT, "Reject", PermissionOptionKind::RejectOnce),
        ];
        // The title says why, and for an operator command its whole argv.
        let mut update = call.as_update();
        update.fields.title = Some(format!("{} — {reason}", call.title()));
        let asked = RequestPermissionRequest::new(prompt.session_id.clone(), update, options);
        let answer = connection.send_request(asked).block_task().await?;
        let body = match answer.outcome {
            RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
                ALLOW_ONCE => json!({"decision": "allow"}),
                ALLOW_ALWAYS => json!({"decision": "allow", "remember": "session"}),
                _ => json!({"decision": "deny"}),
            },
            // Cancelled: the prompt is being cancelled; the interrupt ends
            // the turn, and the call must not run meanwhile.
            _ => json!({"decision": "deny"}),
        };
        let allowed = body["decision"] == "allow";
        let path = format!("/v1/sessions/{session}/permissions/{request_id}");
        match self.api.post(&path, body).await {
            // Answered elsewhere first: that answer stands.
            Err(err) if err.status == Some(reqwest::StatusCode::CONFLICT) => return Ok(()),
            outcome => outcome.map_err(api_error)?,
        };
        if allowed {
            let update = SessionUpdate::ToolCallUpdate(tools::running(call.id));
            send(connection, prompt, update)?;
        }
        Ok(())
    }

    /// The agent's questions (AskUserQuestion). ACP has no question
    /// request, so each is put as a permission request whose options are
    /// the question's own; the choices go to agentd's questions API. A
    /// skipped question is left unanswered (the agent goes on without it).
    async fn ask_questions(
        &self,
        connection: &ConnectionTo<Client>,
        prompt: &PromptRequest,
        session: &str,
        request_id: &str,
        call_id: &str,
        questions: &Value,
    ) -> Result<(), agent_client_protocol::Error> {
        let mut answers = serde_json::Map::new();
        for question in questions.as_array().into_iter().flatten() {
            let Some(text) = question["question"].as_str() else {
                continue;
            };
            let labels: Vec<&str> = question["options"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|option| option["label"].as_str())
                .collect();
            let mut options: Vec<PermissionOption> = labels
                .iter()
                .enumerate()
                .map(|(i, label)| {
                    PermissionOption::new(
                        format!("answer_{i}"),
                        *label,
                        PermissionOptionKind::AllowOnce,
                    )
                })
                .collect();
            options.push(PermissionOption::new(
                SKIP,
                "Skip",
                PermissionOptionKind::RejectOnce,
            ));
            let call = ToolCallUpdate::new(
                call_id.to_string(),
                ToolCallUpdateFields::new()
                    .title(text.to_string())
                    .kind(ToolKind::Think)
                    .raw_input(question.clone()),
            );
            let asked = RequestPermissionRequest::new(prompt.session_id.clone(), call, options);
            let answer = connection.send_request(asked).block_task().await?;
            let RequestPermissionOutcome::Selected(selected) = answer.outcome else {
                break;
            };
            let chosen = selected.option_id.0.strip_prefix("answer_");
            if let Some(label) = chosen
                .and_then(|i| i.parse::<usize>().ok())
                .and_then(|i| labels.get(i))
            {
                answers.insert(text.to_string(), json!(label));
            }
        }
        let path = format!("/v1/sessions/{session}/questions/{request_id}");
        match self.api.post(&path, json!({"answers": answers})).await {
            Err(err) if err.status == Some(reqwest::StatusCode::CONFLICT) => Ok(()),
            outcome => outcome.map(|_| ()).map_err(api_error),
        }
    }

    /// Stop the session's running turn (`session/cancel`); the prompt ends
    /// with `cancelled` when agentd's `turn.finished` comes.
    pub async fn cancel(&self, session: &str) {
        let path = format!("/v1/sessions/{session}/interrupt");
        if let Err(err) = self.api.post(&path, json!({})).await
            && err.status != Some(reqwest::StatusCode::CONFLICT)
        {
            tracing::warn!(%err, session, "could not interrupt the turn");
        }
    }
}

fn send(
    connection: &ConnectionTo<Client>,
    prompt: &PromptRequest,
    update: SessionUpdate,
) -> Result<(), agent_client_protocol::Error> {
    connection.send_notification(SessionNotification::new(prompt.session_id.clone(), update))
}

/// How the turn ended, as ACP says it; a failed turn is an error.
fn stop_reason(finished: &TurnFinished) -> Result<StopReason, agent_client_protocol::Error> {
    match finished.status {
        TurnStatus::Completed => Ok(StopReason::EndTurn),
        TurnStatus::Interrupted => Ok(StopReason::Cancelled),
        TurnStatus::MaxTurns => Ok(StopReason::MaxTurnRequests),
        status => {
            let message = finished
                .error
                .as_ref()
                .map(|error| error.message.clone())
                .unwrap_or_else(|| format!("the turn ended: {}", status.as_str()));
            Err(agent_client_protocol::Error::internal_error().data(message))
        }
    }
}

/// The editor's prompt as agentd's content blocks: text, images, linked
/// resources named in text (the agent reads them from its workspace), and
/// embedded resources as text documents.
fn blocks(prompt: &[AcpBlock]) -> Result<Vec<Value>, agent_client_protocol::Error> {
    let mut content = Vec::new();
    for block in prompt {
        content.push(match block {
            AcpBlock::Text(text) => json!({"type": "text", "text": text.text}),
            AcpBlock::Image(image) => json!({"type": "image", "source": {
                "type": "base64", "media_type": image.mime_type, "data": image.data}}),
            AcpBlock::ResourceLink(link) => json!({"type": "text",
                "text": format!("[resource: {}]({})", link.name, link.uri)}),
            AcpBlock::Resource(embedded) => match &embedded.resource {
                EmbeddedResourceResource::TextResourceContents(text) => json!({
                    "type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": text.text},
                    "title": text.uri}),
                EmbeddedResourceResource::BlobResourceContents(blob) => json!({
                    "type": "document",
                    "source": {"type": "base64",
                               "media_type": blob.mime_type.as_deref().unwrap_or("application/pdf"),
                               "data": blob.blob},
                    "title": blob.uri}),
                _ => return Err(unsupported("this kind of embedded resource")),
            },
            _ => return Err(unsupported("audio and other content")),
        });
    }
    if content.is_empty() {
        return Err(agent_client_protocol::Error::invalid_params().data("the prompt is empty"));
    }
    Ok(content)
}

fn unsupported(what: &str) -> agent_client_protocol::Error {
    agent_client_protocol::Error::invalid_params()
        .data(format!("agentd does not take {what} in a prompt"))
}
