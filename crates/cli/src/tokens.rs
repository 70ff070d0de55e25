//! `agentd tokens create|ls|revoke`: API tokens for `auth = "token"`.

use std::path::PathBuf;

use agentd_server::access::{Audit, OPERATOR};
use agentd_server::config::Config;
use agentd_server::http::auth::{new_token, valid_user_name};
use agentd_store::{Store, StoreError};

use crate::exit;

#[derive(Debug, clap::Subcommand)]
pub enum TokensCommand {
    /// Make a token for a user (created if new). The token is printed once;
    /// only its hash is kept.
    Create {
        #[arg(long)]
        user: String,
        /// A label to recognise the token by (say, the machine it is for).
        #[arg(long, default_value = "")]
        name: String,
        /// Make the user an admin (every profile and model, `/v1/admin/*`).
        #[arg(long)]
        admin: bool,
    },
    /// List tokens (never the tokens themselves).
    Ls {
        /// Only this user's.
        #[arg(long)]
        user: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token by its id (see `agentd tokens ls`).
    Revoke { id: String },
}

pub async fn run(command: TokensCommand, config: Config, data_dir: PathBuf) -> u8 {
    let store = match crate::users::store(&config, &data_dir).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let outcome = match command {
        TokensCommand::Create { user, name, admin } => {
            create(store.as_ref(), &user, &name, admin).await
        }
        TokensCommand::Ls { user, json } => ls(store.as_ref(), user.as_deref(), json).await,
        TokensCommand::Revoke { id } => revoke(store.as_ref(), &id).await,
    };
    exit::or_failed(outcome)
}

async fn create(store: &dyn Store, user: &str, label: &str, admin: bool) -> Result<u8, StoreError> {
    if !valid_user_name(user) {
        eprintln!("agentd: invalid user name {user:?}: use 1-64 letters, digits and . - _ @ +");
        return Ok(exit::USAGE);
    }
    let user = match store.get_user_by_name(user).await? {
        Some(user) => user,
        None => store.create_user(user).await?,
    };
    let audit = Audit::new(store, OPERATOR);
    if admin && !user.is_admin {
        store.set_user_flags(&user.name, Some(true), None).await?;
        let detail = serde_json::json!({"is_admin": true});
        audit.record("user.update", Some(&user.name), detail).await;
    }
    let (token, hash, prefix) = new_token();
    let record = store.create_token(&user.id, label, &hash, &prefix).await?;
    let detail = serde_json::json!({"token_id": record.id, "name": label});
    audit.record("token.create", Some(&user.name), detail).await;
    println!("{token}");
    eprintln!(
        "agentd: token {} for user {}; it is shown only now. Send it as \
         `Authorization: Bearer <token>`.",
        record.id, user.name
    );
    Ok(exit::OK)
}

async fn ls(store: &dyn Store, user: Option<&str>, as_json: bool) -> Result<u8, StoreError> {
    let user_id = match user {
        Some(name) => match store.get_user_by_name(name).await? {
            Some(user) => Some(user.id),
            None => return Ok(exit::report(exit::USAGE, format!("no user named {name:?}"))),
        },
        None => None,
    };
    let mut tokens = store.list_tokens(user_id.as_deref()).await?;
    if as_json {
        // The hash is no secret, but nobody needs it.
        for token in &mut tokens {
            token.token_hash.clear();
        }
        exit::print_json(&tokens);
        return Ok(exit::OK);
    }
    if tokens.is_empty() {
        eprintln!("no tokens; create one with `agentd tokens create --user NAME`");
        return Ok(exit::OK);
    }
    println!(
        "{:<36}  {:<16}  {:<16}  {:<8}  {:<20}  NAME",
        "ID", "USER", "PREFIX", "STATE", "CREATED"
    );
    for t in tokens {
        let state = if t.revoked_at.is_some() {
            "revoked"
        } else if t.user_disabled {
            "disabled"
        } else {
            "active"
        };
        println!(
            "{:<36}  {:<16}  {:<16}  {:<8}  {:<20}  {}",
            t.id,
            t.user_name,
            format!("{}…", t.prefix),
            state,
            t.created_at.format("%Y-%m-%d %H:%M:%S"),
            t.name
        );
    }
    Ok(exit::OK)
}

async fn revoke(store: &dyn Store, id: &str) -> Result<u8, StoreError> {
    if store.revoke_token(id).await? {
        let detail = serde_json::json!({"token_id": id});
        Audit::new(store, OPERATOR)
            .record("token.revoke", None, detail)
            .await;
        eprintln!("agentd: token {id} revoked");
        Ok(exit::OK)
    } else {
        Ok(exit::report(exit::USAGE, format!("no token with id {id}")))
    }
}
