//! The peer comparison's table, its number formats, and the block it writes into
//! bench/RESULTS.md (`--write-results`).

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

pub fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

pub fn kib(k: f64) -> String {
    if k >= 1024.0 * 1024.0 {
        format!("{:.2} GiB", k / 1024.0 / 1024.0)
    } else if k >= 1024.0 {
        format!("{:.1} MiB", k / 1024.0)
    } else {
        format!("{k:.1} KiB")
    }
}

/// agentd / claude as "1/N" (agentd smaller) or "N×" (agentd larger).
pub fn ratio(agentd: f64, claude: f64) -> String {
    if !(agentd > 0.0 && claude > 0.0) {
        return "–".into();
    }
    let r = agentd / claude;
    if r <= 1.0 {
        format!("1/{:.0}", 1.0 / r)
    } else {
        format!("{r:.1}×")
    }
}

/// A histogram bucket bound in ms: "≤ 10", or "> 5000" past the last bound.
pub fn bucket(ms: f64) -> String {
    if ms.is_finite() {
        format!("≤ {ms}")
    } else {
        "> 5000".into()
    }
}

#[derive(Default)]
pub struct Table {
    rows: Vec<[String; 5]>,
    /// The first cell of every row whose target was missed.
    pub misses: Vec<String>,
    /// Whether any row has a target (else the block states none).
    targets: bool,
}

impl Table {
    pub fn row(&mut self, cells: [&str; 5]) {
        self.rows.push(cells.map(str::to_string));
    }

    /// A row with a target; `met` is recorded for the summary.
    pub fn target(&mut self, cells: &[&str; 5], met: bool) {
        self.targets = true;
        let mut cells = cells.map(str::to_string);
        cells[4] = format!("{} {}", cells[4], if met { "✓" } else { "✗ missed" });
        if !met {
            self.misses.push(cells[0].clone());
        }
        self.rows.push(cells);
    }

    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "| metric | agentd | claude CLI | ratio | target |\n|---|---|---|---|---|\n",
        );
        for r in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                r[0], r[1], r[2], r[3], r[4]
            );
        }
        out
    }
}

fn output(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "?".into())
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "?".into());
    let mem = match mem_total_kib() {
        0 => "?".into(),
        k => format!("{:.0} GiB", k as f64 / 1024.0 / 1024.0),
    };
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cores} vCPU ({cpu}), {mem}, kernel {}", kernel.trim())
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

pub fn mem_total_kib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// A block of bench/RESULTS.md a run rewrites: its markers, and the heading
/// it goes under when the file has none yet.
pub struct Section {
    begin: &'static str,
    end: &'static str,
    heading: &'static str,
}

/// The peer comparison's table.
pub const PEER: Section = Section {
    begin: "<!-- peer:begin (written by target/release/peer --write-results) -->",
    end: "<!-- peer:end -->",
    heading: "## Peer comparison: agentd vs the `claude` CLI (issue 10)",
};

/// The Agent SDK path's table (`peer --only sdk`, and every full run).
pub const SDK: Section = Section {
    begin: "<!-- agent-sdk:begin (written by target/release/peer --write-results) -->",
    end: "<!-- agent-sdk:end -->",
    heading: "## Agent SDK: agentd as the CLI (issue 26)",
};

/// What a recorded run was: the binaries, its parameters, the load before it.
pub struct Run<'a> {
    pub agentd: &'a Path,
    pub claude: &'a Path,
    /// One line, e.g. "cold runs 10, warm turns 20, …".
    pub parameters: String,
    pub load_before: &'a str,
    pub elapsed: Duration,
}

/// Replaces `section`'s block of `file` (or appends one).
pub fn write_results(
    file: &Path,
    section: &Section,
    run: &Run<'_>,
    table: &Table,
    extra: &[String],
) -> Result<()> {
    let Section {
        begin,
        end,
        heading,
    } = section;
    let agentd = run.agentd.display().to_string();
    let claude = run.claude.display().to_string();
    let mut block = String::new();
    let _ = writeln!(block, "{begin}");
    let _ = writeln!(
        block,
        "Recorded {} by `{}` (whole run {:.0} s).\n",
        output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        std::env::args().collect::<Vec<_>>().join(" "),
        run.elapsed.as_secs_f64()
    );
    let _ = writeln!(block, "- machine: {}", machine());
    let _ = writeln!(
        block,
        "- load average before / after: {} / {}",
        run.load_before,
        loadavg()
    );
    let _ = writeln!(
        block,
        "- agentd {} (git {}), claude {}, node {}, {}",
        output(&agentd, &["--version"]).trim_start_matches("agentd "),
        output("git", &["describe", "--always", "--dirty"]),
        output(&claude, &["--version"]),
        output("node", &["--version"]),
        output("bwrap", &["--version"]),
    );
    let _ = writeln!(block, "- {}\n", run.parameters);
    block.push_str(&table.markdown());
    block.push('\n');
    for line in extra {
        let _ = writeln!(block, "{line}\n");
    }
    if !table.targets {
    } else if table.misses.is_empty() {
        block.push_str("All targets met in this run.\n");
    } else {
        let _ = writeln!(
            block,
            "Targets missed in this run: {}.",
            table.misses.join("; ")
        );
    }
    let _ = writeln!(block, "{end}");

    let text = std::fs::read_to_string(file).unwrap_or_default();
    let new = match (text.find(begin), text.find(end)) {
        (Some(b), Some(e)) if e > b => {
            format!(
                "{}{}{}",
                &text[..b],
                block.trim_end(),
                &text[e + end.len()..]
            )
        }
        _ => format!("{}\n\n{heading}\n\n{block}", text.trim_end()),
    };
    std::fs::write(file, new)?;
    Ok(())
}
