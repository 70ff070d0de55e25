//! `agentd acp`: the Agent Client Protocol (JSON-RPC over stdio) for
//! editors such as Zed.
//!
//! A thin layer over agentd's HTTP API, as `agentd chat` is: a remote
//! `agentd serve` (`--server URL`), or this machine's store through a server
//! embedded in this process. Sessions, events and approvals live in agentd's
//! store; this process keeps nothing but the connection.
//!
//! Modes and the model: see [`modes`].
//!
//! agentd performs file edits and commands itself, in its sandbox and the
//! session's workspace, never through the editor's `fs`/`terminal`
//! capabilities: the sandbox must confine every command, and agentd's
//! checkpoints (rewind) must see every change.

mod modes;
mod prompt;
mod tools;
mod updates;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, Implementation, InitializeRequest, InitializeResponse,
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse,
    PromptCapabilities, PromptRequest, PromptResponse, SessionNotification,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Stdio};
use agentd_policy::permissions::PermissionMode;
use agentd_protocol::Message;
use agentd_server::config::Config;
use agentd_server::session::SessionService;
use serde_json::Value;

use crate::SessionFlags;
use crate::chat::api::{Api, ApiError};
use crate::chat::connect;
use crate::exit::{self, Failure, failed, usage};

#[derive(Debug, clap::Args)]
pub struct AcpArgs {
    #[command(flatten)]
    session: SessionFlags,
    /// Work on this agentd server instead of this machine's store; the
    /// token comes from `AGENTD_TOKEN`, else `~/.config/agentd/token`.
    #[arg(long, env = "AGENTD_SERVER", value_name = "URL")]
    server: Option<String>,
}

/// Where the sessions are, shared by the connection's handlers.
pub struct Acp {
    api: Api,
    /// The local store's service (none with `--server`).
    local: Option<SessionService>,
    flags: SessionFlags,
    /// The mode the editor selected per session (`session/set_mode`): the
    /// client's choice, sent with each prompt, gone with this process.
    modes: Mutex<HashMap<String, PermissionMode>>,
}

pub async fn run(args: AcpArgs, config: Config, data_dir: PathBuf) -> u8 {
    match serve(args, config, data_dir).await {
        Ok(()) => exit::OK,
        Err(Failure(code, message)) => exit::report(code, message),
    }
}

async fn serve(args: AcpArgs, config: Config, data_dir: PathBuf) -> Result<(), Failure> {
    let flags = &args.session;
    if flags.resume.is_some() || flags.continue_latest || flags.cwd.is_some() {
        return Err(usage(
            "agentd acp takes its sessions and directories from the editor: \
             drop --resume, --continue and --cwd",
        ));
    }
    let (api, local, _socket_dir) = match &args.server {
        Some(url) => {
            if flags.mode().is_some()
                || !flags.allow_rules().is_empty()
                || !flags.deny_rules().is_empty()
            {
                return Err(usage(
                    "with --server, the server's profile sets the permissions: \
                     drop --permission-mode and the allow/deny rules (or choose a --profile)",
                ));
            }
            let api = Api::remote(url, connect::token()).map_err(usage)?;
            (api, None, None)
        }
        None => {
            let config = connect::apply_flags(flags, config);
            let service = crate::run::open_service(config, data_dir).await?;
            let (api, socket_dir) = connect::embedded(&service)?;
            (api, Some(service), Some(socket_dir))
        }
    };
    let acp = Arc::new(Acp {
        api,
        local,
        flags: args.session,
        modes: Mutex::default(),
    });
    let served = connection(acp.clone()).await;
    if let Some(service) = &acp.local {
        crate::run::shutdown(service).await;
    }
    served.map_err(|err| failed(format!("the ACP connection failed: {err}")))
}

