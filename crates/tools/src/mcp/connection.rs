//! One live MCP client session: a sandboxed child on stdio, or a streamable
//! HTTP session. Starting one covers spawn, `initialize` and `tools/list`.
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use agentd_sandbox::{Policy, Sandbox, SandboxedProcess};
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, Tool as ToolDef};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ServiceError, ServiceExt};
use tokio::time::Instant;

use super::{McpServerConfig, McpTransport, server_limits};

/// How long a closing connection waits for rmcp to wind down its transport.
const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// How long an error report waits for a dying server's exit status.
const EXIT_WAIT: Duration = Duration::from_millis(500);
/// Most stderr put into a message.
const STDERR_IN_MESSAGES: usize = 4000;

type Client = RunningService<RoleClient, ClientConfig>;

pub(crate) struct Connection {
    peer: Peer<RoleClient>,
    service: tokio::sync::Mutex<Option<Client>>,
    process: Mutex<Option<Arc<SandboxedProcess>>>,
}

impl Connection {
    /// Start the server, initialize it and list its tools, all within
    /// `config.startup_timeout`. Errors say why, with the stderr tail.
    pub(crate) async fn start(
        config: &McpServerConfig,
        policy: &Policy,
    ) -> Result<(Self, Vec<ToolDef>), String> {
        let deadline = Instant::now() + config.startup_timeout;
        let late = format!("did not start within {}", human(config.startup_timeout));
        let connection = match &config.transport {
            McpTransport::Stdio {
                command,
                args,
                env,
                read_only_paths,
                network,
            } => {
                let mut policy = policy.clone();
                policy.env.extend(env.clone());
                policy.secret_env.extend(config.secret_env.iter().cloned());
                policy
                    .read_only_paths
                    .extend(read_only_paths.iter().cloned());
                policy.network |= *network;
                // The start may wait at the workspace gate (for a command
                // started before `.git` existed): within the deadline too.
                let process = tokio::time::timeout_at(deadline, spawn(policy, command, args))
                    .await
                    .map_err(|_| {
                        format!("{late} (it waited for a command in the workspace to end)")
                    })??;
                start_stdio(process, deadline, &late).await?
            }
            McpTransport::Http { url, headers } => {
                let http = Http {
                    url,
                    headers,
                    egress: config.egress.as_ref(),
                };
                start_http(http, deadline, &late).await?
            }
            McpTransport::Channel(channel) => {
                let transport = channel.open();
                match tokio::time::timeout_at(deadline, client_config().serve(transport)).await {
                    Ok(Ok(service)) => Connection {
                        peer: service.peer().clone(),
                        service: tokio::sync::Mutex::new(Some(service)),
                        process: Mutex::new(None),
                    },
                    Ok(Err(err)) => return Err(format!("initialization failed: {err}")),
                    Err(_) => return Err(late),
                }
            }
        };
        match tokio::time::timeout_at(deadline, connection.list()).await {
            Ok(Ok(tools)) => Ok((connection, tools)),
            Ok(Err(err)) => Err(connection
                .failure(&format!("listing its tools failed: {err}"))
                .await),
            Err(_) => Err(format!("{late}{}", connection.stderr_note())),
        }
    }

    pub(crate) fn peer(&self) -> &Peer<RoleClient> {
        &self.peer
    }

    /// True once the transport has closed or the process has exited.
    pub(crate) fn is_closed(&self) -> bool {
        self.peer.is_transport_closed() || self.process().is_some_and(|p| p.has_exited())
    }

    /// `message` plus how the server ended and its stderr tail, if known.
    pub(crate) async fn failure(&self, message: &str) -> String {
        match self.process() {
            Some(process) => format!("{message}{}", exit_note(&process).await),
            None => message.to_string(),
        }
    }

    async fn list(&self) -> Result<Vec<ToolDef>, ServiceError> {
        self.peer.list_all_tools().await
    }

    /// The stderr tail, for a server that is still running.
    fn stderr_note(&self) -> String {
        self.process()
            .map(|process| stderr_note(&process))
            .unwrap_or_default()
    }

    fn process(&self) -> Option<Arc<SandboxedProcess>> {
        self.process.lock().ok().and_then(|process| process.clone())
    }

