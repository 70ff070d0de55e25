//! `agentd mcp`: agentd as an MCP server on stdin/stdout, for agents that
//! start MCP servers as commands (`claude mcp add agentd -- agentd mcp`).
//! On this machine's store, the tools call an agentd API built in this
//! process (as `auth = "none"`, like `agentd run`: the local user); with
//! `--server URL`, every message goes to that server's `/mcp` with the
//! token, so the remote server runs the tools under the token's user.

use std::path::PathBuf;

use agentd_server::config::Config;
use agentd_server::http::auth::Auth;
use agentd_server::mcp_server::AgentdMcp;
use agentd_server::paths::Connections;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport, Transport};
use rmcp::{RoleClient, RoleServer, ServiceExt};
use tokio_util::sync::CancellationToken;

use crate::exit::{self, Failure, failed, usage};

#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// Serve the tools of this agentd server (its `/mcp`, e.g.
    /// `https://agents.example.com`) instead of this machine's store; the
    /// token comes from `AGENTD_TOKEN`, else the file `~/.config/agentd/token`.
    #[arg(long, env = "AGENTD_SERVER", value_name = "URL")]
    server: Option<String>,
}

pub async fn run(args: McpArgs, config: Config, data_dir: PathBuf) -> u8 {
    let served = match args.server {
        Some(url) => bridge(&url).await,
        None => local(config, data_dir).await,
    };
    match served {
        Ok(()) => exit::OK,
        Err(Failure(code, message)) => exit::report(code, message),
    }
}

async fn local(config: Config, data_dir: PathBuf) -> Result<(), Failure> {
    let service = crate::service::open(config, data_dir, Connections::Pooled)
        .await
        .map_err(usage)?;
    let auth = Auth::None {
        allowed_hosts: Vec::new(),
    };
    let api = agentd_server::http::app(service.registry().clone(), auth, CancellationToken::new());
    let running = AgentdMcp::local(api)
        .serve((tokio::io::stdin(), tokio::io::stdout()))
        .await
        .map_err(|err| failed(format!("the MCP client did not start: {err}")))?;
    let _ = running.waiting().await;
    // Turns the client started and left running stop with this process.
    crate::run::shutdown(&service).await;
    Ok(())
}

/// Pass messages between stdin/stdout and the server's `/mcp` until
/// either side ends.
async fn bridge(url: &str) -> Result<(), Failure> {
    let token = crate::chat::token().ok_or_else(|| {
        usage("--server needs a token: set AGENTD_TOKEN (from `agentd tokens create`)")
    })?;
    let base = url::Url::parse(url).map_err(|err| usage(format!("--server {url:?}: {err}")))?;
    let endpoint = base
        .join("/mcp")
        .map_err(|err| usage(format!("--server {url:?}: {err}")))?;
    // rmcp's HTTP client uses rustls without a built-in provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config =
        StreamableHttpClientTransportConfig::with_uri(endpoint.as_str()).auth_header(token);
    let mut remote: StreamableHttpClientTransport<_> =
        StreamableHttpClientTransport::from_config(config);
    let mut local = IntoTransport::<RoleServer, std::io::Error, _>::into_transport((
        tokio::io::stdin(),
        tokio::io::stdout(),
    ));
    loop {
        tokio::select! {
            from_client = local.receive() => {
                let Some(message) = from_client else { break };
                Transport::<RoleClient>::send(&mut remote, message)
                    .await
                    .map_err(|err| failed(format!("{endpoint}: {err}")))?;
            }
            from_server = Transport::<RoleClient>::receive(&mut remote) => {
                let Some(message) = from_server else { break };
                local
                    .send(message)
                    .await
                    .map_err(|err| failed(format!("writing to stdout: {err}")))?;
            }
        }
    }
    let _ = Transport::<RoleClient>::close(&mut remote).await;
    Ok(())
}
