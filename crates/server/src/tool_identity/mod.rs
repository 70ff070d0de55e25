//! Identity for tools: `{user}`, `{session}` and `{user_token}` in the
//! `env` of stdio MCP servers and the `headers` of HTTP ones (and, through
//! [`expand_env`], any other tool's environment), so a platform's tools know
//! on whose behalf they act.
//!
//! The placeholders are exact: `{user}` is the session owner's name,
//! `{session}` the session id, `{user_token}` a short-lived JWT agentd signs
//! (see [`keys`]). `{{name}}` is the literal text `{name}`; `${...}` (shell
//! style) and any other brace are left as written; any other `{name}` is
//! refused when the config is loaded (a typo must not reach a tool as text).

mod keys;
mod template;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

pub use keys::{AUDIENCE, Jwk, Jwks, ToolKeys};
pub(crate) use template::check_template;
use template::{Piece, parse};

use crate::runtime::Runtime;

/// Why a value could not be filled in.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("{0}")]
    Template(String),
    #[error("signing a token for tools: {0}")]
    Store(#[from] agentd_store::StoreError),
    #[error("signing a token for tools: {0}")]
    Signing(String),
}

/// Whether `value` holds a placeholder agentd fills in (a value that does
/// not parse counts as one: filling it in reports the error).
pub fn has_placeholder(value: &str) -> bool {
    parse(value).map_or(true, |pieces| {
        pieces.iter().any(|piece| !matches!(piece, Piece::Text(_)))
    })
}

/// Fills the placeholders of one session's values. A `{user_token}` is
/// minted once, on first need, and shared by every value it fills.
pub struct Filler<'a> {
    runtime: &'a Runtime,
    owner: &'a str,
    session_id: &'a str,
    token: Option<(String, DateTime<Utc>)>,
}

impl<'a> Filler<'a> {
    pub fn new(runtime: &'a Runtime, owner: &'a str, session_id: &'a str) -> Self {
        Self {
            runtime,
            owner,
            session_id,
            token: None,
        }
    }

    /// `value` with its placeholders filled in.
    pub async fn fill(&mut self, value: &str) -> Result<String, IdentityError> {
        let mut out = String::with_capacity(value.len());
        for piece in parse(value).map_err(IdentityError::Template)? {
            match piece {
                Piece::Text(text) => out.push_str(&text),
                Piece::User => out.push_str(self.owner),
                Piece::Session => out.push_str(self.session_id),
                Piece::UserToken => out.push_str(&self.token().await?),
            }
        }
        Ok(out)
    }

    /// Every value of `values` filled in.
    pub async fn fill_all(
        &mut self,
        values: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, IdentityError> {
        let mut out = BTreeMap::new();
        for (key, value) in values {
            out.insert(key.clone(), self.fill(value).await?);
        }
        Ok(out)
    }

    /// When the token filled in expires; `None` when none was.
    pub fn token_expiry(&self) -> Option<DateTime<Utc>> {
        self.token.as_ref().map(|(_, expiry)| *expiry)
    }

    async fn token(&mut self) -> Result<String, IdentityError> {
        if let Some((token, _)) = &self.token {
            return Ok(token.clone());
        }
        let runtime = self.runtime;
        let minted = runtime
            .tool_keys
            .mint(
                runtime.store.as_ref(),
                &runtime.config.identity,
                self.owner,
                self.session_id,
            )
            .await?;
        self.token = Some(minted.clone());
        Ok(minted.0)
    }
}

/// `env` with `{user}`, `{session}` and `{user_token}` filled in for
/// `owner`'s session `session_id` (one token for all of it).
pub async fn expand_env(
    runtime: &Runtime,
    owner: &str,
    session_id: &str,
    env: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, IdentityError> {
    Filler::new(runtime, owner, session_id).fill_all(env).await
}

/// One string with its placeholders filled in (see [`expand_env`]).
pub async fn expand(
    runtime: &Runtime,
    owner: &str,
    session_id: &str,
    value: &str,
) -> Result<String, IdentityError> {
    Filler::new(runtime, owner, session_id).fill(value).await
}

/// Whether an MCP server's `env` or `headers` hold a placeholder: such a
/// server gets an instance of its own per session.
pub fn server_has_placeholder(config: &agentd_tools::mcp::McpServerConfig) -> bool {
    use agentd_tools::mcp::McpTransport;
    let values = match &config.transport {
        McpTransport::Stdio { env, .. } => env,
        McpTransport::Http { headers, .. } => headers,
        McpTransport::Channel(_) => return false,
    };
    values.values().any(|value| has_placeholder(value))
}

/// `config` with its `env` or `headers` filled in by `filler`.
pub async fn fill_server(
    filler: &mut Filler<'_>,
    config: &agentd_tools::mcp::McpServerConfig,
) -> Result<agentd_tools::mcp::McpServerConfig, IdentityError> {
    use agentd_tools::mcp::McpTransport;
    let mut filled = config.clone();
    match &mut filled.transport {
        McpTransport::Stdio { env, .. } => *env = filler.fill_all(env).await?,
        McpTransport::Http { headers, .. } => *headers = filler.fill_all(headers).await?,
        McpTransport::Channel(_) => {}
    }
    Ok(filled)
}
