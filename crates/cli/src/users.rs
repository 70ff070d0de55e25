//! `agentd users` and `agentd audit`: what admins do over the API
//! (`/v1/admin/*`), done on the store directly by whoever runs the server;
//! every change is in the audit log as the `cli:operator`'s.

use std::path::PathBuf;

use agentd_server::access::{Access, OPERATOR, UserView};
use agentd_server::config::Config;
use agentd_server::paths::{Connections, open_store};
use agentd_store::{AuditQuery, GrantKind, Store};
use chrono::{DateTime, Utc};

use crate::exit;

#[derive(Debug, clap::Subcommand)]
pub enum UsersCommand {
    /// Users with their role, grants and usage.
    Ls {
        #[arg(long)]
        json: bool,
    },
    /// One user, as JSON: role, grants, usage against their quotas.
    Show { name: String },
    /// Make a user an admin (`--off`: no longer).
    Admin {
        name: String,
        #[arg(long)]
        off: bool,
    },
    /// Disable a user: their tokens stop working (`--off`: enable again).
    Disable {
        name: String,
        #[arg(long)]
        off: bool,
    },
    /// Let a user choose a profile or model beyond `[access]`'s defaults.
    Grant {
        name: String,
        #[command(flatten)]
        what: GrantArgs,
    },
    /// Take a grant back; the user's next turn with it is refused.
    Revoke {
        name: String,
        #[command(flatten)]
        what: GrantArgs,
    },
}

#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub struct GrantArgs {
    #[arg(long)]
    profile: Option<String>,
    #[arg(long)]
    model: Option<String>,
}

impl GrantArgs {
    fn kind_and_name(&self) -> (GrantKind, &str) {
        match (&self.profile, &self.model) {
            (Some(profile), _) => (GrantKind::Profile, profile),
            (None, Some(model)) => (GrantKind::Model, model),
            (None, None) => unreachable!("clap requires one"),
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Entries after this id.
    #[arg(long)]
    after: Option<i64>,
    /// Only this actor's (`cli:operator` for the command line).
    #[arg(long)]
    actor: Option<String>,
    /// Only this action (`session.create`, `grant.add`, …).
    #[arg(long)]
    action: Option<String>,
    /// Only entries at or after this time (RFC 3339).
    #[arg(long)]
    since: Option<DateTime<Utc>>,
    /// At most this many (default: all).
    #[arg(long)]
    limit: Option<u32>,
    /// One JSON object per line (for export).
    #[arg(long)]
    json: bool,
}

/// The configured store; an error is printed and is [`exit::USAGE`].
pub(crate) async fn store(
    config: &Config,
    data_dir: &std::path::Path,
) -> Result<std::sync::Arc<dyn Store>, u8> {
    let env = |key: &str| std::env::var(key).ok();
    open_store(data_dir, config, &env, Connections::One)
        .await
        .map_err(|err| exit::report(exit::USAGE, err))
}

pub async fn run(command: UsersCommand, config: Config, data_dir: PathBuf) -> u8 {
    let store = match store(&config, &data_dir).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let access = Access {
        store: store.as_ref(),
        config: &config,
        data_dir: &data_dir,
    };
    exit::or_failed(users(access, command).await)
}

async fn users(access: Access<'_>, command: UsersCommand) -> anyhow::Result<u8> {
    match command {
        UsersCommand::Ls { json } => {
            let users = access.user_views().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&users)?);
            } else if users.is_empty() {
                eprintln!("no users yet; `agentd tokens create --user NAME` makes one");
            } else {
                println!(
                    "{:<24}  {:<6}  {:<8}  {:>8}  {:>10}  GRANTS",
                    "USER", "ROLE", "STATE", "SESSIONS", "SPENT/DAY"
                );
                for user in &users {
                    print_row(user);
                }
            }
        }
        UsersCommand::Show { name } => {
            let user = access.user_view(&name).await?;
            println!("{}", serde_json::to_string_pretty(&user)?);
        }
        UsersCommand::Admin { name, off } => {
            let user = access
                .set_user_flags(OPERATOR, &name, Some(!off), None)
                .await?;
            eprintln!(
                "agentd: {} is {}an admin",
                user.name,
                if user.is_admin { "" } else { "not " }
            );
        }
        UsersCommand::Disable { name, off } => {
            let user = access
                .set_user_flags(OPERATOR, &name, None, Some(!off))
                .await?;
            let state = if user.disabled { "disabled" } else { "enabled" };
            eprintln!("agentd: {} is {state}", user.name);
        }
        UsersCommand::Grant { name, what } => grant(access, &name, &what, true).await?,
        UsersCommand::Revoke { name, what } => grant(access, &name, &what, false).await?,
    }
    Ok(exit::OK)
}

async fn grant(
    access: Access<'_>,
    user: &str,
    what: &GrantArgs,
    granted: bool,
) -> anyhow::Result<()> {
    let (kind, name) = what.kind_and_name();
    let changed = access
        .set_grant(OPERATOR, user, kind, name, granted)
        .await?;
    let (done, verb) = if granted {
        ("granted", "has")
    } else {
        ("taken back", "had no")
    };
    if changed {
        eprintln!("agentd: {} {name:?} {done} for {user}", kind.as_str());
    } else {
        eprintln!("agentd: {user} already {verb} {} {name:?}", kind.as_str());
    }
    Ok(())
}

fn print_row(user: &UserView) {
    let role = if user.is_admin { "admin" } else { "user" };
    let state = if user.disabled { "disabled" } else { "active" };
    let grants: Vec<String> = user
        .grants
        .profiles
        .iter()
        .map(|p| format!("profile:{p}"))
        .chain(user.grants.models.iter().map(|m| format!("model:{m}")))
        .collect();
    println!(
        "{:<24}  {:<6}  {:<8}  {:>8}  {:>10.4}  {}",
        user.name,
        role,
        state,
        user.usage.sessions,
        user.usage.spend_today_usd,
        grants.join(" ")
    );
}

pub async fn audit(args: AuditArgs, config: Config, data_dir: PathBuf) -> u8 {
    let store = match store(&config, &data_dir).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let mut after = args.after;
    let mut left = args.limit.map(u64::from);
    loop {
        let page = left.map_or(1000, |n| n.min(1000) as u32);
        if page == 0 {
            return exit::OK;
        }
        let query = AuditQuery {
            after,
            limit: page,
            actor: args.actor.clone(),
            action: args.action.clone(),
            since: args.since,
        };
        let entries = match store.audit_log(&query).await {
            Ok(entries) => entries,
            Err(err) => return exit::report(exit::FAILED, err),
        };
        for entry in &entries {
            if args.json {
                println!("{}", serde_json::to_string(entry).unwrap_or_default());
            } else {
                println!(
                    "{:>6}  {}  {:<16}  {:<18}  {:<36}  {}",
                    entry.id,
                    entry.at.format("%Y-%m-%d %H:%M:%S"),
                    entry.actor,
                    entry.action,
                    entry.target.as_deref().unwrap_or("-"),
                    entry.detail
                );
            }
        }
        left = left.map(|n| n - entries.len() as u64);
        match entries.last() {
            Some(last) if entries.len() == page as usize => after = Some(last.id),
            _ => return exit::OK,
        }
    }
}
