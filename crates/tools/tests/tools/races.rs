//! The file tools against a concurrent swapper (what a second, parallel tool
//! call can do: flip `f` and `d` between the real thing and links out of the
//! workspace) and against special files (FIFOs, devices, sockets, /proc magic
//! links): they never reach outside, never block, and always answer either
//! normally or with a clear error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentd_tools::{ToolContext, ToolResult};
use rustix::fs::{CWD, FileType, Mode, RenameFlags};
use serde_json::{Value, json};

use crate::support::call_with;

const MARKER_B: &str = "MARKER-B-WORKSPACE-5f0e2c";
const MARKER_ROOT: &str = "MARKER-ROOT-ONLY-a81d3b";
/// Names that only a listing of B's directory could show (no link names them).
const B_ONLY_NAMES: [&str; 2] = ["b-listing-only-4c2e.txt", "b-subdir-9d1b"];
const CALLS_PER_TOOL: usize = 600;
const TASKS_PER_TOOL: usize = 4;
/// Errors a tool may give while its path is being swapped. The last is the
/// path guard's, when a link it saw was gone when it read it.
const CLEAR_ERRORS: [&str; 6] = [
    "outside the workspace",
    "kept changing; try again",
    "is a symbolic link, not a regular file",
    "old_string was not found in the file",
    "is invalid: cannot read symlink",
    "changed while it was being resolved; try again",
];

/// Workspace A (`ws`), another session's workspace B (`other`), a root-only
/// host file, and the links the swapper exchanges with A's `f` and `d`.
struct Layout {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    other: PathBuf,
    root_only: PathBuf,
    /// (name in A, staged link outside A, the link's target).
    swaps: Vec<(PathBuf, PathBuf, PathBuf)>,
    ctx: ToolContext,
}

fn layout() -> Layout {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (ws, other, host, stage) = (
        base.join("ws"),
        base.join("other"),
        base.join("host"),
        base.join("stage"),
    );
    for dir in [&ws, &other, &host, &stage] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(ws.join("f"), "alpha\n").unwrap();
    std::fs::create_dir(ws.join("d")).unwrap();
    std::fs::write(ws.join("d/inner.txt"), "alpha inner\n").unwrap();
    std::fs::write(other.join("secret-b.txt"), MARKER_B).unwrap();
    std::fs::write(other.join(B_ONLY_NAMES[0]), MARKER_B).unwrap();
    std::fs::create_dir(other.join(B_ONLY_NAMES[1])).unwrap();
    std::fs::write(other.join(B_ONLY_NAMES[1]).join("deeper.txt"), MARKER_B).unwrap();
    let root_only = host.join("root-only.txt");
    std::fs::write(&root_only, MARKER_ROOT).unwrap();
    std::fs::set_permissions(&root_only, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Absolute and relative (as seen from `ws`) links, both leading out.
    let swaps = vec![
        (
            ws.join("f"),
            stage.join("f-to-b"),
            other.join("secret-b.txt"),
        ),
        (
            ws.join("f"),
            stage.join("f-to-root"),
            PathBuf::from("../host/root-only.txt"),
        ),
        (ws.join("d"), stage.join("d-to-b"), other.clone()),
    ];
    for (_, staged, target) in &swaps {
        symlink(target, staged).unwrap();
    }
    let ctx = ToolContext::for_workspace(&ws).unwrap();
    Layout {
        _tmp: tmp,
        ws,
        other,
        root_only,
        swaps,
        ctx,
    }
}

/// Exchange each name in A with its staged link and back, until stopped. A
/// Write may replace a swapped-in link with a file; the link is then remade.
fn flip(swaps: &[(PathBuf, PathBuf, PathBuf)], stop: &AtomicBool, count: &AtomicU64) {
    let exchange = |a: &Path, b: &Path| {
        if rustix::fs::renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).is_ok() {
            count.fetch_add(1, Ordering::Relaxed);
        }
    };
    while !stop.load(Ordering::Relaxed) {
        for (inside, staged, target) in swaps {
            exchange(inside, staged);
            std::thread::yield_now();
            exchange(inside, staged);
            std::thread::yield_now();
            let still_a_link =
                std::fs::symlink_metadata(staged).is_ok_and(|meta| meta.file_type().is_symlink());
            if !still_a_link {
                let _ = std::fs::remove_file(staged);
                let _ = symlink(target, staged);
            }
        }
    }
}

/// Every file under `dir` (links not followed) with its content.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            found.extend(snapshot(&path));
        }
        let content = std::fs::read(&path).unwrap_or_default();
        found.insert(path, content);
    }
    found
}

