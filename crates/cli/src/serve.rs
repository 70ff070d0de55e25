//! `agentd serve`: wiring for the HTTP server of `agentd_server::http`.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentd_server::cluster::{Cluster, node_id};
use agentd_server::config::{AuthMethods, AuthMode, Config};
use agentd_server::http::Stopped;
use agentd_server::http::auth::Auth;
use agentd_server::paths::{open_server_store, prepare_data_dir};
use agentd_server::runtime::Runtime;
use agentd_server::threads::Threads;
use clap::ValueEnum;

use crate::exit;

const DEFAULT_BIND: &str = "127.0.0.1:7878";

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on [default: [server] bind, else 127.0.0.1:7878].
    #[arg(long, env = "AGENTD_BIND")]
    bind: Option<String>,
    /// How requests authenticate, one method or several separated by commas
    /// (tried as header, token, jwt) [default: [server] auth, else token].
    #[arg(long, value_enum, env = "AGENTD_AUTH", value_delimiter = ',')]
    auth: Vec<AuthArg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum AuthArg {
    /// `Authorization: Bearer` tokens from `agentd tokens create`.
    Token,
    /// No authentication; only on a loopback address.
    None,
    /// A trusted proxy's user header plus a shared secret header.
    Header,
    /// `Authorization: Bearer <JWT>` checked against `[server.jwt]`.
    Jwt,
}

pub async fn run(args: ServeArgs, config: Config, data_dir: PathBuf) -> u8 {
    match serve(args, config, data_dir).await {
        Ok(()) => exit::OK,
        Err((code, message)) => {
            eprintln!("agentd serve: {message}");
            code
        }
    }
}

fn usage(err: impl std::fmt::Display) -> (u8, String) {
    (exit::USAGE, err.to_string())
}

fn failed(err: impl std::fmt::Display) -> (u8, String) {
    (exit::FAILED, err.to_string())
}

async fn serve(args: ServeArgs, config: Config, data_dir: PathBuf) -> Result<(), (u8, String)> {
    let env: HashMap<String, String> = std::env::vars().collect();
    let lookup = |key: &str| env.get(key).cloned();
    let bind = args
        .bind
        .or_else(|| config.server.bind.clone())
        .unwrap_or_else(|| DEFAULT_BIND.into());
    let addr = resolve(&bind).await.map_err(usage)?;
    let methods = if args.auth.is_empty() {
        config.server.auth.clone()
    } else {
        let modes = args.auth.iter().map(|arg| match arg {
            AuthArg::Token => AuthMode::Token,
            AuthArg::None => AuthMode::None,
            AuthArg::Header => AuthMode::Header,
            AuthArg::Jwt => AuthMode::Jwt,
        });
        AuthMethods::new(modes.collect()).map_err(usage)?
    };
    let auth = Auth::from_config(&config.server, &methods, &lookup, addr).map_err(usage)?;
    prepare_data_dir(&data_dir).map_err(usage)?;
    let (store, cluster_store) = open_server_store(&data_dir, &config, &lookup)
        .await
        .map_err(usage)?;
    if methods.modes() == [AuthMode::Token] {
        warn_without_tokens(store.as_ref()).await;
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|err| failed(format!("cannot listen on {addr}: {err}")))?;
    let local = listener.local_addr().map_err(failed)?;
    let cluster = match cluster_store {
        Some(cluster_store) => {
            let id = node_id(config.cluster.node_id.as_deref(), &data_dir)
                .map_err(|err| failed(format!("cannot keep the node id: {err}")))?;
            Some(Cluster::new(cluster_store, &config.cluster, id))
        }
        None => None,
    };
    agentd_sandbox::set_spare_capacity(
        config
            .server
            .spare_sandboxes
            .unwrap_or(agentd_server::config::DEFAULT_SPARE_SANDBOXES),
    );
    let deadline = config.server.shutdown_deadline();
    let mut runtime = Runtime::new(store, config, data_dir);
    // Mount hosts are resolved once, now: a config that cannot be served
    // is refused before anyone is.
    runtime.check_mount_config().map_err(usage)?;
    // The key set tools verify `{user_token}`s with is published before the
    // first token (in the background: a database that is down now only
    // delays it to the first token).
    let (keys, store, identity) = (
        runtime.tool_keys.clone(),
        runtime.store.clone(),
        runtime.config.identity.clone(),
    );
    tokio::spawn(async move {
        if let Err(err) = keys.prepare(store.as_ref(), &identity).await {
            tracing::warn!("the signing key of tokens for tools is not ready yet: {err}");
        }
    });
    let mut turn_builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(workers) = turn_workers() {
        turn_builder.worker_threads(workers);
    }
    let turn_threads = turn_builder
        .thread_name("agentd-turn")
        .enable_all()
        .build()
        .map_err(|err| failed(format!("cannot start the turn runtime: {err}")))?;
    if let Some(cluster) = &cluster {
        runtime = runtime.with_cluster(cluster.clone());
    }
    runtime.threads = Threads::split(
        turn_threads.handle().clone(),
        tokio::runtime::Handle::current(),
    );
    // The first line of stdout: scripts (and tests binding port 0) read it.
    println!("agentd listening on http://{local}");
    let _ = std::io::stdout().flush();
    if let Some(cluster) = cluster {
        tokio::spawn(drain_on_signal(cluster));
    }
    let signal = async move {
        shutdown_signal().await;
        exit_after(deadline, "the shutdown deadline passed");
    };
    let served = agentd_server::http::serve(listener, runtime, Arc::new(env), auth, signal).await;
    // What is left below must not hold the process either.
    exit_after(EXIT_GRACE, "stopping the turn runtime took too long");
    // Turns have drained (or been given up on) by now. Drop what is left on
    // the turn runtime while this process still lives, so kill-on-drop
    // reaches every process a turn started; spares go too.
    agentd_sandbox::set_spare_capacity(0);
    let _ = tokio::task::spawn_blocking(move || {
        turn_threads.shutdown_timeout(std::time::Duration::from_secs(1));
    })
    .await;
    exit_status(served, deadline)
}

