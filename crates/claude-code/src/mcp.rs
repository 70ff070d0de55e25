//! agentd's tools served to the CLI as the MCP server `agentd` (its tools are
//! `mcp__agentd__Bash`, …): a loopback streamable-HTTP endpoint, JSON
//! responses only, behind a random secret. Each `tools/call` runs through
//! [`Agent::run_external_call`]: the same rules, approver, sandbox, PathGuard,
//! hooks and checkpoints as a native turn.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use agentd_engine::{Agent, ExternalTurn, TurnSink};
use agentd_model::ToolSpec;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The running turn the CLI's tool calls belong to.
#[derive(Clone)]
pub struct TurnScope {
    pub agent: Arc<Agent>,
    pub sink: Arc<dyn TurnSink>,
    pub turn_id: String,
    pub cancel: CancellationToken,
    pub external: ExternalTurn,
}

/// Tool calls the CLI announced (`tool_use` blocks), not yet claimed by an
/// MCP call: `(call_id, name, input)`.
pub type Announced = Arc<Mutex<Vec<(String, String, Value)>>>;

struct McpState {
    secret: String,
    tools: Mutex<Vec<ToolSpec>>,
    scope: Mutex<Option<TurnScope>>,
    announced: Announced,
}

/// One session's endpoint; dropping it stops the listener.
pub struct McpEndpoint {
    state: Arc<McpState>,
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for McpEndpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl McpEndpoint {
    pub async fn start(announced: Announced) -> std::io::Result<Self> {
        let state = Arc::new(McpState {
            secret: format!("{:032x}", rand::random::<u128>()),
            tools: Mutex::default(),
            scope: Mutex::default(),
            announced,
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let app = axum::Router::new()
            .route("/mcp", post(rpc).get(no_stream).delete(no_stream))
            .with_state(state.clone());
        let task = tokio::spawn(async move {
            if let Err(err) = axum::serve(listener, app).await {
                tracing::warn!(%err, "agentd MCP endpoint stopped");
            }
        });
        Ok(Self { state, addr, task })
    }

    /// The `--mcp-config` value pointing the CLI here.
    pub fn config(&self) -> Value {
        json!({"mcpServers": {"agentd": {
            "type": "http",
            "url": format!("http://{}/mcp", self.addr),
            "headers": {"Authorization": format!("Bearer {}", self.state.secret)},
        }}})
    }

    pub fn set_tools(&self, tools: Vec<ToolSpec>) {
        if let Ok(mut current) = self.state.tools.lock() {
            *current = tools;
        }
    }

    pub fn set_scope(&self, scope: Option<TurnScope>) {
        if let Ok(mut current) = self.state.scope.lock() {
            *current = scope;
        }
    }
}

async fn no_stream() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

fn authorized(state: &McpState, headers: &HeaderMap) -> bool {
    let expected = format!("Bearer {}", state.secret);
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|got| {
            use subtle::ConstantTimeEq;
            bool::from(got.as_bytes().ct_eq(expected.as_bytes()))
        })
}

async fn rpc(
    State(state): State<Arc<McpState>>,
    headers: HeaderMap,
    body: Json<Value>,
) -> Response {
    if !authorized(&state, &headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let request = body.0;
    let Some(id) = request.get("id").cloned() else {
        // A notification (`notifications/initialized`, cancellations).
        return StatusCode::ACCEPTED.into_response();
    };
    let method = request["method"].as_str().unwrap_or_default();
    let params = request.get("params").cloned().unwrap_or(Value::Null);
    let result = match method {
        "initialize" => Ok(json!({
            "protocolVersion": params["protocolVersion"].as_str().unwrap_or("2025-03-26"),
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": {"name": "agentd", "version": env!("CARGO_PKG_VERSION")},
        })),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(list_tools(&state)),
        "tools/call" => Ok(call_tool(&state, &params).await),
        other => Err(json!({"code": -32601, "message": format!("unknown method {other}")})),
    };
    let body = match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
    };
    Json(body).into_response()
}

fn list_tools(state: &McpState) -> Value {
    let tools = state.tools.lock().map(|t| t.clone()).unwrap_or_default();
    let tools: Vec<Value> = tools
        .into_iter()
        .map(|spec| {
            json!({
                "name": spec.name,
                "description": spec.description,
                "inputSchema": spec.input_schema,
            })
        })
        .collect();
    json!({ "tools": tools })
}

fn tool_result(text: String, is_error: bool) -> Value {
    tool_result_with_images(text, &[], is_error)
}

/// A tools/call result: the text, then each image (an Anthropic base64
/// `source`, as `ToolResult.images` holds them) as an MCP image item, which
/// the CLI shows the model as an image.
fn tool_result_with_images(text: String, images: &[Value], is_error: bool) -> Value {
    let mut content = vec![json!({"type": "text", "text": text})];
    content.extend(images.iter().filter_map(|source| {
        let data = source.get("data")?.as_str()?;
        let mime_type = source.get("media_type")?.as_str()?;
        Some(json!({"type": "image", "data": data, "mimeType": mime_type}))
    }));
    json!({"content": content, "isError": is_error})
}

async fn call_tool(state: &McpState, params: &Value) -> Value {
    let name = params["name"].as_str().unwrap_or_default().to_string();
    let input = params
        .get("arguments")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let scope = state.scope.lock().ok().and_then(|s| s.clone());
    let Some(scope) = scope else {
        return tool_result(
            "No agentd turn is running; the call did not run.".into(),
            true,
        );
    };
    let call_id = claim(state, params, &name, &input).await;
    match scope
        .agent
        .run_external_call(
            &scope.external,
            scope.sink.as_ref(),
            &scope.turn_id,
            (&call_id, &name, input),
            scope.cancel.clone(),
        )
        .await
    {
        Ok(result) => tool_result_with_images(result.content, &result.images, result.is_error),
        Err(err) => {
            scope.cancel.cancel();
            tool_result(format!("agentd could not record the call: {err}"), true)
        }
    }
}

/// The `tool_use` id of this call: from the CLI's `_meta` when it sends one,
/// else the oldest announced call with the same name and input. Waits a
/// little for the announcement (the CLI may start a tool before agentd has
/// read the assistant message), so `tool.started` comes first.
async fn claim(state: &McpState, params: &Value, name: &str, input: &Value) -> String {
    let from_meta = params["_meta"]["claudecode/toolUseId"]
        .as_str()
        .map(str::to_string);
    let deadline = tokio::time::Instant::now() + ANNOUNCE_WAIT;
    loop {
        if let Ok(mut announced) = state.announced.lock() {
            let position = match &from_meta {
                Some(id) => announced.iter().position(|(call, _, _)| call == id),
                None => announced
                    .iter()
                    .position(|(_, n, i)| n == name && i == input),
            };
            if let Some(index) = position {
                return announced.remove(index).0;
            }
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(tool = name, "an MCP call the CLI did not announce");
            return from_meta.unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

const ANNOUNCE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
