//! An MCP server reached through a message channel instead of a process or
//! a URL: the client that started agentd (an Agent SDK app) hosts the
//! server in its own process, and each JSON-RPC message travels to it in a
//! control request. rmcp speaks over an in-memory pipe; a task on the other
//! end forwards each message and writes back the answers to requests.

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::mpsc;

type SendFn = dyn Fn(Value) -> BoxFuture<'static, Result<Value, String>> + Send + Sync;

/// The in-memory pipe's buffer (not a limit on a message's size).
const PIPE_BUFFER: usize = 1 << 20;

/// Sends one JSON-RPC message to the server and returns its answer (for a
/// notification, whatever acknowledgement the channel gives; it is dropped).
#[derive(Clone)]
pub struct McpChannel(Arc<SendFn>);

impl McpChannel {
    pub fn new(
        send: impl Fn(Value) -> BoxFuture<'static, Result<Value, String>> + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(send))
    }

    /// rmcp's end of a fresh pipe whose other end forwards to the channel.
    pub(crate) fn open(&self) -> (ReadHalf<DuplexStream>, WriteHalf<DuplexStream>) {
        let (ours, theirs) = tokio::io::duplex(PIPE_BUFFER);
        tokio::spawn(forward(self.clone(), ours));
        tokio::io::split(theirs)
    }
}

/// Reads rmcp's messages, one per line, sends each (concurrently: a slow
/// tool call must not hold up a `ping`), and writes back the answers to
/// requests. Ends when rmcp closes its end.
async fn forward(channel: McpChannel, pipe: DuplexStream) {
    let (read, mut write) = tokio::io::split(pipe);
    let (answers, mut to_write) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        while let Some(answer) = to_write.recv().await {
            let mut line = answer.to_string().into_bytes();
            line.push(b'\n');
            if write.write_all(&line).await.is_err() {
                break;
            }
        }
    });
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = message.get("id").cloned();
        let is_request = message.get("method").is_some() && id.is_some();
        let (channel, answers) = (channel.clone(), answers.clone());
        tokio::spawn(async move {
            let answer = (channel.0)(message).await;
            let Some(id) = id.filter(|_| is_request) else {
                return;
            };
            let _ = answers.send(response_to(id, answer));
        });
    }
    drop(answers);
    let _ = writer.await;
}

/// The answer to the request `id`, as rmcp must see it: a JSON-RPC
/// response with that id, whatever the channel gave back.
fn response_to(id: Value, answer: Result<Value, String>) -> Value {
    let error = |message: &str| serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}});
    match answer {
        Ok(mut response) if response.get("result").is_some() || response.get("error").is_some() => {
            response["jsonrpc"] = Value::from("2.0");
            response["id"] = id;
            response
        }
        Ok(_) => error("the server's answer was not a JSON-RPC response"),
        Err(message) => error(&message),
    }
}

impl fmt::Debug for McpChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("McpChannel")
    }
}

impl PartialEq for McpChannel {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for McpChannel {}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::response_to;

    #[test]
    fn answers_reach_rmcp_as_responses_to_the_request() {
        let id = json!(7);
        let fixed = response_to(id.clone(), Ok(json!({"id": 99, "result": {"tools": []}})));
        assert_eq!(
            fixed,
            json!({"jsonrpc": "2.0", "id": 7, "result": {"tools": []}})
        );
        let empty = response_to(id.clone(), Ok(json!({"jsonrpc": "2.0", "result": {}})));
        assert_eq!(empty["result"], json!({}));
        let garbage = response_to(id.clone(), Ok(json!({"hello": 1})));
        assert_eq!(garbage["error"]["code"], -32603);
        assert_eq!(garbage["id"], 7);
        let failed = response_to(id, Err("gone".into()));
        assert_eq!(failed["error"]["message"], "gone");
    }
}
