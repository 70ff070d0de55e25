//! Events appended per second, per store backend (SQLite and PostgreSQL).
//!
//! Scenarios, each on a fresh database (SQLite: a temp dir; PostgreSQL: a
//! schema of its own, dropped afterwards):
//!
//! - one session, one caller awaiting each `append_event`;
//! - one session, `append_events` in batches of 64;
//! - 100 sessions at once, each its own task awaiting each `append_event`;
//! - 100 sessions at once, each appending batches of 64.
//!
//! PostgreSQL comes from `--postgres URL`, else `AGENTD_TEST_POSTGRES_URL`,
//! else the bench starts a throwaway cluster with `scripts/postgres.sh start`
//! (in its own state dir) and stops it at the end.
//!
//!     cargo build --release -p agentd-bench
//!     target/release/store [--events N] [--sessions S] [--backend sqlite|postgres|both] [--postgres URL]

use std::path::PathBuf;
use std::process::Command;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use agentd_protocol::{DeltaKind, Event};
use agentd_store::postgres::PostgresStore;
use agentd_store::sqlite::SqliteStore;
use agentd_store::{NewSession, Store};
use anyhow::{Context, bail};
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

const BATCH: usize = 64;

struct Options {
    /// Events per scenario (split evenly over the sessions of concurrent ones).
    events: usize,
    sessions: usize,
    sqlite: bool,
    postgres: bool,
    postgres_url: Option<String>,
}

fn parse_args() -> anyhow::Result<Options> {
    let mut options = Options {
        events: 20_000,
        sessions: 100,
        sqlite: true,
        postgres: true,
        postgres_url: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--events" => options.events = value()?.parse().context("--events")?,
            "--sessions" => options.sessions = value()?.parse().context("--sessions")?,
            "--postgres" => options.postgres_url = Some(value()?),
            "--backend" => match value()?.as_str() {
                "sqlite" => (options.sqlite, options.postgres) = (true, false),
                "postgres" => (options.sqlite, options.postgres) = (false, true),
                "both" => (options.sqlite, options.postgres) = (true, true),
                other => bail!("unknown backend {other:?}: sqlite, postgres or both"),
            },
            other => bail!(
                "unknown argument {other:?}; usage: store [--events N] [--sessions S] \
                 [--backend sqlite|postgres|both] [--postgres URL]"
            ),
        }
    }
    if options.events == 0 || options.sessions == 0 {
        bail!("--events and --sessions must be at least 1");
    }
    Ok(options)
}

fn event(i: usize) -> Event {
    Event::MessageDelta {
        parent_call_id: None,
        turn_id: "t1".into(),
        index: 0,
        kind: DeltaKind::Text,
        text: format!("token {i} of a streamed reply, about forty bytes"),
    }
}

fn new_session() -> NewSession {
    NewSession {
        id: None,
        owner: "bench".into(),
        title: None,
        workspace: "/tmp/bench".into(),
        existing_workspace: false,
        model: "bench".into(),
        profile: "default".into(),
    }
}

/// Append `events` events to one fresh session; one by one or in batches.
async fn fill(store: &dyn Store, events: usize, batched: bool) -> anyhow::Result<()> {
    let session = store.create_session(new_session()).await?;
    if batched {
        let all: Vec<Event> = (0..events).map(event).collect();
        for chunk in all.chunks(BATCH) {
            store.append_events(&session.id, chunk).await?;
        }
    } else {
        for i in 0..events {
            store.append_event(&session.id, &event(i)).await?;
        }
    }
    let stored = store
        .get_session(&session.id)
        .await?
        .context("session vanished")?;
    if stored.last_seq != events as u64 {
        bail!("expected last_seq {events}, got {}", stored.last_seq);
    }
    Ok(())
}

/// Events per second of one scenario.
async fn scenario(
    store: Arc<dyn Store>,
    sessions: usize,
    events: usize,
    batched: bool,
) -> anyhow::Result<f64> {
    let per_session = events / sessions;
    let total = per_session * sessions;
    let start = Instant::now();
    let tasks: Vec<_> = (0..sessions)
        .map(|_| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { fill(store.as_ref(), per_session, batched).await })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    let elapsed = start.elapsed();
    Ok(total as f64 / elapsed.as_secs_f64())
}

struct Row {
    backend: &'static str,
    scenario: String,
    events: usize,
    rate: f64,
}