/// Worker threads of `agentd serve`'s turn runtime: half the cores, at
/// least one; `None` when `TOKIO_WORKER_THREADS` sizes it instead. With a
/// worker per core here as well as in the serving runtime, an idle worker
/// was woken to look for work at nearly every hand-off of a turn (a warm
/// turn switched threads ~140 times instead of ~105). The serving runtime
/// keeps one per core: with one, a flood of events queued on it (p99
/// delivery up to 4 times longer; `bench/RESULTS.md`, twentieth pass).
fn turn_workers() -> Option<usize> {
    if std::env::var_os("TOKIO_WORKER_THREADS").is_some() {
        return None;
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    Some(half_the_cores(cores))
}

fn half_the_cores(cores: usize) -> usize {
    (cores / 2).max(1)
}

/// A token server with no usable token can be reached by nobody: say how.
async fn warn_without_tokens(store: &dyn agentd_store::Store) {
    match store.list_tokens(None).await {
        Ok(tokens) if tokens.iter().all(|t| t.revoked_at.is_some()) => eprintln!(
            "agentd serve: no API tokens yet; create one with `agentd tokens create --user NAME`"
        ),
        _ => {}
    }
}

/// How the serve ended, as this command's result.
fn exit_status(served: std::io::Result<Stopped>, deadline: Duration) -> Result<(), (u8, String)> {
    match served {
        Ok(Stopped::Clean) => Ok(()),
        Ok(Stopped::Incomplete { pending }) => Err((
            exit::SHUTDOWN_INCOMPLETE,
            format!(
                "the shutdown gave up after {}s on: {}",
                deadline.as_secs(),
                pending.join("; ")
            ),
        )),
        Err(err) => Err(failed(err)),
    }
}

/// After the serving runtime's own deadline: time for the rest.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// The last resort of a bounded shutdown: whatever the process still waits
/// for (a blocking call, a wedged runtime), it exits `after` from now with
/// [`exit::SHUTDOWN_INCOMPLETE`]. A plain thread, so a stuck runtime cannot
/// hold it up.
fn exit_after(after: Duration, why: &'static str) {
    let spawned = std::thread::Builder::new()
        .name("agentd-exit".into())
        .spawn(move || {
            std::thread::sleep(after);
            tracing::error!("{why}: exiting");
            eprintln!("agentd serve: {why}: exiting");
            std::process::exit(i32::from(exit::SHUTDOWN_INCOMPLETE));
        });
    if let Err(err) = spawned {
        tracing::warn!(%err, "cannot start the shutdown watchdog");
    }
}

/// `host:port` to one address; a name (say `localhost:7878`) is looked up.
async fn resolve(bind: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = bind.parse() {
        return Ok(addr);
    }
    tokio::net::lookup_host(bind)
        .await
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| {
            format!("cannot listen on {bind:?}: expected HOST:PORT such as {DEFAULT_BIND}")
        })
}

/// SIGUSR1 drains a cluster node: it takes no new turns (other nodes take
/// them), finishes its running ones and exits.
async fn drain_on_signal(cluster: Cluster) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut usr1) = signal(SignalKind::user_defined1()) else {
        return;
    };
    if usr1.recv().await.is_some() {
        cluster.drain();
    }
}

/// SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn turns_get_half_the_cores_and_at_least_one_worker() {
        let workers: Vec<usize> = [0, 1, 2, 3, 8].map(super::half_the_cores).to_vec();
        assert_eq!(workers, [1, 1, 1, 1, 4]);
    }
}
