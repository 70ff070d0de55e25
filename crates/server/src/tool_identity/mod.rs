//! Identity for tools: `{user}`, `{session}` and `{user_token}` in the
//! `env` of stdio MCP servers, the `headers` of HTTP ones and the `env` of
//! `[[commands]]`, so a platform's tools know on whose behalf they act.
//!
//! The placeholders are exact: `{user}` is the session owner's name,
//! `{session}` the session id, `{user_token}` a short-lived JWT agentd signs
//! (see [`keys`]) for the audience of that server or command alone.
//! `{{name}}` is the literal text `{name}`; `${...}` (shell style) and any
//! other `{word}` are left as written, but a near miss of the three names
//! (`{user_tokn}`, `{Session}`) is refused when the config is loaded (a typo
//! must not reach a tool as text).

mod keys;
mod template;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use agentd_store::Store;
use agentd_tools::command::{CommandEnv, CommandSpec, EnvFiller};
use agentd_tools::mcp::{McpServerConfig, McpTransport};
use chrono::{DateTime, Utc};

pub use keys::{Jwk, Jwks, ToolKeys};
pub(crate) use template::check_template;
use template::{Piece, parse};

use crate::config::IdentityToml;
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

/// The default `aud` of the tokens of MCP server `name`.
pub fn mcp_audience(name: &str) -> String {
    format!("agentd-tool:{name}")
}

/// The default `aud` of the tokens of command `name`.
pub fn command_audience(name: &str) -> String {
    format!("agentd-command:{name}")
}

/// Whether `value` holds a placeholder agentd fills in (a value that does
/// not parse counts as one: filling it in reports the error).
pub fn has_placeholder(value: &str) -> bool {
    parse(value).map_or(true, |pieces| {
        pieces.iter().any(|piece| !matches!(piece, Piece::Text(_)))
    })
}

/// Whether `value` names `{user}`, `{session}` or `{user_token}` (a value
/// that does not parse does not).
pub fn names_placeholder(value: &str) -> bool {
    parse(value).is_ok_and(|pieces| pieces.iter().any(|piece| !matches!(piece, Piece::Text(_))))
}

/// `value` without placeholders, its `{{name}}` escapes rendered (a value
/// that does not parse stays as written: the config check refused it).
pub fn render_text(value: &str) -> String {
    match parse(value) {
        Ok(pieces) if pieces.iter().all(|piece| matches!(piece, Piece::Text(_))) => pieces
            .into_iter()
            .map(|piece| match piece {
                Piece::Text(text) => text,
                _ => String::new(),
            })
            .collect(),
        _ => value.to_string(),
    }
}

/// What signs tokens: the runtime's store, keys and `[identity]`, owned, so
/// a tool can hold it.
#[derive(Clone)]
pub struct Minter {
    store: Arc<dyn Store>,
    keys: Arc<ToolKeys>,
    config: IdentityToml,
}

impl Minter {
    pub fn of(runtime: &Runtime) -> Self {
        Self {
            store: runtime.store.clone(),
            keys: runtime.tool_keys.clone(),
            config: runtime.config.identity.clone(),
        }
    }
}

/// Values filled in, and the names of those holding a token.
#[derive(Default)]
pub struct Filled {
    pub values: BTreeMap<String, String>,
    pub secret: BTreeSet<String>,
}

/// Fills the placeholders of one session's values. A `{user_token}` is
/// minted once per audience, on first need, and shared by every value of
/// that audience.
pub struct Filler {
    minter: Minter,
    owner: String,
    session_id: String,
    tokens: BTreeMap<String, (String, DateTime<Utc>)>,
}

impl Filler {
    pub fn new(minter: Minter, owner: &str, session_id: &str) -> Self {
        Self {
            minter,
            owner: owner.to_string(),
            session_id: session_id.to_string(),
            tokens: BTreeMap::new(),
        }
    }

    /// `value` with its placeholders filled in (a token for `audience`),
    /// and whether it holds a token. In a header (`header`), a non-ASCII
    /// user name is percent-encoded (UTF-8), as header values are ASCII.
    async fn fill(
        &mut self,
        value: &str,
        audience: &str,
        header: bool,
    ) -> Result<(String, bool), IdentityError> {
        let mut out = String::with_capacity(value.len());
        let mut secret = false;
        for piece in parse(value).map_err(IdentityError::Template)? {
            match piece {
                Piece::Text(text) => out.push_str(&text),
                Piece::User if header => out.push_str(&percent_encode_non_ascii(&self.owner)),
                Piece::User => out.push_str(&self.owner),
                Piece::Session => out.push_str(&self.session_id),
                Piece::UserToken => {
                    out.push_str(&self.token(audience).await?);
                    secret = true;
                }
            }
        }
        Ok((out, secret))
    }

