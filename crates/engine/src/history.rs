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
/// consecutive messages of one role merged; nothing before the first user
/// message.
pub fn normalize(messages: Vec<Message>) -> Vec<Message> {
    // Nearly always so: the check allocates nothing, the repair rebuilds
    // every message.
    if is_normal(&messages) {
        return messages;
    }
    repair(messages)
}

/// True when [`repair`] would return `messages` as they are: the user
/// speaks first, roles alternate, no user message is empty, each user message starts with one
/// result for every call of the assistant message before it (and has no
/// other results), and the last message is not a call waiting for results.
fn is_normal(messages: &[Message]) -> bool {
    let mut previous: Option<&Message> = None;
    for message in messages {
        let opens_with_assistant = previous.is_none() && message.role == Role::Assistant;
        if opens_with_assistant || previous.is_some_and(|p| p.role == message.role) {
            return false;
        }
        if message.role == Role::User {
            let calls = previous.map(|p| &p.content[..]).unwrap_or_default();
            if message.content.is_empty() || !answers_exactly(calls, &message.content) {
                return false;
            }
        }
        previous = Some(message);
    }
    !previous.is_some_and(|p| p.role == Role::Assistant && p.tool_uses().next().is_some())
}

/// `content` opens with one result per distinct call in `calls` (in any
/// order) and holds no other result.
fn answers_exactly(calls: &[ContentBlock], content: &[ContentBlock]) -> bool {
    let call_ids = || {
        calls.iter().filter_map(|block| match block {
            ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
            _ => None,
        })
    };
    let leading = content
        .iter()
        .take_while(|block| matches!(block, ContentBlock::ToolResult { .. }))
        .count();
    let results = || {
        content[..leading].iter().filter_map(|block| match block {
            ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
            _ => None,
        })
    };
    let later_result = content[leading..]
        .iter()
        .any(|block| matches!(block, ContentBlock::ToolResult { .. }));
    let each_known_once = results()
        .enumerate()
        .all(|(i, id)| call_ids().any(|c| c == id) && !results().take(i).any(|r| r == id));
    let all_answered = call_ids().all(|c| results().any(|id| id == c));
    !later_result && each_known_once && all_answered
}

/// [`normalize`] the long way: every message rebuilt.
fn repair(messages: Vec<Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut pending: Vec<String> = Vec::new();
    for mut message in messages {
        match message.role {
            // A request opens with the user: what the assistant "said" first
            // (a project's greeting) the model did not write.
            Role::Assistant if out.is_empty() => {}
            Role::Assistant => {
                close_pending(&mut out, &mut pending, None);
                pending = message.tool_uses().map(|u| u.id.to_string()).collect();
                push_merged(&mut out, message);
            }
            Role::User => {
                close_pending(&mut out, &mut pending, Some(&mut message.content));
                if !message.content.is_empty() {
                    push_merged(&mut out, message);
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
        results.push(ContentBlock::tool_result(
            id.clone(),
            NOT_RUN.to_string(),
            true,
        ));
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
        ContentBlock::tool_result(id, "ok", false)
    }

    /// Random small histories (roles, texts, calls and results over a few
    /// ids): the quick check never lets a history through that the repair
    /// would change, and a repaired history passes it (unless a message
    /// repeats a call id).
    #[test]
    fn the_quick_check_agrees_with_the_repair() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        let ids = ["a", "b", "c"];
        let mut passed = 0;
        for _ in 0..20_000 {
            let history: Vec<Message> = (0..next(6))
                .map(|_| {
                    let role = if next(2) == 0 {
                        Role::User
                    } else {
                        Role::Assistant
                    };
                    let content = (0..next(4))
                        .map(|_| match next(3) {
                            0 => ContentBlock::Text { text: "t".into() },
                            1 => tool_use(ids[next(3) as usize]),
                            _ => result(ids[next(3) as usize]),
                        })
                        .collect();
                    Message { role, content }
                })
                .collect();
            let repaired = repair(history.clone());
            if is_normal(&history) {
                passed += 1;
                assert_eq!(repaired, history, "passed the check but was repaired");
            }
            // Two calls with one id get two results, which the check (rightly
            // cautious) sends to the repair again.
            let repeated_id = history.iter().any(|m| {
                let ids: Vec<_> = m.tool_uses().map(|u| u.id).collect();
                (1..ids.len()).any(|i| ids[..i].contains(&ids[i]))
            });
            if !repeated_id {
                assert!(is_normal(&repaired), "{history:?} -> {repaired:?}");
            }
            assert_eq!(normalize(history), repaired);
        }
        assert!(passed > 100, "too few normal histories generated: {passed}");
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

    #[test]
    fn a_greeting_before_the_first_user_message_is_left_out() {
        let greeting = Message::assistant(vec![ContentBlock::Text {
            text: "Hi, ask me about the project.".into(),
        }]);
        let question = Message::user_text("what is in it?");
        let out = normalize(vec![greeting, question.clone()]);
        assert_eq!(out, vec![question]);
    }
}
