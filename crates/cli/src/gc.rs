//! `agentd gc --older-than AGE [--dry-run]`: retention. Removes sessions (of
//! all owners) not updated for AGE, not pinned and with no running turn, and their
//! workspace when agentd created it (`<data_dir>/workspaces/<id>`); a CLI
//! session's workspace is the user's own directory and is never touched.

use std::path::{Path, PathBuf};

use agentd_server::config::Config;
use agentd_server::paths::{Connections, own_workspace};
use agentd_server::session::lifecycle::Deleted;
use agentd_server::session::{SessionError, SessionService};
use agentd_store::{Store, StoreError};
use chrono::{TimeDelta, Utc};

use crate::exit;

/// Sessions read per round while removing.
const PAGE: u32 = 200;

#[derive(Debug, clap::Args)]
pub struct GcArgs {
    /// Remove sessions not updated for this long: a whole number with `d`
    /// (days), `h` (hours) or `m` (minutes), e.g. `30d`, `12h`, `90m`.
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    older_than: TimeDelta,
    /// List what would be removed, remove nothing.
    #[arg(long)]
    dry_run: bool,
}

/// `30d`, `12h`, `90m` → a duration; anything else is an error message.
pub fn parse_age(text: &str) -> Result<TimeDelta, String> {
    let bad = || {
        format!(
            "invalid age {text:?}: expected a whole number followed by d, h or m \
             (e.g. 30d, 12h, 90m)"
        )
    };
    let text = text.trim();
    let unit_at = text.len().checked_sub(1).ok_or_else(bad)?;
    let (number, unit) = text.split_at(unit_at);
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: i64 = number.parse().map_err(|_| bad())?;
    let age = match unit {
        "d" => TimeDelta::try_days(n),
        "h" => TimeDelta::try_hours(n),
        "m" => TimeDelta::try_minutes(n),
        _ => None,
    };
    age.ok_or_else(bad)
}

pub async fn run(args: GcArgs, config: Config, data_dir: PathBuf) -> u8 {
    let service = match crate::service::open(config, data_dir.clone(), Connections::One).await {
        Ok(service) => service,
        Err(err) => return exit::report(exit::USAGE, err),
    };
    let store = service.registry().runtime().store.clone();
    let Some(cutoff) = Utc::now().checked_sub_signed(args.older_than) else {
        return exit::report(exit::USAGE, "--older-than is too large");
    };
    let outcome = if args.dry_run {
        dry_run(store.as_ref(), &data_dir, cutoff).await
    } else {
        remove(&service, cutoff).await
    };
    exit::or_failed(outcome)
}

async fn dry_run(
    store: &dyn Store,
    data_dir: &Path,
    cutoff: chrono::DateTime<Utc>,
) -> Result<u8, StoreError> {
    let sessions = store.sessions_updated_before(cutoff, u32::MAX).await?;
    for s in &sessions {
        let workspace = if own_workspace(data_dir, s).is_some() {
            "workspace removed too"
        } else {
            "workspace kept"
        };
        println!(
            "{}  {}  {}  {} ({workspace})",
            s.id,
            s.owner,
            s.updated_at.format("%Y-%m-%d %H:%M:%S"),
            s.workspace
        );
    }
    println!("would remove {} sessions", sessions.len());
    Ok(exit::OK)
}

async fn remove(service: &SessionService, cutoff: chrono::DateTime<Utc>) -> Result<u8, StoreError> {
    let store = service.registry().runtime().store.clone();
    let mut removed = 0u64;
    let mut failed = false;
    loop {
        let page = store.sessions_updated_before(cutoff, PAGE).await?;
        if page.is_empty() {
            break;
        }
        let mut progressed = false;
        for s in page {
            match service.delete(s).await {
                // Gone already (another gc, a delete): not ours to count.
                Ok(Deleted::AlreadyGone) => continue,
                Ok(Deleted::Removed { workspace_error }) => {
                    if let Some(message) = workspace_error {
                        eprintln!("agentd: {message}");
                        failed = true;
                    }
                }
                // A turn started since it was listed: it is not stale.
                Err(SessionError::TurnRunning(_) | SessionError::CommandRunning(_)) => continue,
                Err(SessionError::Store(err)) => return Err(err),
                Err(err) => {
                    eprintln!("agentd: {err}");
                    failed = true;
                    continue;
                }
            }
            progressed = true;
            removed += 1;
        }
        if !progressed {
            break;
        }
    }
    println!("removed {removed} sessions");
    Ok(if failed { exit::FAILED } else { exit::OK })
}

#[cfg(test)]
mod tests {
    use super::parse_age;
    use chrono::TimeDelta;

    #[test]
    fn ages_in_days_hours_and_minutes() {
        assert_eq!(parse_age("30d"), Ok(TimeDelta::days(30)));
        assert_eq!(parse_age("7d"), Ok(TimeDelta::days(7)));
        assert_eq!(parse_age("12h"), Ok(TimeDelta::hours(12)));
        assert_eq!(parse_age("90m"), Ok(TimeDelta::minutes(90)));
        assert_eq!(parse_age("0m"), Ok(TimeDelta::zero()));
        for bad in [
            "",
            "d",
            "30",
            "30s",
            "1w",
            "-1d",
            "+1d",
            "1.5h",
            "30 d",
            "30D",
            "99999999999999d",
        ] {
            let err = parse_age(bad).unwrap_err();
            assert!(err.contains("expected a whole number"), "{bad:?}: {err}");
        }
    }
}
