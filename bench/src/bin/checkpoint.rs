//! Cost of workspace checkpoints: time and bytes stored per checkpoint.
//!
//! Builds a workspace of N files (default 10 000) in nested dirs, mostly 1–8 KiB
//! of text, some 8–64 KiB and a few 64 KiB–1 MiB, then measures with the
//! in-memory blob store:
//!
//! - the first checkpoint (every file hashed and stored, full manifest);
//! - a checkpoint with nothing changed (delta manifest against the previous);
//! - a checkpoint after changing 10 files;
//! - a restore after deleting 100 files and editing 10;
//! - a fork: restoring the manifest into an empty dir.
//!
//! Repeated steps report the median of their rounds. "Stored" is new blob bytes
//! plus the encoded manifest (full for the first, a delta after).
//!
//!     cargo run --release -p agentd-bench --bin checkpoint [-- --files N] [--rounds R] [--dir D]
//!
//! The workspace is a temp dir under D (default: the system temp dir).

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use agentd_bench::{peak_rss_kib, quantile};
use agentd_snapshot::{
    Manifest, MemoryBlobs, SnapshotStats, Snapshotter, decode_manifest, encode_manifest,
};
use anyhow::{Context, bail, ensure};

/// A small deterministic generator (xorshift64*), so every run builds the same tree.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORDS: &[&str] = &[
    "fn", "let", "mut", "self", "impl", "struct", "return", "match", "Some", "None", "Ok", "Err",
    "async", "await", "pub", "use", "crate", "value", "index", "buffer", "result",
];

