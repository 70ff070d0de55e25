//! agentd as an MCP server: `agentd mcp` (stdio) and `/mcp` on `agentd
//! serve` (streamable HTTP). One [`AgentdMcp`] serves both; each tool and
//! resource is a call of agentd's own HTTP API made in this process with
//! the caller's credentials ([`api`]), so the MCP side keeps no state: the
//! sessions, their events and approvals are the store's, as for every other
//! client. Over HTTP it runs stateless (no MCP session is kept between
//! requests); a tool call's progress goes out on its own response stream.

mod api;
mod resources;
mod tools;
mod turn;

use axum::Router;
use axum::extract::Request;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tower::ServiceExt;

use api::{Api, Refused};
use turn::Follow;

/// Whose credentials the API calls carry.
#[derive(Clone)]
enum Caller {
    /// Each HTTP request's own headers (rmcp hands them to the handler).
    FromRequest,
    /// `agentd mcp` on this machine's store: the API runs as `auth = "none"`.
    Local,
}

/// The MCP server over agentd's API routes.
#[derive(Clone)]
pub struct AgentdMcp {
    router: Router,
    caller: Caller,
}

impl AgentdMcp {
    /// For `agentd mcp` on stdio: `router` is an API answering as `auth = "none"`.
    pub fn local(router: Router) -> Self {
        AgentdMcp {
            router,
            caller: Caller::Local,
        }
    }

    fn api(&self, context: &RequestContext<RoleServer>) -> Result<Api, ErrorData> {
        match self.caller {
            Caller::Local => Ok(Api::new(self.router.clone(), &HeaderMap::new())),
            Caller::FromRequest => {
                let parts = context
                    .extensions
                    .get::<axum::http::request::Parts>()
                    // Never served without the request that authenticates it.
                    .ok_or_else(|| ErrorData::internal_error("no HTTP request", None))?;
                Ok(Api::new(self.router.clone(), &parts.headers))
            }
        }
    }
}

/// `args` as the tool's argument type; a clear error when they do not fit.
fn parse<T: DeserializeOwned>(request: &CallToolRequestParams) -> Result<T, ErrorData> {
    let args = Value::Object(request.arguments.clone().unwrap_or_default());
    serde_json::from_value(args).map_err(|err| {
        ErrorData::invalid_params(format!("{} arguments: {err}", request.name), None)
    })
}

/// A tool's answer: its JSON, or the API's refusal as a tool error the
/// calling model can read.
fn answer(result: Result<Value, Refused>) -> CallToolResult {
    match result {
        Ok(value) => CallToolResult::structured(value),
        Err(refused) => CallToolResult::error(vec![ContentBlock::text(refused.to_string())]),
    }
}

impl ServerHandler for AgentdMcp {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("agentd", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Run sandboxed coding agents: `run` starts one on a prompt and returns its \
                 result; `create_session` and `send_message` hold a conversation. Sessions' \
                 transcripts and files are resources (agentd://sessions/{id}/…).",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list()))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        tools::list().into_iter().find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let api = self.api(&context)?;
        let follow = Follow::new(context.peer.clone(), context.meta.get_progress_token());
        let result = match request.name.as_ref() {
            "create_session" => tools::create_session(&api, parse(&request)?).await,
            "send_message" => tools::send_message(&api, parse(&request)?, follow).await,
            "run" => tools::run(&api, parse(&request)?, follow).await,
            "list_sessions" => tools::list_sessions(&api, parse(&request)?).await,
            "get_session" => tools::get_session(&api, parse(&request)?).await,
            "answer_approval" => tools::answer_approval(&api, parse(&request)?, follow).await,
            "cancel" => tools::cancel(&api, parse(&request)?).await,
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool named {other:?}"),
                    None,
                ));
            }
        };
        Ok(answer(result).into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let api = self.api(&context)?;
        resources::list(&api).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let api = self.api(&context)?;
        Ok(resources::read(&api, &request.uri).await?.into())
    }
}

/// The `/mcp` route's service: `api` is the API's routes with their state.
/// Every request is authenticated as the API authenticates (401 like any
/// route) before rmcp sees it; the tools then call the API with its headers.
pub fn http_service(
    api: Router,
    authenticate: impl AsyncAuth,
) -> impl Fn(Request) -> futures::future::BoxFuture<'static, Response> + Clone + Send + Sync + 'static
{
    let mcp = AgentdMcp {
        router: api,
        caller: Caller::FromRequest,
    };
    // agentd's own middleware checks `Host` (for `auth = "none"`) and the
    // caller; rmcp's loopback-only host list would refuse a public server.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_legacy_session_mode(false)
        .with_sse_keep_alive(Some(std::time::Duration::from_secs(15)));
    let service = StreamableHttpService::new(
        move || Ok(mcp.clone()),
        std::sync::Arc::new(NeverSessionManager::default()),
        config,
    );
    move |request: Request| {
        let (service, authenticate) = (service.clone(), authenticate.clone());
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            if let Err(refused) = authenticate.check(&parts).await {
                return refused;
            }
            let request = Request::from_parts(parts, body);
            match service.oneshot(request).await {
                Ok(response) => response.map(axum::body::Body::new).into_response(),
                Err(never) => match never {},
            }
        })
    }
}

/// How `/mcp` authenticates a request (the API's own check).
pub trait AsyncAuth: Clone + Send + Sync + 'static {
    fn check(
        &self,
        parts: &axum::http::request::Parts,
    ) -> impl std::future::Future<Output = Result<(), Response>> + Send;
}
