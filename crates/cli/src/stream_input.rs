//! `agentd run --input-format stream-json`: user messages on stdin, one JSON
//! object a line, in the shape the `claude` CLI reads (and the Agent SDKs
//! write): `{"type":"user","message":{"role":"user","content":…},
//! "session_id":…}`. Each message is one turn of the same session.

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};

/// Where `agentd run` takes its turns' messages from.
pub enum TurnInput {
    /// The prompt argument: one turn.
    Prompt(Option<String>),
    /// stdin's lines, read as they arrive (a client may wait for a turn's
    /// `turn.finished` before writing the next message).
    Lines {
        lines: Lines<BufReader<Stdin>>,
        /// 1-based number of the last line read, for messages.
        number: usize,
    },
}

impl TurnInput {
    pub fn prompt(prompt: String) -> Self {
        TurnInput::Prompt(Some(prompt))
    }

    pub fn stdin() -> Self {
        TurnInput::Lines {
            lines: BufReader::new(tokio::io::stdin()).lines(),
            number: 0,
        }
    }

    /// The next message's text; `None` at the end of the input. Blank lines
    /// are skipped; a line that is not a usable user message is an error
    /// naming the line.
    pub async fn next(&mut self) -> Result<Option<String>, String> {
        match self {
            TurnInput::Prompt(prompt) => Ok(prompt.take()),
            TurnInput::Lines { lines, number } => loop {
                let line = lines
                    .next_line()
                    .await
                    .map_err(|err| format!("cannot read stdin: {err}"))?;
                let Some(line) = line else {
                    return Ok(None);
                };
                *number += 1;
                if line.trim().is_empty() {
                    continue;
                }
                return user_message_text(&line)
                    .map(Some)
                    .map_err(|err| format!("stdin line {number}: {err}"));
            },
        }
    }
}

/// The text of one `{"type":"user",…}` line. `session_id` and
/// `parent_tool_use_id` are accepted and not used: the session is the run's.
pub fn user_message_text(line: &str) -> Result<String, String> {
    let value: Value =
        serde_json::from_str(line).map_err(|err| format!("not a JSON object ({err})"))?;
    let kind = value.get("type").and_then(Value::as_str);
    match kind {
        Some("user") => {}
        Some("control_request") => {
            return Err(
                "control requests are not supported; send {\"type\":\"user\",…} \
                        messages"
                    .into(),
            );
        }
        Some(other) => {
            return Err(format!(
                "type {other:?} is not supported; each line must be a \
                 {{\"type\":\"user\",\"message\":{{\"role\":\"user\",\"content\":…}}}} message"
            ));
        }
        None => {
            return Err(
                "no \"type\"; each line must be a {\"type\":\"user\",\"message\":{…}} message"
                    .into(),
            );
        }
    }
    let message = value
        .get("message")
        .filter(|m| m.is_object())
        .ok_or("a user line needs a \"message\" object")?;
    match message.get("role").and_then(Value::as_str) {
        Some("user") => {}
        other => {
            return Err(format!(
                "the message's role must be \"user\", not {other:?}"
            ));
        }
    }
    let text = match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks_text(blocks)?,
        _ => return Err("the message's \"content\" must be a string or an array of blocks".into()),
    };
    if text.trim().is_empty() {
        return Err("the message has no text".into());
    }
    Ok(text)
}

/// Text blocks, joined by blank lines. Images are refused for now: a turn
/// carries text only.
fn blocks_text(blocks: &[Value]) -> Result<String, String> {
    let mut texts = Vec::with_capacity(blocks.len());
    for (i, block) in blocks.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => match block.get("text").and_then(Value::as_str) {
                Some(text) => texts.push(text),
                None => return Err(format!("content block {i}: a text block needs \"text\"")),
            },
            Some("image") => {
                return Err(format!(
                    "content block {i}: image blocks are not supported yet; send text only"
                ));
            }
            other => {
                return Err(format!(
                    "content block {i}: type {other:?} is not supported; only text blocks"
                ));
            }
        }
    }
    Ok(texts.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::user_message_text;

    #[test]
    fn the_sdks_shapes_are_read() {
        let plain = r#"{"type":"user","message":{"role":"user","content":"hi"},"parent_tool_use_id":null,"session_id":"default"}"#;
        assert_eq!(user_message_text(plain).unwrap(), "hi");
        let blocks = r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}"#;
        assert_eq!(user_message_text(blocks).unwrap(), "a\n\nb");
    }

    #[test]
    fn what_is_not_a_text_user_message_is_refused_with_a_reason() {
        for (line, reason) in [
            ("hello", "not a JSON object"),
            (
                r#"{"type":"assistant","message":{}}"#,
                "\"assistant\" is not supported",
            ),
            (
                r#"{"type":"control_request","request":{}}"#,
                "control requests",
            ),
            (r#"{"type":"user"}"#, "\"message\" object"),
            (
                r#"{"type":"user","message":{"role":"assistant","content":"x"}}"#,
                "role",
            ),
            (
                r#"{"type":"user","message":{"role":"user","content":"  "}}"#,
                "no text",
            ),
            (
                r#"{"type":"user","message":{"role":"user","content":[{"type":"image","source":{}}]}}"#,
                "image blocks are not supported yet",
            ),
        ] {
            let err = user_message_text(line).unwrap_err();
            assert!(err.contains(reason), "{line}: {err}");
        }
    }
}