/// About `size` bytes of code-like text, different for every call.
fn text(rng: &mut Rng, size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 64);
    while out.len() < size {
        let words = 3 + rng.below(8);
        for _ in 0..words {
            let w = WORDS[rng.below(WORDS.len() as u64) as usize];
            out.extend_from_slice(w.as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(format!("{}\n", rng.next() % 100_000).as_bytes());
    }
    out.truncate(size);
    out
}

fn file_size(rng: &mut Rng) -> usize {
    match rng.below(100) {
        0 => 64 * 1024 + rng.below(960 * 1024) as usize,
        1..=9 => 8 * 1024 + rng.below(56 * 1024) as usize,
        _ => 1024 + rng.below(7 * 1024) as usize,
    }
}

/// N files under `root`: 10 top dirs, 10 subdirs each, some a level deeper.
fn build(root: &Path, files: usize, rng: &mut Rng) -> anyhow::Result<(Vec<String>, u64)> {
    let mut paths = Vec::with_capacity(files);
    let mut bytes = 0u64;
    for i in 0..files {
        let (top, sub) = (i % 10, (i / 10) % 10);
        let dir = if i % 3 == 0 {
            format!("src{top}/mod{sub}/deep{}", (i / 100) % 4)
        } else {
            format!("src{top}/mod{sub}")
        };
        let path = format!("{dir}/file{i}.rs");
        fs::create_dir_all(root.join(&dir))?;
        let size = file_size(rng);
        let content = text(rng, size);
        bytes += content.len() as u64;
        fs::write(root.join(&path), content)?;
        paths.push(path);
    }
    Ok((paths, bytes))
}

fn edit(root: &Path, path: &str, rng: &mut Rng) -> anyhow::Result<()> {
    let mut content = fs::read(root.join(path))?;
    content.extend_from_slice(&text(rng, 40));
    fs::write(root.join(path), content)?;
    Ok(())
}

struct Row {
    step: &'static str,
    time: Duration,
    stats: Option<SnapshotStats>,
    note: String,
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn kib(bytes: u64) -> String {
    if bytes >= 10 << 20 {
        format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

struct Options {
    files: usize,
    rounds: usize,
    /// Where the temp workspace goes (its filesystem matters).
    dir: Option<std::path::PathBuf>,
}

fn parse_args() -> anyhow::Result<Options> {
    let (mut files, mut rounds, mut dir) = (10_000, 5, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--files" => files = value()?.parse().context("--files")?,
            "--rounds" => rounds = value()?.parse().context("--rounds")?,
            "--dir" => dir = Some(value()?.into()),
            other => bail!(
                "unknown argument {other:?}; usage: checkpoint [--files N] [--rounds R] [--dir D]"
            ),
        }
    }
    ensure!(
        files >= 200 && rounds >= 1,
        "need --files >= 200 and --rounds >= 1"
    );
    Ok(Options { files, rounds, dir })
}

/// The median round, by time, of `rounds` runs of `step`.
fn median(mut rounds: Vec<Row>) -> Row {
    let mut times: Vec<Duration> = rounds.iter().map(|r| r.time).collect();
    let mid = quantile(&mut times, 0.5);
    let at = rounds.iter().position(|r| r.time == mid).unwrap_or(0);
    rounds.swap_remove(at)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Options { files, rounds, dir } = parse_args()?;
    let dir = match dir {
        Some(parent) => tempfile::tempdir_in(parent)?,
        None => tempfile::tempdir()?,
    };
    let ws = dir.path().join("ws");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let started = Instant::now();
    let (paths, total) = build(&ws, files, &mut rng)?;
    println!(
        "workspace: {files} files, {} of content, built in {}",
        kib(total),
        ms(started.elapsed())
    );
    // Let the new files age past the racy window, as a workspace between tool calls has.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let snap = Snapshotter::default();
    let blobs = MemoryBlobs::new();
    let mut rows = Vec::new();

    let t = Instant::now();
    let (first, stats) = snap.snapshot(&ws, None, &blobs).await?;
    rows.push(Row {
        step: "first checkpoint",
        time: t.elapsed(),
        note: format!("{} entries", first.len()),
        stats: Some(stats),
    });
    let encoded = encode_manifest(&first, None);
    let t = Instant::now();
    let decoded = decode_manifest(&encoded, None)?;
    let decode_time = t.elapsed();
    ensure!(decoded == first, "manifest round trip");

    let mut prev = first.clone();
    let mut unchanged = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let (m, stats) = snap.snapshot(&ws, Some(&prev), &blobs).await?;
        ensure!(
            stats.changed.is_empty(),
            "nothing changed, yet {:?}",
            stats.changed
        );
        unchanged.push(Row {
            step: "checkpoint, nothing changed",
            time: t.elapsed(),
            stats: Some(stats),
            note: String::new(),
        });
        prev = m;
    }
    rows.push(median(unchanged));

    let mut ten = Vec::new();
    for round in 0..rounds {
        for k in 0..10 {
            edit(&ws, &paths[(round * 10 + k) * 37 % files], &mut rng)?;
        }
        tokio::time::sleep(Duration::from_millis(60)).await;
        let t = Instant::now();
        let (m, stats) = snap.snapshot(&ws, Some(&prev), &blobs).await?;
        ensure!(stats.changed.len() == 10, "changed {:?}", stats.changed);
        ten.push(Row {
            step: "checkpoint after editing 10 files",
            time: t.elapsed(),
            stats: Some(stats),
            note: String::new(),
        });
        prev = m;
    }
    let stored = |r: &Row| {
        r.stats
            .as_ref()
            .map_or(0, |s| s.new_bytes + s.manifest_bytes)
    };
    let least = ten.iter().map(stored).min().unwrap_or(0);
    let most = ten.iter().map(stored).max().unwrap_or(0);
    let mut row = median(ten);
    // Which files a round edits decides its bytes; the median by time is arbitrary there.
    row.note = format!("stored per round: {} to {}", kib(least), kib(most));
    rows.push(row);

    let mut restores = Vec::new();
    for round in 0..rounds {
        for k in 0..100 {
            let _ = fs::remove_file(ws.join(&paths[(round * 100 + k) * 13 % files]));
        }
        for k in 0..10 {
            let path = &paths[(round * 10 + k) * 41 % files];
            if ws.join(path).exists() {
                edit(&ws, path, &mut rng)?;
            }
        }
        let t = Instant::now();
        let changed = snap.restore(&ws, &prev, &blobs).await?;
        restores.push(Row {
            step: "restore after deleting 100, editing 10",
            time: t.elapsed(),
            stats: None,
            note: format!("{} paths restored", changed.len()),
        });
    }
    rows.push(median(restores));

    let fork = dir.path().join("fork");
    let t = Instant::now();
    let changed = snap.restore(&fork, &prev, &blobs).await?;
    rows.push(Row {
        step: "fork: restore into an empty dir",
        time: t.elapsed(),
        stats: None,
        note: format!("{} paths written", changed.len()),
    });
    let check = snap.snapshot(&fork, None, &MemoryBlobs::new()).await?.0;
    ensure!(
        same_content(&check, &prev),
        "fork differs from the workspace"
    );

    println!();
    println!("| step | time | files hashed | new blobs | stored: blobs + manifest | note |");
    println!("|---|---|---|---|---|---|");
    for row in &rows {
        let (hashed, new, stored) = match &row.stats {
            Some(s) => (
                s.hashed_files.to_string(),
                s.new_blobs.to_string(),
                format!(
                    "{} + {} = {}",
                    kib(s.new_bytes),
                    kib(s.manifest_bytes),
                    kib(s.new_bytes + s.manifest_bytes)
                ),
            ),
            None => ("–".into(), "–".into(), "–".into()),
        };
        println!(
            "| {} | {} | {hashed} | {new} | {stored} | {} |",
            row.step,
            ms(row.time),
            row.note
        );
    }
    println!();
    println!(
        "full manifest: {} encoded, decoded in {}; blob store holds {} in {} blobs; peak RSS {} MiB",
        kib(encoded.len() as u64),
        ms(decode_time),
        kib(blobs.bytes_stored()),
        blobs.len(),
        peak_rss_kib().unwrap_or(0) / 1024
    );
    Ok(())
}

/// Same paths, kinds, contents and modes (fingerprints differ by nature).
fn same_content(a: &Manifest, b: &Manifest) -> bool {
    a.len() == b.len()
        && a.entries
            .iter()
            .zip(&b.entries)
            .all(|((pa, ea), (pb, eb))| pa == pb && ea.kind == eb.kind && ea.mode == eb.mode)
}
