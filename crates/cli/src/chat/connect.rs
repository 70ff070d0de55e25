//! Where `agentd chat` talks: a server (`--server URL`, with a token), or
//! this machine's own store through an agentd server embedded in this
//! process. Both are the same HTTP API to the rest of the chat.
//!
//! The embedded server listens on a unix socket in a directory only this
//! user can enter (not on a TCP port another local user could reach), as
//! `auth = "none"`: every request is the local user's, as in `agentd run`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agentd_server::config::Config;
use agentd_server::http::auth::Auth;
use agentd_server::paths::Connections;
use agentd_server::session::SessionService;
use serde_json::Value;
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;

use super::ChatArgs;
use super::api::Api;
use crate::SessionFlags;
use crate::exit::{Failure, failed, usage};

/// What only one side can do.
pub enum Backend {
    /// The embedded server, and what makes new sessions on the workspace.
    Local {
        service: SessionService,
        workspace: PathBuf,
        /// Holds the socket; removed when the chat ends.
        _socket_dir: TempDir,
    },
    Remote,
}

pub struct Connected {
    pub api: Api,
    pub session: Value,
    pub backend: Backend,
}

pub async fn connect(
    args: &ChatArgs,
    config: Config,
    data_dir: PathBuf,
) -> Result<Connected, Failure> {
    match &args.server {
        Some(url) => remote(url, &args.session).await,
        None => local(&args.session, config, data_dir).await,
    }
}

async fn remote(url: &str, flags: &SessionFlags) -> Result<Connected, Failure> {
    if flags.mode().is_some()
        || !flags.allow_rules().is_empty()
        || !flags.deny_rules().is_empty()
        || flags.cwd.is_some()
    {
        return Err(usage(
            "with --server, the server's profile sets the permissions and the workspace: \
             drop --permission-mode, --allow, --allowedTools, --disallowedTools and --cwd \
             (or choose a --profile)",
        ));
    }
    let api = Api::remote(url, token()).map_err(usage)?;
    let session = match (&flags.resume, flags.continue_latest) {
        (Some(id), _) => api.session(id).await.map_err(usage)?,
        (None, true) => {
            let list = api
                .get("/v1/sessions?limit=1&sort=created")
                .await
                .map_err(usage)?;
            list["sessions"]
                .get(0)
                .cloned()
                .ok_or_else(|| usage("no session to continue; start one without --continue"))?
        }
        (None, false) => api
            .create_session(&flags.profile, flags.model.as_deref())
            .await
            .map_err(usage)?,
    };
    Ok(Connected {
        api,
        session,
        backend: Backend::Remote,
    })
}

/// The token for `--server`: `AGENTD_TOKEN`, else the login file.
pub fn token() -> Option<String> {
    let from_env = std::env::var("AGENTD_TOKEN").ok();
    let from_file = || std::fs::read_to_string(login_file()?).ok();
    from_env
        .or_else(from_file)
        .map(|token| token.trim().to_string())
        .filter(|token| !token.is_empty())
}

/// `$XDG_CONFIG_HOME/agentd/token`, else `~/.config/agentd/token`.
pub fn login_file() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".config")))?;
    Some(config.join("agentd").join("token"))
}

async fn local(
    flags: &SessionFlags,
    config: Config,
    data_dir: PathBuf,
) -> Result<Connected, Failure> {
    let config = apply_flags(flags, config);
    let (service, record) =
        crate::run::open_local(flags, config, data_dir, Connections::One).await?;
    let (api, socket_dir) = embedded(&service)?;
    let session = api.session(&record.id).await.map_err(failed)?;
    Ok(Connected {
        api,
        session,
        backend: Backend::Local {
            service,
            workspace: PathBuf::from(record.workspace),
            _socket_dir: socket_dir,
        },
    })
}

/// The permission flags of a local client, written into every profile of
/// the configuration its embedded server runs with.
pub fn apply_flags(flags: &SessionFlags, mut config: Config) -> Config {
    // Turns run on the server, which takes no per-turn permission flags:
    // the person at this terminal owns the configuration, so the flags go
    // into it (every profile: a resumed session keeps its own).
    let (allow, deny) = (flags.allow_rules(), flags.deny_rules());
    // Each once: rules added twice would show twice.
    let mut names: BTreeSet<String> = config.profiles.keys().cloned().collect();
    names.insert(flags.profile.clone());
    for name in names {
        let Ok(mut profile) = config.profile(&name) else {
            continue;
        };
        if let Some(mode) = flags.mode() {
            profile.mode = mode;
        }
        profile.allow.extend(allow.iter().cloned());
        profile.deny.extend(deny.iter().cloned());
        config.profiles.insert(name, profile);
    }
    config
}

/// An agentd server for `service`, embedded in this process on a unix
/// socket in a directory only this user can enter; the API client for it
/// and the directory (the socket goes with it).
pub fn embedded(service: &SessionService) -> Result<(Api, TempDir), Failure> {
    let socket_dir = tempfile::Builder::new()
        .prefix("agentd-chat-")
        .tempdir()
        .map_err(|err| failed(format!("cannot make the socket's directory: {err}")))?;
    let socket = socket_dir.path().join("api.sock");
    let listener = tokio::net::UnixListener::bind(&socket)
        .map_err(|err| failed(format!("cannot listen on {}: {err}", socket.display())))?;
    let auth = Auth::None {
        allowed_hosts: Vec::new(),
    };
    let app = agentd_server::http::app(service.registry().clone(), auth, CancellationToken::new());
    tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, app).await {
            tracing::error!(%err, "the embedded server stopped");
        }
    });
    let api = Api::unix(&socket).map_err(failed)?;
    Ok((api, socket_dir))
}

impl Backend {
    /// A new session like the current one (`/clear`): on the same workspace
    /// locally, a fresh one on the server.
    pub async fn new_session(
        &self,
        api: &Api,
        flags: &SessionFlags,
        profile: &str,
    ) -> Result<Value, String> {
        match self {
            Backend::Local {
                service, workspace, ..
            } => {
                let flags = SessionFlags {
                    profile: profile.to_string(),
                    ..flags.clone()
                };
                let record = crate::run::create_local(&flags, service, workspace)
                    .await
                    .map_err(|Failure(_, message)| message)?;
                api.session(&record.id).await.map_err(|e| e.to_string())
            }
            Backend::Remote => api
                .create_session(profile, flags.model.as_deref())
                .await
                .map_err(|e| e.to_string()),
        }
    }

    /// Stop what turns left running in this process.
    pub async fn close(self) {
        if let Backend::Local { service, .. } = self {
            crate::run::shutdown(&service).await;
        }
    }
}
