//! The Agent SDK path (bench/RESULTS.md, "Agent SDK: agentd as the CLI";
//! issue 26): the Python SDK (`.tools/venv`) driving the real `claude` CLI and
//! agentd (a link named `claude` to it) on the peer comparison's script, in
//! one run of `bench/agent_sdk.py`: `query()` cold, `ClaudeSDKClient` warm.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::processes::{claude_command, seed_workspace};
use super::report::{Table, ms, ratio};
use super::scenarios::Ctx;

/// The driver and the interpreter that has the SDK.
pub struct Driver {
    pub python: PathBuf,
    pub script: PathBuf,
}

impl Driver {
    pub fn in_repo(root: &Path) -> Self {
        Self {
            python: root.join(".tools/venv/bin/python"),
            script: root.join("bench/agent_sdk.py"),
        }
    }
}

/// One CLI's samples, in ms, as the driver printed them.
struct Samples {
    cold: Vec<Duration>,
    warm: Vec<Duration>,
    warm_host: Vec<Duration>,
    requests_per_turn: f64,
}

impl Samples {
    fn from_json(name: &str, all: &Value) -> Result<Self> {
        let of = all
            .get(name)
            .with_context(|| format!("no figures for {name}"))?;
        let list = |key: &str| -> Vec<Duration> {
            of[key]
                .as_array()
                .map(|v| {
                    v.iter()
                        .filter_map(Value::as_f64)
                        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
                        .collect()
                })
                .unwrap_or_default()
        };
        Ok(Self {
            cold: list("cold_ms"),
            warm: list("warm_ms"),
            warm_host: list("warm_host_ms"),
            requests_per_turn: of["requests_per_turn"].as_f64().unwrap_or(0.0),
        })
    }
}

/// "median / p90" of `samples`, and the median.
fn spread(samples: &[Duration]) -> (String, Duration) {
    let mut v = samples.to_vec();
    let median = agentd_bench::quantile(&mut v, 0.5);
    let p90 = agentd_bench::quantile(&mut v, 0.9);
    (format!("{} / {}", ms(median), ms(p90)), median)
}

/// Runs the driver on both CLIs; the table (agentd's column first) and notes.
pub fn run(ctx: &Ctx, driver: &Driver, runs: usize, turns: usize) -> Result<(Table, Vec<String>)> {
    let ws = ctx.root.join("sdk-ws");
    seed_workspace(&ws)?;
    let home = ctx.root.join("sdk-home");
    let data = ctx.root.join("sdk-agentd");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(&data)?;
    std::fs::write(data.join("agentd.toml"), "")?;
    // The SDK starts whatever it is given; agentd knows its CLI role by name.
    let link = ctx.root.join("sdk-bin/claude");
    std::fs::create_dir_all(link.parent().context("no parent")?)?;
    if !link.exists() {
        std::os::unix::fs::symlink(&ctx.agentd, &link)?;
    }
    // The script edits the file by absolute path: the model server for that.
    let script = super::processes::script(&ws.join(super::processes::FILE).display().to_string());
    std::fs::write(ctx.root.join("sdk.json"), script.to_string())?;
    let (server, url) =
        super::processes::start_model_server(&ctx.agentd, &ctx.root.join("sdk.json"))?;

    // The CLI's environment as the peer comparison gives `claude`, plus
    // agentd's data dir; each ignores the other's variables.
    let mut command = claude_command(&driver.python, &home, &url, &ws);
    command
        .env("AGENTD_DATA_DIR", &data)
        .env("AGENTD_CONFIG", data.join("agentd.toml"))
        .env("AGENTD_LOG", "warn")
        .arg(&driver.script)
        .arg("--cli")
        .arg(format!("agentd={}", link.display()))
        .arg("--cli")
        .arg(format!("claude={}", ctx.claude.display()))
        .args(["--cwd", &ws.display().to_string(), "--model-url", &url])
        .args(["--runs", &runs.to_string(), "--turns", &turns.to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    let output = command.output();
    super::processes::stop(server);
    let output = output.with_context(|| format!("starting {}", driver.python.display()))?;
    if !output.status.success() {
        bail!(
            "{} failed ({}); the SDK is installed by scripts/install-deps.sh",
            driver.script.display(),
            output.status
        );
    }
    let figures: Value = serde_json::from_slice(&output.stdout).context("the driver's JSON")?;
    let a = Samples::from_json("agentd", &figures)?;
    let c = Samples::from_json("claude", &figures)?;

    let mut t = Table::default();
    let rows = [
        (
            format!("SDK `query()` cold: call → result, median / p90 of {runs}"),
            &a.cold,
            &c.cold,
        ),
        (
            format!("SDK `ClaudeSDKClient` warm turn wall, median / p90 of {turns}"),
            &a.warm,
            &c.warm,
        ),
        (
            "  warm host time (wall − model server time), median / p90".into(),
            &a.warm_host,
            &c.warm_host,
        ),
    ];
    for (label, of_agentd, of_claude) in rows {
        let (a_cell, a_median) = spread(of_agentd);
        let (c_cell, c_median) = spread(of_claude);
        t.row([
            &label,
            &a_cell,
            &c_cell,
            &ratio(a_median.as_secs_f64(), c_median.as_secs_f64()),
            "",
        ]);
    }
    t.row([
        "  model requests per warm turn",
        &format!("{:.1}", a.requests_per_turn),
        &format!("{:.1}", c.requests_per_turn),
        "",
        "",
    ]);
    let notes = vec![format!(
        "Agent SDK: claude-agent-sdk {} (Python) with `cli_path` = a link named `claude` to \
         agentd, and = the real CLI; ratio = agentd / claude of the medians. cold: from the \
         `query()` call to its `ResultMessage` (the SDK starts the CLI, which runs the whole \
         turn; the Python interpreter and SDK import are not counted), runs interleaved after \
         one unmeasured run each. warm: one `ClaudeSDKClient`, turns after an unmeasured \
         first, each from `query()` to the `ResultMessage`. agentd runs Bash in bubblewrap; \
         the CLI runs it bare.",
        figures["sdk_version"].as_str().unwrap_or("?")
    )];
    Ok((t, notes))
}
