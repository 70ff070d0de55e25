//! `agentd-model-server [--script FILE] [--bind ADDR]`: the scripted model
//! server as a process of its own, for the web UI's end-to-end tests, the
//! benchmarks and trying agentd offline. It prints its URL on the first line
//! of stdout and serves until SIGINT or SIGTERM. It is not part of the
//! `agentd` binary: test code stays out of what ships.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use agentd_model::scripted::{Script, demo_script};

#[derive(clap::Parser)]
#[command(
    version,
    about = "Serve agentd's scripted model (Anthropic and OpenAI wire formats)."
)]
struct Args {
    /// JSON script of replies (the format of `agentd_model::scripted`); the
    /// demo script if omitted.
    #[arg(long)]
    script: Option<PathBuf>,
    #[arg(long, default_value = "127.0.0.1:0")]
    bind: SocketAddr,
    /// Send a reply with no scripted delay or cut in writes of up to 16 KiB
    /// rather than one per SSE frame (same bytes; for benchmarks, where this
    /// process shares the machine with the server being measured).
    #[arg(long)]
    coalesce: bool,
}

fn read_script(path: &PathBuf) -> Result<Script, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("reading {}: {err}", path.display()))?;
    serde_json::from_str(&text).map_err(|err| format!("{}: {err}", path.display()))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    let script = match args.script.as_ref().map(read_script).transpose() {
        Ok(script) => script.unwrap_or_else(demo_script),
        Err(err) => {
            eprintln!("agentd-model-server: {err}");
            return ExitCode::from(2);
        }
    };
    agentd_testkit::coalesce_replies(args.coalesce);
    match agentd_testkit::serve_forever(args.bind, script).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("agentd-model-server: {err:#}");
            ExitCode::FAILURE
        }
    }
}
