//! Turning a stored transcript into a valid model request.
//!
//! A transcript can end a turn in a state providers reject: a crash or an
//! interrupt between a tool call and its result, two user messages in a row after
//! a failed turn. The store keeps what happened; this repairs only the request.

use std::collections::HashSet;

use agentd_protocol::{ContentBlock, Message, Role};

/// What the model is told about a tool call that never produced a result.
pub const NOT_RUN: &str = "This tool call did not run: the turn ended before it could.";

/// Every tool call answered exactly once, right after it; no orphaned results;
/// consecutive messages of one role merged.
pub fn normalize(messages: Vec<Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut pending: Vec<String> = Vec::new();
    for message in messages {
        match message.role {
            Role::Assistant => {
                close_pending(&mut out, &mut pending, None);
                pending = message.tool_uses().map(|u| u.id.to_string()).collect();
                push_merged(&mut out, message);
            }
            Role::User => {
                let mut content = message.content;
                close_pending(&mut out, &mut pending, Some(&mut content));
                if !content.is_empty() {
                    push_merged(
                        &mut out,
                        Message {
                            role: Role::User,
                            content,
                        },
                    );
                }
            }
        }
    }
    close_pending(&mut out, &mut pending, None);
    out
}

/// Answer the tool calls still pending. With `next_user` (the user message that
/// follows the calls), its results for them are kept first, missing ones added,
/// and results for unknown calls dropped; without it, a user message of results
/// is appended.
fn close_pending(
    out: &mut Vec<Message>,
    pending: &mut Vec<String>,
    mut next_user: Option<&mut Vec<ContentBlock>>,
) {
    let expected: HashSet<&str> = pending.iter().map(String::as_str).collect();
    let mut answered = HashSet::new();
    let mut results = Vec::new();
    let mut rest = Vec::new();
    // Moved, not copied: the user message's blocks are put back below.
    let given = next_user.as_deref_mut().map(std::mem::take);
    for block in given.into_iter().flatten() {
        match &block {
            ContentBlock::ToolResult { tool_use_id, .. } => {
                if expected.contains(tool_use_id.as_str()) && answered.insert(tool_use_id.clone()) {
                    results.push(block);
                }
            }
            _ => rest.push(block),
        }
    }
    for id in pending.iter().filter(|id| !answered.contains(*id)) {
        results.push(ContentBlock::ToolResult {
            tool_use_id: id.clone(),
            content: NOT_RUN.to_string(),
            is_error: true,
        });
    }
    pending.clear();
    match next_user {
        Some(content) => {
            results.extend(rest);
            *content = results;
        }
        None if !results.is_empty() => push_merged(
            out,
            Message {
                role: Role::User,
                content: results,
            },
        ),
        None => {}
    }
}

/// Append, merging into the last message when it has the same role.
pub(crate) fn push_merged(out: &mut Vec<Message>, message: Message) {
    match out.last_mut() {
        Some(last) if last.role == message.role => last.content.extend(message.content),
        _ => out.push(message),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool_use(id: &str) -> ContentBlock {
        ContentBlock::ToolUse {
            id: id.into(),
            name: "Bash".into(),
            input: json!({}),
        }
    }

    fn result(id: &str) -> ContentBlock {
        ContentBlock::ToolResult {
            tool_use_id: id.into(),
            content: "ok".into(),
            is_error: false,
        }
    }

    #[test]
    fn complete_history_is_unchanged() {
        let history = vec![
            Message::user_text("hi"),
            Message::assistant(vec![tool_use("a")]),
            Message {
                role: Role::User,
                content: vec![result("a")],
            },
            Message::assistant(vec![ContentBlock::Text {
                text: "done".into(),
            }]),
        ];
        assert_eq!(normalize(history.clone()), history);
    }

    #[test]
    fn unanswered_calls_get_results_and_user_messages_merge() {
        let history = vec![
            Message::user_text("hi"),
            Message::assistant(vec![tool_use("a"), tool_use("b")]),
            Message {
                role: Role::User,
                content: vec![result("b")],
            },
            Message::user_text("again"),
        ];
        let out = normalize(history.clone());
        assert_eq!(out.len(), 3);
        let ids: Vec<_> = out[2]
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids, ["b", "a"]);
        assert_eq!(out[2].text(), "again");
    }

    #[test]
    fn trailing_calls_and_orphans_are_repaired() {
        let history = vec![
            Message {
                role: Role::User,
                content: vec![result("zzz"), ContentBlock::Text { text: "q".into() }],
            },
            Message::assistant(vec![tool_use("a")]),
        ];
        let out = normalize(history.clone());
        assert_eq!(out[0].content.len(), 1, "orphan result dropped");
        assert_eq!(out.len(), 3);
        assert!(matches!(
            &out[2].content[0],
            ContentBlock::ToolResult { tool_use_id, is_error: true, .. } if tool_use_id == "a"
        ));
    }
}