    /// End the session and stop the process: stdin closes first, so a
    /// well-behaved server exits by itself.
    pub(crate) async fn close(&self) {
        if let Some(mut service) = self.service.lock().await.take() {
            let _ = service.close_with_timeout(CLOSE_WAIT).await;
        }
        let process = self.process.lock().ok().and_then(|mut p| p.take());
        if let Some(process) = process {
            match Arc::try_unwrap(process) {
                Ok(process) => process.shutdown().await,
                // Someone is reading its stderr; dropping the last copy kills it.
                Err(shared) => drop(shared),
            }
        }
    }
}

async fn spawn(
    mut policy: Policy,
    command: &str,
    args: &[String],
) -> Result<SandboxedProcess, String> {
    policy.limits = server_limits(&policy.limits);
    let argv: Vec<String> = std::iter::once(command.to_string())
        .chain(args.iter().cloned())
        .collect();
    Sandbox
        .spawn(&policy, &argv)
        .await
        .map_err(|err| err.to_string())
}

async fn start_stdio(
    mut process: SandboxedProcess,
    deadline: Instant,
    late: &str,
) -> Result<Connection, String> {
    let (Some(stdout), Some(stdin)) = (process.take_stdout(), process.take_stdin()) else {
        return Err("the process has no pipes".to_string());
    };
    let handshake = tokio::time::timeout_at(deadline, client_config().serve((stdout, stdin)));
    let failure = match handshake.await {
        Ok(Ok(service)) => {
            // It answered from inside: its sandbox is set up.
            process.set_up();
            return Ok(Connection {
                peer: service.peer().clone(),
                service: tokio::sync::Mutex::new(Some(service)),
                process: Mutex::new(Some(Arc::new(process))),
            });
        }
        Ok(Err(err)) => format!("initialization failed: {err}"),
        // Its exit, if any, is ours (closing stdin): only stderr tells.
        Err(_) => return Err(format!("{late}{}", stderr_note(&process))),
    };
    Err(format!("{failure}{}", exit_note(&process).await))
}

/// Where an HTTP server is and how it is reached.
struct Http<'a> {
    url: &'a str,
    headers: &'a BTreeMap<String, String>,
    egress: Option<&'a Arc<crate::egress::EgressAllowlist>>,
}

async fn start_http(http: Http<'_>, deadline: Instant, late: &str) -> Result<Connection, String> {
    let Http {
        url,
        headers,
        egress,
    } = http;
    install_tls_provider();
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let parsed = HeaderName::from_bytes(name.as_bytes())
            .map_err(|err| format!("header name {name:?}: {err}"))
            .and_then(|name| {
                HeaderValue::from_str(value)
                    .map_err(|err| format!("header {name}: {err}"))
                    .map(|value| (name, value))
            });
        let (name, value) = parsed?;
        custom.insert(name, value);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    let transport = match egress {
        Some(list) => {
            let client = super::listed::client(list, url).await?;
            StreamableHttpClientTransport::with_client(client, config)
        }
        None => StreamableHttpClientTransport::from_config(config),
    };
    match tokio::time::timeout_at(deadline, client_config().serve(transport)).await {
        Ok(Ok(service)) => Ok(Connection {
            peer: service.peer().clone(),
            service: tokio::sync::Mutex::new(Some(service)),
            process: Mutex::new(None),
        }),
        Ok(Err(err)) => Err(format!("connecting to {url} failed: {err}")),
        Err(_) => Err(late.to_string()),
    }
}

fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("agentd", env!("CARGO_PKG_VERSION")),
    )
}

/// rmcp's reqwest is built without a bundled crypto provider; use ring,
/// which the workspace already builds. A provider someone else installed
/// first is kept.
pub(super) fn install_tls_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// How the process ended (waiting briefly for it) and the end of its stderr.
async fn exit_note(process: &SandboxedProcess) -> String {
    let _ = tokio::time::timeout(EXIT_WAIT, process.exited()).await;
    let note = match process.exit_status() {
        Some(status) => format!(" (the server exited: {status})"),
        None if process.has_exited() => " (the server exited)".to_string(),
        None => String::new(),
    };
    note + &stderr_note(process)
}

/// `; its stderr ends with: …`, or nothing when it wrote none.
fn stderr_note(process: &SandboxedProcess) -> String {
    let tail = process.stderr_tail();
    let tail = tail.trim_end();
    if tail.is_empty() {
        return String::new();
    }
    let start = tail
        .char_indices()
        .rev()
        .nth(STDERR_IN_MESSAGES - 1)
        .map_or(0, |(at, _)| at);
    format!("; its stderr ends with:\n{}", &tail[start..])
}

/// `1.5 s`, `30 s`, `250 ms`.
pub(crate) fn human(duration: Duration) -> String {
    let ms = duration.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}
