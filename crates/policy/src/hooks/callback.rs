//! Hooks answered by the client's own code: an Agent SDK app registers
//! callbacks at `initialize`, and agentd asks them over the control
//! protocol. Their answer is a hook's JSON output, read by the same rules as
//! a command's stdout, so a callback that fails or times out denies a
//! `PreToolUse` call as a broken command would.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;

use super::run::{Ending, HookRun};

type CallbackFn = dyn Fn(Value) -> BoxFuture<'static, Result<Value, String>> + Send + Sync;

/// Asks the client: given the hook's input object, returns its JSON answer
/// or why there is none.
#[derive(Clone)]
pub struct HookCallback(Arc<CallbackFn>);

impl HookCallback {
    pub fn new(
        ask: impl Fn(Value) -> BoxFuture<'static, Result<Value, String>> + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(ask))
    }

    pub(crate) async fn run(&self, timeout: Duration, stdin: &[u8]) -> HookRun {
        let input = match serde_json::from_slice(stdin) {
            Ok(input) => input,
            Err(err) => return HookRun::failed(format!("its input is not JSON: {err}")),
        };
        let answer = match tokio::time::timeout(timeout, (self.0)(input)).await {
            Ok(answer) => answer,
            Err(_) => {
                return HookRun {
                    ending: Ending::TimedOut(timeout.as_secs()),
                    stdout: String::new(),
                    stderr: String::new(),
                    stdout_truncated: false,
                };
            }
        };
        match answer {
            Ok(output) => HookRun {
                ending: Ending::Exited(0),
                stdout: output.to_string(),
                stderr: String::new(),
                stdout_truncated: false,
            },
            Err(message) => HookRun::failed(format!("the client's callback failed: {message}")),
        }
    }
}

impl fmt::Debug for HookCallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HookCallback")
    }
}