fn race_inputs(tool: &str) -> Vec<Value> {
    match tool {
        "Read" => vec![
            json!({"file_path": "f"}),
            json!({"file_path": "d/inner.txt"}),
        ],
        "Write" => vec![
            json!({"file_path": "f", "content": "alpha\n"}),
            json!({"file_path": "d/new.txt", "content": "alpha new\n"}),
        ],
        "Edit" => vec![
            json!({"file_path": "f", "old_string": "alpha", "new_string": "beta"}),
            json!({"file_path": "f", "old_string": "beta", "new_string": "alpha"}),
            json!({"file_path": "d/inner.txt", "old_string": "inner", "new_string": "INNER"}),
            json!({"file_path": "d/inner.txt", "old_string": "INNER", "new_string": "inner"}),
        ],
        "MultiEdit" => vec![json!({"file_path": "f", "edits": [
            {"old_string": "alpha", "new_string": "gamma"},
            {"old_string": "gamma", "new_string": "alpha"}
        ]})],
        "Grep" => vec![
            json!({"pattern": "SECRET|alpha|beta|inner", "output_mode": "content"}),
            json!({"pattern": "SECRET|alpha|beta|inner", "path": "d"}),
            json!({"pattern": "SECRET|alpha|beta", "path": "f", "output_mode": "count"}),
        ],
        "Glob" => vec![json!({"pattern": "**/*"}), json!({"pattern": "d/*"})],
        "LS" => vec![json!({"path": "."}), json!({"path": "d"})],
        _ => unreachable!("{tool}"),
    }
}

/// What is wrong with `result`, if anything.
fn problem(tool: &str, input: &Value, result: &ToolResult, ws: &str) -> Option<String> {
    let content = &result.content;
    let mut forbidden = vec![MARKER_B, MARKER_ROOT];
    forbidden.extend(B_ONLY_NAMES);
    if let Some(leak) = forbidden.iter().find(|needle| content.contains(**needle)) {
        return Some(format!("{tool} {input} leaked {leak:?}: {content}"));
    }
    let expected = if result.is_error {
        CLEAR_ERRORS.iter().any(|clear| content.contains(clear))
    } else {
        let first = content.lines().next().unwrap_or_default();
        match tool {
            "Read" => first.starts_with("     1\t"),
            "Write" => first.starts_with("Created ") || first.starts_with("Overwrote "),
            "Edit" => first.starts_with("Edited "),
            "MultiEdit" => first.starts_with("Applied "),
            "Grep" | "Glob" | "LS" => {
                first.starts_with(ws)
                    || first.starts_with("Found ")
                    || first.starts_with("No files found")
                    || first.starts_with("No matches found")
            }
            _ => false,
        }
    };
    (!expected).then(|| format!("{tool} {input}: unexpected answer: {content}"))
}

/// Every file tool hits `f` and `d` while they are swapped with links to
/// another workspace and to a root-only file: nothing leaks, nothing outside
/// changes, and every answer is a normal one or a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn swapping_paths_mid_call_never_leads_a_tool_outside() {
    let layout = layout();
    let b_before = snapshot(&layout.other);
    let root_only_before = std::fs::read(&layout.root_only).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flips = Arc::new(AtomicU64::new(0));
    let flipper = {
        let (swaps, stop, flips) = (layout.swaps.clone(), stop.clone(), flips.clone());
        std::thread::spawn(move || flip(&swaps, &stop, &flips))
    };

    let started = Instant::now();
    let ws = layout.ws.display().to_string();
    let mut tasks = Vec::new();
    for tool in ["Read", "Write", "Edit", "MultiEdit", "Grep", "Glob", "LS"] {
        for task in 0..TASKS_PER_TOOL {
            let (ctx, ws) = (layout.ctx.clone(), ws.clone());
            tasks.push(tokio::spawn(async move {
                let inputs = race_inputs(tool);
                let mut problems = Vec::new();
                let mut errors = 0;
                for call in 0..CALLS_PER_TOOL / TASKS_PER_TOOL {
                    let input = &inputs[(call + task) % inputs.len()];
                    let result = call_with(&ctx, tool, input.clone()).await;
                    errors += usize::from(result.is_error);
                    problems.extend(problem(tool, input, &result, &ws));
                }
                (tool, errors, problems)
            }));
        }
    }
    let all = tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(tasks))
        .await
        .expect("the tool calls did not finish within 60 s");
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();

    let mut problems = Vec::new();
    let mut errors: BTreeMap<&str, usize> = BTreeMap::new();
    for joined in all {
        let (tool, tool_errors, tool_problems) = joined.unwrap();
        *errors.entry(tool).or_default() += tool_errors;
        problems.extend(tool_problems);
    }
    eprintln!(
        "{} swaps; errors per tool (of {CALLS_PER_TOOL}): {errors:?}; {:?}",
        flips.load(Ordering::Relaxed),
        started.elapsed()
    );
    assert!(
        flips.load(Ordering::Relaxed) > 0,
        "the swapper never swapped"
    );
    // Leaks first: they are the worst.
    problems.sort_by_key(|problem| !problem.contains(" leaked "));
    assert!(
        problems.is_empty(),
        "{} bad answers, e.g.:\n{}",
        problems.len(),
        problems[..problems.len().min(5)].join("\n")
    );
    assert_eq!(snapshot(&layout.other), b_before, "workspace B changed");
    assert_eq!(std::fs::read(&layout.root_only).unwrap(), root_only_before);
}

const SPECIAL_THREAD_NAME: &str = "agentd-special";
const WORKER_THREADS: usize = 2;

/// Threads of this process with `name`.
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|comm| comm.trim_end() == name)
        })
        .count()
}