async fn run_backend<F, Fut>(
    backend: &'static str,
    options: &Options,
    open: F,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Arc<dyn Store>>>,
{
    let cases = [
        (1, false, "1 session, await each append_event".to_string()),
        (1, true, format!("1 session, append_events × {BATCH}")),
        (
            options.sessions,
            false,
            format!(
                "{} sessions at once, await each append_event",
                options.sessions
            ),
        ),
        (
            options.sessions,
            true,
            format!(
                "{} sessions at once, append_events × {BATCH}",
                options.sessions
            ),
        ),
    ];
    for (sessions, batched, name) in cases {
        let store = open().await?;
        // Warm the pool and the caches a little.
        fill(store.as_ref(), 64, false).await?;
        let events = options.events / sessions * sessions;
        let rate = scenario(store, sessions, options.events, batched).await?;
        eprintln!("{backend:<8} {name:<48} {events:>7} events  {rate:>9.0} events/s");
        rows.push(Row {
            backend,
            scenario: name,
            events,
            rate,
        });
    }
    Ok(())
}

/// A throwaway cluster started by `scripts/postgres.sh`, stopped on drop.
struct Cluster {
    state: tempfile::TempDir,
}

impl Cluster {
    fn script() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/postgres.sh")
    }

    fn start() -> anyhow::Result<(Self, String)> {
        let state = tempfile::Builder::new()
            .prefix("agentd-bench-pg")
            .tempdir()?;
        // The cluster's owner (postgres, when running as root) must reach it.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o777))?;
        }
        let out = Command::new(Self::script())
            .arg("start")
            .env("AGENTD_PG_STATE", state.path().join("pg"))
            .output()
            .context("running scripts/postgres.sh start")?;
        let cluster = Cluster { state };
        if !out.status.success() {
            bail!(
                "scripts/postgres.sh start failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let url = stdout
            .lines()
            .find_map(|line| line.strip_prefix("AGENTD_TEST_POSTGRES_URL="))
            .context("scripts/postgres.sh printed no AGENTD_TEST_POSTGRES_URL")?
            .to_string();
        Ok((cluster, url))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(Self::script())
            .arg("stop")
            .env("AGENTD_PG_STATE", self.state.path().join("pg"))
            .output();
    }
}

async fn postgres_store(
    base: &PgConnectOptions,
    schemas: &std::sync::Mutex<Vec<String>>,
) -> anyhow::Result<Arc<dyn Store>> {
    let name = format!(
        "bench_{}_{}",
        std::process::id(),
        schemas.lock().map(|s| s.len()).unwrap_or(0)
    );
    let mut conn = PgConnection::connect_with(base).await?;
    sqlx::query(&format!("CREATE SCHEMA {name}"))
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    if let Ok(mut list) = schemas.lock() {
        list.push(name.clone());
    }
    let options = base.clone().options([("search_path", name.as_str())]);
    Ok(Arc::new(PostgresStore::connect_with(options).await?))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let options = parse_args()?;
    let mut rows = Vec::new();

    if options.sqlite {
        let dirs = std::sync::Mutex::new(Vec::new());
        run_backend(
            "sqlite",
            &options,
            || async {
                let dir = tempfile::tempdir()?;
                let store = SqliteStore::open(&dir.path().join("agentd.db")).await?;
                if let Ok(mut dirs) = dirs.lock() {
                    dirs.push(dir);
                }
                Ok(Arc::new(store) as Arc<dyn Store>)
            },
            &mut rows,
        )
        .await?;
    }

    if options.postgres {
        let env_url = std::env::var("AGENTD_TEST_POSTGRES_URL")
            .ok()
            .filter(|u| !u.is_empty());
        let (_cluster, url) = match options.postgres_url.clone().or(env_url) {
            Some(url) => (None, url),
            None => {
                eprintln!("starting a throwaway PostgreSQL (scripts/postgres.sh start)");
                let (cluster, url) = Cluster::start()?;
                (Some(cluster), url)
            }
        };
        let base = PgConnectOptions::from_str(&url).context("not a postgres url")?;
        let schemas = std::sync::Mutex::new(Vec::new());
        let result = run_backend(
            "postgres",
            &options,
            || postgres_store(&base, &schemas),
            &mut rows,
        )
        .await;
        if let Ok(mut conn) = PgConnection::connect_with(&base).await {
            let names = schemas.lock().map(|s| s.clone()).unwrap_or_default();
            for name in names {
                let _ = sqlx::query(&format!("DROP SCHEMA {name} CASCADE"))
                    .execute(&mut conn)
                    .await;
            }
            let _ = conn.close().await;
        }
        result?;
    }

    println!("| backend | scenario | events | events/s |");
    println!("|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {} | {} | {:.0} |",
            row.backend, row.scenario, row.events, row.rate
        );
    }
    Ok(())
}
