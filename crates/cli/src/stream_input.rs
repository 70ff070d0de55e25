//! `agentd run --input-format stream-json`: user messages on stdin, one JSON
//! object a line, in the shape the `claude` CLI reads (and the Agent SDKs
//! write): `{"type":"user","message":{"role":"user","content":…},
//! "session_id":…}`. Each message is one turn of the same session; its
//! content is checked as the HTTP API checks a message's (text, base64
//! images and documents), and its blocks are kept as sent.

use agentd_server::content::content_without_workspace;
use agentd_server::registry::TurnKind;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};

/// Where `agentd run` takes its turns' messages from.
pub enum TurnInput {
    /// The prompt argument (with `--image` files): one turn.
    Prompt(Option<TurnKind>),
    /// stdin's lines, read as they arrive (a client may wait for a turn's
    /// `turn.finished` before writing the next message).
    Lines {
        lines: Lines<BufReader<Stdin>>,
        /// 1-based number of the last line read, for messages.
        number: usize,
    },
}

impl TurnInput {
    pub fn prompt(prompt: TurnKind) -> Self {
        TurnInput::Prompt(Some(prompt))
    }

    pub fn stdin() -> Self {
        TurnInput::Lines {
            lines: BufReader::new(tokio::io::stdin()).lines(),
            number: 0,
        }
    }

    /// The next message's turn; `None` at the end of the input. Blank lines
    /// are skipped; a line that is not a usable user message is an error
    /// naming the line.
    pub async fn next(&mut self) -> Result<Option<TurnKind>, String> {
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
                return user_message(&line)
                    .map(Some)
                    .map_err(|err| format!("stdin line {number}: {err}"));
            },
        }
    }
}

/// The turn of one `{"type":"user",…}` line. `session_id` and
/// `parent_tool_use_id` are accepted and not used: the session is the run's.
pub fn user_message(line: &str) -> Result<TurnKind, String> {
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
    let content = message
        .get("content")
        .cloned()
        .ok_or("the message needs a \"content\": a string or an array of blocks")?;
    let blocks = content_without_workspace(content).map_err(|err| err.to_string())?;
    Ok(TurnKind::from_blocks(blocks, None))
}

#[cfg(test)]
mod tests {
    use agentd_protocol::{ContentBlock, Message};

    use super::{TurnKind, user_message};

    #[test]
    fn the_sdks_shapes_are_read_and_blocks_kept() {
        let plain = r#"{"type":"user","message":{"role":"user","content":"hi"},"parent_tool_use_id":null,"session_id":"default"}"#;
        assert_eq!(
            user_message(plain).unwrap().message(),
            Message::user_text("hi")
        );
        let blocks = r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}"#;
        let text = |t: &str| ContentBlock::Text { text: t.into() };
        assert_eq!(
            user_message(blocks).unwrap(),
            TurnKind::from_blocks(vec![text("a"), text("b")], None)
        );
        let png = r#"{"type":"user","message":{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}}"#;
        let content = user_message(png).unwrap().message().content;
        assert_eq!(
            content,
            vec![ContentBlock::base64_image(
                "image/png",
                "iVBORw0KGgo=".into()
            )]
        );
    }

    #[test]
    fn what_is_not_a_usable_user_message_is_refused_with_a_reason() {
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
                "content must not be empty",
            ),
            (
                r#"{"type":"user","message":{"role":"user","content":[{"type":"image","source":{}}]}}"#,
                "content[0] is not a valid block",
            ),
            (
                r#"{"type":"user","message":{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"iVBORw0KGgo="}}]}}"#,
                "content[0]: the data is not image/jpeg",
            ),
            (
                r#"{"type":"user","message":{"role":"user","content":[{"type":"image","source":{"type":"file","path":"a.png"}}]}}"#,
                "send the image as base64",
            ),
        ] {
            let err = user_message(line).unwrap_err();
            assert!(err.contains(reason), "{line}: {err}");
        }
    }
}