    /// Every value of `values` filled in, tokens for `audience`.
    pub async fn fill_all(
        &mut self,
        values: &BTreeMap<String, String>,
        audience: &str,
        header: bool,
    ) -> Result<Filled, IdentityError> {
        let mut filled = Filled::default();
        for (key, value) in values {
            let (value, secret) = self.fill(value, audience, header).await?;
            if secret {
                filled.secret.insert(key.clone());
            }
            filled.values.insert(key.clone(), value);
        }
        Ok(filled)
    }

    /// When the first token filled in expires; `None` when none was.
    pub fn token_expiry(&self) -> Option<DateTime<Utc>> {
        self.tokens.values().map(|(_, expiry)| *expiry).min()
    }

    async fn token(&mut self, audience: &str) -> Result<String, IdentityError> {
        if let Some((token, _)) = self.tokens.get(audience) {
            return Ok(token.clone());
        }
        let minter = &self.minter;
        let minted = minter
            .keys
            .mint(
                minter.store.as_ref(),
                &minter.config,
                &self.owner,
                &self.session_id,
                audience,
            )
            .await?;
        self.tokens.insert(audience.to_string(), minted.clone());
        Ok(minted.0)
    }
}

/// `%XX` for every byte of a non-ASCII character (and `%` itself).
fn percent_encode_non_ascii(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() && c != '%' && !c.is_ascii_control() {
            out.push(c);
        } else {
            let mut bytes = [0u8; 4];
            for byte in c.encode_utf8(&mut bytes).bytes() {
                out.push_str(&format!("%{byte:02X}"));
            }
        }
    }
    out
}

/// Whether an MCP server's `env` or `headers` hold a placeholder: such a
/// server gets an instance of its own per session.
pub fn server_has_placeholder(config: &McpServerConfig) -> bool {
    let values = match &config.transport {
        McpTransport::Stdio { env, .. } => env,
        McpTransport::Http { headers, .. } => headers,
        McpTransport::Channel(_) => return false,
    };
    values.values().any(|value| has_placeholder(value))
}

/// `config` with its `env` or `headers` filled in by `filler` (tokens for
/// `audience`); the variables holding a token are marked secret.
pub async fn fill_server(
    filler: &mut Filler,
    config: &McpServerConfig,
    audience: &str,
) -> Result<McpServerConfig, IdentityError> {
    let mut filled = config.clone();
    match &mut filled.transport {
        McpTransport::Stdio { env, .. } => {
            let values = filler.fill_all(env, audience, false).await?;
            *env = values.values;
            filled.secret_env.extend(values.secret);
        }
        McpTransport::Http { headers, .. } => {
            *headers = filler.fill_all(headers, audience, true).await?.values;
        }
        McpTransport::Channel(_) => {}
    }
    Ok(filled)
}

/// `config` (a server without placeholders) with its `{{name}}` escapes
/// rendered.
pub fn render_server(mut config: McpServerConfig) -> McpServerConfig {
    match &mut config.transport {
        McpTransport::Stdio { env: values, .. }
        | McpTransport::Http {
            headers: values, ..
        } => {
            for value in values.values_mut() {
                *value = render_text(value);
            }
        }
        McpTransport::Channel(_) => {}
    }
    config
}

/// A session's command `env`s, filled in at each run: a fresh token (for
/// the command's audience) per run.
pub struct SessionEnv {
    minter: Minter,
    owner: String,
    session_id: String,
}

impl SessionEnv {
    pub fn new(runtime: &Runtime, owner: &str, session_id: &str) -> Self {
        Self {
            minter: Minter::of(runtime),
            owner: owner.to_string(),
            session_id: session_id.to_string(),
        }
    }
}

#[async_trait::async_trait]
impl EnvFiller for SessionEnv {
    async fn fill(&self, spec: &CommandSpec) -> Result<CommandEnv, String> {
        let audience = spec
            .audience
            .clone()
            .unwrap_or_else(|| command_audience(&spec.name));
        let mut filler = Filler::new(self.minter.clone(), &self.owner, &self.session_id);
        let filled = filler
            .fill_all(&spec.env, &audience, false)
            .await
            .map_err(|err| err.to_string())?;
        Ok(CommandEnv {
            vars: filled.values,
            secret: filled.secret,
        })
    }
}