/// The handlers, on stdin/stdout until the editor closes them.
async fn connection(acp: Arc<Acp>) -> Result<(), agent_client_protocol::Error> {
    let (on_new, on_load, on_prompt) = (acp.clone(), acp.clone(), acp.clone());
    let (on_mode, on_option, on_cancel) = (acp.clone(), acp.clone(), acp);
    Agent
        .v1()
        .name("agentd")
        .on_receive_request(
            async |request: InitializeRequest,
                   responder: Responder<InitializeResponse>,
                   _connection: ConnectionTo<Client>| {
                responder.respond(initialize(request))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest,
                        responder: Responder<NewSessionResponse>,
                        _connection: ConnectionTo<Client>| {
                let created = async {
                    let id = on_new.new_session(&request).await?;
                    let choices = on_new.choices(&id).await?;
                    Ok(NewSessionResponse::new(id)
                        .modes(choices.modes)
                        .config_options(choices.options))
                };
                match created.await {
                    Ok(response) => responder.respond(response),
                    Err(err) => responder.respond_with_error(err),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest,
                        responder: Responder<LoadSessionResponse>,
                        connection: ConnectionTo<Client>| {
                // Every replayed update goes out before the answer.
                let loaded = async {
                    on_load.load(&request, &connection).await?;
                    let choices = on_load.choices(&request.session_id.0).await?;
                    Ok(LoadSessionResponse::new()
                        .modes(choices.modes)
                        .config_options(choices.options))
                };
                match loaded.await {
                    Ok(response) => responder.respond(response),
                    Err(err) => responder.respond_with_error(err),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest,
                        responder: Responder<PromptResponse>,
                        connection: ConnectionTo<Client>| {
                // Off the dispatch loop: `session/cancel` and the answers to
                // permission requests must get through while the turn runs.
                let acp = on_prompt.clone();
                connection.clone().spawn(async move {
                    match acp.prompt(request, &connection).await {
                        Ok(done) => responder.respond(done),
                        Err(err) => responder.respond_with_error(err),
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest,
                        responder: Responder<SetSessionModeResponse>,
                        connection: ConnectionTo<Client>| {
                match on_mode.set_mode(&request, &connection).await {
                    Ok(()) => responder.respond(SetSessionModeResponse::new()),
                    Err(err) => responder.respond_with_error(err),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionConfigOptionRequest,
                        responder: Responder<SetSessionConfigOptionResponse>,
                        _connection: ConnectionTo<Client>| {
                match on_option.set_option(&request).await {
                    Ok(options) => responder.respond(SetSessionConfigOptionResponse::new(options)),
                    Err(err) => responder.respond_with_error(err),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _connection: ConnectionTo<Client>| {
                on_cancel.cancel(&notification.session_id.0).await;
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await
}

/// What agentd offers: sessions to load again, prompts with images and
/// embedded resources; no sign-in step (a local store needs none; for
/// `--server` the token is given as `AGENTD_TOKEN` or the login file).
fn initialize(request: InitializeRequest) -> InitializeResponse {
    let prompts = PromptCapabilities::new().image(true).embedded_context(true);
    InitializeResponse::new(request.protocol_version)
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(prompts),
        )
        .auth_methods(Vec::new())
        .agent_info(Implementation::new("agentd", env!("CARGO_PKG_VERSION")))
}

impl Acp {
    /// A new agentd session: locally on the editor's `cwd` (checked as
    /// `agentd run` checks its directory), on a server in a workspace of
    /// the server's (the editor's directory is not the server's).
    async fn new_session(
        &self,
        request: &NewSessionRequest,
    ) -> Result<String, agent_client_protocol::Error> {
        if !request.mcp_servers.is_empty() {
            // agentd's API takes no per-session MCP servers: the operator
            // configures them in the profile. Said, not silently dropped.
            tracing::warn!(
                count = request.mcp_servers.len(),
                "the editor's MCP servers are not used: agentd's profiles configure MCP servers"
            );
        }
        let view = match &self.local {
            Some(service) => {
                let record = crate::run::create_checked(&self.flags, service, &request.cwd)
                    .await
                    .map_err(|Failure(_, message)| invalid(message))?;
                return Ok(record.id);
            }
            None => self
                .api
                .create_session(&self.flags.profile, self.flags.model.as_deref())
                .await
                .map_err(api_error)?,
        };
        view["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| agent_client_protocol::Error::internal_error().data("no session id"))
    }

    /// Replay a stored session's transcript as `session/update`s.
    async fn load(
        &self,
        request: &LoadSessionRequest,
        connection: &ConnectionTo<Client>,
    ) -> Result<(), agent_client_protocol::Error> {
        let session = request.session_id.0.to_string();
        let path = format!("/v1/sessions/{session}/messages");
        let transcript = self.api.get(&path).await.map_err(api_error)?;
        let messages: Vec<Message> = transcript["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|stored: &Value| serde_json::from_value(stored["message"].clone()).ok())
            .collect();
        let workspace = self.workspace_of(&session).await;
        for update in updates::replay(&messages, workspace.as_deref()) {
            connection
                .send_notification(SessionNotification::new(request.session_id.clone(), update))?;
        }
        Ok(())
    }

    async fn workspace_of(&self, session: &str) -> Option<PathBuf> {
        let service = self.local.as_ref()?;
        let record = service.owned(crate::run::LOCAL_USER, session).await.ok()?;
        Some(PathBuf::from(record.workspace))
    }
}

fn invalid(message: String) -> agent_client_protocol::Error {
    agent_client_protocol::Error::invalid_params().data(message)
}

/// agentd's answer as a JSON-RPC error: what the user should read.
fn api_error(err: ApiError) -> agent_client_protocol::Error {
    let error = match err.status {
        Some(status) if status.is_client_error() => agent_client_protocol::Error::invalid_params(),
        _ => agent_client_protocol::Error::internal_error(),
    };
    error.data(err.to_string())
}