/// Special files in a workspace, and the words their errors must contain.
fn special_files(ws: &Path) -> Vec<(&'static str, &'static str)> {
    let node = |name: &str, kind: FileType, dev: u64| {
        rustix::fs::mknodat(CWD, ws.join(name), kind, Mode::from_raw_mode(0o666), dev)
            .unwrap_or_else(|err| panic!("mknod {name}: {err}"));
    };
    node("fifo", FileType::Fifo, 0);
    let null_device = std::fs::metadata("/dev/null").unwrap().rdev();
    node("chardev", FileType::CharacterDevice, null_device);
    symlink("/proc/self/root/etc/passwd", ws.join("magic-root")).unwrap();
    symlink("/proc/self/fd/0", ws.join("magic-fd")).unwrap();
    // Ignore files the walks must neither block on nor read without end.
    node(".gitignore", FileType::Fifo, 0);
    symlink("/dev/zero", ws.join(".ignore")).unwrap();
    std::fs::write(ws.join("a.txt"), "needle\n").unwrap();
    vec![
        ("fifo", "a FIFO (named pipe)"),
        ("chardev", "a character device"),
        ("sock", "a socket"),
        ("magic-root", "outside the workspace"),
        ("magic-fd", "outside the workspace"),
    ]
}

fn special_inputs(path: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("Read", json!({"file_path": path})),
        ("Write", json!({"file_path": path, "content": "x"})),
        (
            "Edit",
            json!({"file_path": path, "old_string": "x", "new_string": "y"}),
        ),
        (
            "Edit",
            json!({"file_path": path, "old_string": "", "new_string": "y"}),
        ),
        (
            "MultiEdit",
            json!({"file_path": path, "edits": [{"old_string": "x", "new_string": "y"}]}),
        ),
        ("Grep", json!({"pattern": "x", "path": path})),
        ("LS", json!({"path": path})),
        ("Glob", json!({"pattern": "*", "path": path})),
    ]
}

/// One call, which must answer within two seconds.
async fn bounded_call(ctx: &ToolContext, tool: &str, input: Value) -> ToolResult {
    tokio::time::timeout(Duration::from_secs(2), call_with(ctx, tool, input.clone()))
        .await
        .unwrap_or_else(|_| panic!("{tool} {input} blocked"))
}

/// FIFOs, devices, sockets and magic links get a clear error at once from
/// every file tool, searches over their directory skip them, and no thread is
/// left blocked on one. Threads are counted by this test runtime's name: the
/// other tests of this binary run in the same process meanwhile.
#[test]
fn special_files_get_a_clear_error_at_once_and_block_no_thread() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .thread_name(SPECIAL_THREAD_NAME)
        .thread_keep_alive(Duration::from_millis(100))
        .enable_all()
        .build()
        .unwrap();
    // Dropping the runtime would wait for a thread a regression left blocked,
    // so the test would hang instead of failing: shut it down in the background.
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| check_special_files(&runtime)));
    runtime.shutdown_background();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

fn check_special_files(runtime: &tokio::runtime::Runtime) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().canonicalize().unwrap();
    let cases = special_files(&ws);
    let _socket = std::os::unix::net::UnixListener::bind(ws.join("sock")).unwrap();
    let ctx = ToolContext::for_workspace(&ws).unwrap();
    // The workers name themselves once running.
    let threads_before = runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(2);
        while threads_named(SPECIAL_THREAD_NAME) < WORKER_THREADS && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        threads_named(SPECIAL_THREAD_NAME)
    });

    let started = Instant::now();
    runtime.block_on(async {
        for (path, needle) in &cases {
            for (tool, input) in special_inputs(path) {
                let result = bounded_call(&ctx, tool, input.clone()).await;
                assert!(
                    result.is_error && result.content.contains(needle),
                    "{tool} {input}: {:?} should be an error naming {needle:?}",
                    result.content
                );
            }
        }
        let searches = [
            (
                "Grep",
                json!({"pattern": "needle|x", "output_mode": "content"}),
            ),
            ("Grep", json!({"pattern": "."})),
            ("Glob", json!({"pattern": "*"})),
            ("LS", json!({"path": "."})),
        ];
        for (tool, input) in searches {
            let result = bounded_call(&ctx, tool, input.clone()).await;
            assert!(!result.is_error, "{tool} {input}: {}", result.content);
            if tool != "LS" {
                for special in ["fifo", "chardev", "sock", ".gitignore"] {
                    assert!(
                        !result.content.contains(special),
                        "{tool} {input} reported {special}: {}",
                        result.content
                    );
                }
                assert!(result.content.contains("a.txt"), "{}", result.content);
            }
        }
    });
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "needle\n"
    );

    // Idle blocking threads leave after the keep-alive; a blocked one cannot.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut threads_after = threads_named(SPECIAL_THREAD_NAME);
    while threads_after > threads_before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        threads_after = threads_named(SPECIAL_THREAD_NAME);
    }
    assert!(
        threads_after <= threads_before,
        "{threads_after} threads of the test runtime remain, {threads_before} before"
    );
}
