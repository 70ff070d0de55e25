//! `TodoWrite`: the agent's plan as a list with statuses, published as
//! `todo.updated` so clients can show it.

use agentd_protocol::{Event, Todo};
use agentd_tools::ToolResult;
use serde::Deserialize;
use serde_json::{Value, json};

use super::string;
use crate::context::TurnContext;
use crate::sink::SinkError;

pub(super) const DESCRIPTION: &str = "Create and update a structured task list for the current \
work. Use it for tasks with three or more steps: write the whole list each time, with exactly \
one item `in_progress` while you work on it, and mark items `completed` as soon as they are \
done. The user sees the list live.";

pub(super) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "description": "The updated todo list",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": string("What to do, in the imperative (\"Run the tests\")"),
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                        "activeForm": string("The same in the present continuous (\"Running the tests\")"),
                    },
                    "required": ["content", "status", "activeForm"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["todos"],
        "additionalProperties": false
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    todos: Vec<Todo>,
}

/// The list, or an error for the model naming what is wrong with it.
pub(crate) fn parse(input: &Value) -> Result<Vec<Todo>, String> {
    let Input { todos } = serde_json::from_value(input.clone())
        .map_err(|err| format!("Invalid TodoWrite input: {err}"))?;
    if let Some(n) = todos.iter().position(|t| t.content.trim().is_empty()) {
        return Err(format!(
            "Invalid TodoWrite input: todos[{n}].content is empty"
        ));
    }
    Ok(todos)
}

impl TurnContext<'_> {
    pub(crate) async fn todo_write(
        &self,
        call_id: &str,
        input: &Value,
    ) -> Result<ToolResult, SinkError> {
        let todos = match parse(input) {
            Ok(todos) => todos,
            Err(message) => return Ok(ToolResult::error(message)),
        };
        self.sink
            .emit(Event::TodoUpdated {
                call_id: call_id.to_string(),
                todos,
                parent_call_id: None,
            })
            .await?;
        Ok(ToolResult::ok(
            "Todos have been modified successfully. Keep using the todo list to track your \
             progress, and go on with the current task.",
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use agentd_protocol::TodoStatus;

    #[test]
    fn parses_claude_code_shape() {
        let todos = parse(&json!({"todos": [
            {"content": "Run tests", "status": "in_progress", "activeForm": "Running tests"},
            {"content": "Fix", "status": "pending", "activeForm": "Fixing"}
        ]}))
        .unwrap();
        assert_eq!(todos[0].status, TodoStatus::InProgress);
        assert_eq!(todos[1].active_form.as_deref(), Some("Fixing"));
    }

    #[test]
    fn rejects_bad_status_and_empty_content() {
        let bad = parse(&json!({"todos": [{"content": "x", "status": "doing"}]})).unwrap_err();
        assert!(bad.contains("doing"), "{bad}");
        let empty = parse(&json!({"todos": [{"content": " ", "status": "pending"}]})).unwrap_err();
        assert!(empty.contains("todos[0].content"), "{empty}");
        assert!(parse(&json!("not an object")).is_err());
    }
}
