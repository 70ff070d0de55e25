//! agentd's events and stored transcript as ACP `session/update`s.

use std::path::Path;

use agent_client_protocol::v1::schema::{
    ContentBlock as AcpBlock, ContentChunk, ImageContent, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, SessionUpdate, ToolCallStatus,
};
use agentd_protocol::{ContentBlock, DeltaKind, Event, Message, Role, Todo, TodoStatus};

use super::tools::{self, Call};

/// The live updates one event of the followed turn makes. Subagents' own
/// steps stay inside their `Task` call, as the editor shows one agent.
pub fn live(
    event: &Event,
    workspace: Option<&Path>,
    announced: &mut Vec<String>,
) -> Vec<SessionUpdate> {
    match event {
        Event::MessageDelta {
            kind,
            text,
            parent_call_id: None,
            ..
        } => {
            let chunk = ContentChunk::new(AcpBlock::from(text.clone()));
            vec![match kind {
                DeltaKind::Text => SessionUpdate::AgentMessageChunk(chunk),
                DeltaKind::Thinking => SessionUpdate::AgentThoughtChunk(chunk),
            }]
        }
        Event::ToolStarted {
            call_id,
            name,
            input,
            parent_call_id: None,
            ..
        } => {
            if announced.contains(call_id) {
                return Vec::new();
            }
            announced.push(call_id.clone());
            let call = Call {
                id: call_id,
                name,
                input,
                workspace,
            };
            // Pending: agentd announces a call before its permission check.
            vec![SessionUpdate::ToolCall(
                call.announce(ToolCallStatus::Pending),
            )]
        }
        Event::ToolFinished {
            call_id,
            is_error,
            output,
            ..
        } if announced.contains(call_id) => {
            vec![SessionUpdate::ToolCallUpdate(tools::finished(
                call_id, *is_error, output,
            ))]
        }
        Event::TodoUpdated {
            todos,
            parent_call_id: None,
            ..
        } => vec![plan(todos)],
        _ => Vec::new(),
    }
}

/// `TodoWrite`'s list as the agent's plan.
fn plan(todos: &[Todo]) -> SessionUpdate {
    let entries = todos
        .iter()
        .map(|todo| {
            let status = match todo.status {
                TodoStatus::Pending => PlanEntryStatus::Pending,
                TodoStatus::InProgress => PlanEntryStatus::InProgress,
                TodoStatus::Completed => PlanEntryStatus::Completed,
            };
            PlanEntry::new(todo.content.clone(), PlanEntryPriority::Medium, status)
        })
        .collect();
    SessionUpdate::Plan(Plan::new(entries))
}

/// A stored transcript as the updates that show it again (`session/load`).
pub fn replay(messages: &[Message], workspace: Option<&Path>) -> Vec<SessionUpdate> {
    let mut updates = Vec::new();
    for message in messages {
        for block in &message.content {
            if let Some(update) = replayed(block, message.role, workspace) {
                updates.push(update);
            }
        }
    }
    updates
}

fn replayed(block: &ContentBlock, role: Role, workspace: Option<&Path>) -> Option<SessionUpdate> {
    let chunk = |block: AcpBlock| ContentChunk::new(block);
    Some(match (block, role) {
        (ContentBlock::Text { text }, Role::User) => {
            SessionUpdate::UserMessageChunk(chunk(AcpBlock::from(text.clone())))
        }
        (ContentBlock::Text { text }, _) => {
            SessionUpdate::AgentMessageChunk(chunk(AcpBlock::from(text.clone())))
        }
        (ContentBlock::Thinking { thinking, .. }, _) => {
            SessionUpdate::AgentThoughtChunk(chunk(AcpBlock::from(thinking.clone())))
        }
        (ContentBlock::Image { source }, Role::User) => {
            let data = source["data"].as_str()?;
            let media_type = source["media_type"].as_str()?;
            let image = ImageContent::new(data.to_string(), media_type.to_string());
            SessionUpdate::UserMessageChunk(chunk(AcpBlock::Image(image)))
        }
        (ContentBlock::ToolUse { id, name, input }, _) => {
            let call = Call {
                id,
                name,
                input,
                workspace,
            };
            SessionUpdate::ToolCall(call.announce(ToolCallStatus::Pending))
        }
        (
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            },
            _,
        ) => SessionUpdate::ToolCallUpdate(tools::finished(tool_use_id, *is_error, content)),
        _ => return None,
    })
}
