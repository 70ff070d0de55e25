//! Serving sandboxes against the real bubblewrap. They exist only where the
//! trampoline is enabled, which needs `main` to call `run_if_asked` first, so
//! this test has a `main` of its own (`harness = false`) and runs its cases in
//! order, each printing a line as libtest does.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "sandbox/support/mod.rs"]
mod support;

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use agentd_sandbox::{
    ExecOutcome, Policy, Sandbox, set_spare_capacity, spares_starting, spares_used, spares_waiting,
};
use support::{
    PROBE, Workspace, assert_none_left, marker, processes_mentioning, request, run,
    run_cancelled_after, run_for, wait_for_spare, wait_for_spares, workspace,
};
use tokio_util::sync::CancellationToken;

type Case = fn() -> Pin<Box<dyn Future<Output = ()>>>;

fn main() {
    agentd_sandbox::trampoline::run_if_asked();
    agentd_sandbox::trampoline::enable();
    let cases: [(&str, Case); 7] = [
        // Through the trampoline, as the `agentd` binary starts them.
        ("unsandboxed_commands_are_detached", || {
            Box::pin(support::unsandboxed_commands_are_detached())
        }),
        ("a_served_command_sees_what_a_cold_one_does", || {
            Box::pin(a_served_command_sees_what_a_cold_one_does())
        }),
        (
            "one_sandbox_serves_the_commands_and_none_outlives_its_command",
            || Box::pin(one_sandbox_serves_the_commands_and_none_outlives_its_command()),
        ),
        ("timeout_and_cancel_end_the_served_sandbox", || {
            Box::pin(timeout_and_cancel_end_the_served_sandbox())
        }),
        (
            "a_served_sandbox_cannot_be_stopped_and_a_dead_one_is_not_used",
            || Box::pin(a_served_sandbox_cannot_be_stopped_and_a_dead_one_is_not_used()),
        ),
        (
            "a_command_that_changes_what_the_next_would_inherit_ends_its_sandbox",
            || Box::pin(a_command_that_changes_what_the_next_would_inherit_ends_its_sandbox()),
        ),
        ("a_prestarted_sandbox_serves_the_first_command", || {
            Box::pin(a_prestarted_sandbox_serves_the_first_command())
        }),
    ];
    let filter = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut passed = 0;
    for (name, case) in cases {
        if filter
            .as_ref()
            .is_some_and(|filter| !name.contains(filter.as_str()))
        {
            continue;
        }
        // The pool is per process: every case starts from an empty one.
        set_spare_capacity(0);
        set_spare_capacity(4);
        runtime.block_on(case());
        println!("test {name} ... ok");
        passed += 1;
    }
    set_spare_capacity(0);
    println!("\ntest result: ok. {passed} passed; 0 failed; 0 ignored");
}

/// A workspace whose sandbox is started and waiting.
async fn served_workspace() -> (Workspace, Policy) {
    let ws = workspace("agentd-served");
    let policy = Policy::new(&ws.path);
    run(&policy, "true").await;
    wait_for_spare().await;
    (ws, policy)
}

/// Run `command` in the waiting sandbox; checks that it was used.
async fn served(policy: &Policy, command: &str) -> ExecOutcome {
    let used = spares_used();
    let outcome = run(policy, command).await;
    assert_eq!(
        spares_used(),
        used + 1,
        "{command} ran in the waiting sandbox"
    );
    outcome
}

/// The probe's output without what differs by design: PIDs (the shell's,
/// its parent's, and `ls`'s in the descriptor listing).
fn without_pids(stdout: &str) -> String {
    stdout
        .lines()
        .map(|line| match line.split_once(" pid=") {
            Some((start, _)) if line.starts_with("0=") => start,
            _ if line.starts_with("declare -ir PPID=") => "declare -ir PPID",
            _ if line.ends_with("/fd") && line.contains(" 3 -> /proc/") => "3 -> /proc/N/fd",
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn a_served_command_sees_what_a_cold_one_does() {
    let ws = workspace("agentd-served");
    let policy = Policy::new(&ws.path);
    set_spare_capacity(0);
    let cold = run(&policy, PROBE).await;
    set_spare_capacity(4);
    run(&policy, "true").await;
    wait_for_spare().await;
    let warm = served(&policy, PROBE).await;
    let (warm_lines, cold_lines) = (without_pids(&warm.stdout), without_pids(&cold.stdout));
    let differing: Vec<_> = warm_lines
        .lines()
        .zip(cold_lines.lines())
        .filter(|(warm, cold)| warm != cold)
        .collect();
    assert!(differing.is_empty(), "served, cold: {differing:#?}");
    assert_eq!(warm_lines.lines().count(), cold_lines.lines().count());
    assert_eq!(
        (&warm.stderr, warm.exit_code),
        (&"to-stderr\n".to_string(), Some(7))
    );
    assert_eq!((&cold.stderr, cold.exit_code), (&warm.stderr, Some(7)));
    assert!(
        warm.stdout.starts_with("0=bash _=bash SHLVL=1 "),
        "{}",
        warm.stdout
    );
    assert!(warm.stdout.contains("\nstdin=[]\n"), "{}", warm.stdout);
    // A shell killed by a signal reads as bubblewrap reports it: 128 + signal.
    set_spare_capacity(0);
    let cold = run(&policy, "kill -SEGV $$").await;
    set_spare_capacity(4);
    run(&policy, "true").await;
    wait_for_spare().await;
    let warm = served(&policy, "kill -SEGV $$").await;
    assert_eq!((warm.exit_code, cold.exit_code), (Some(139), Some(139)));
    // The same sandbox takes a command over the one-shot limit (4 KiB) whole,
    // with quotes, tabs, UTF-8 and trailing newlines.
    let long = format!(
        ": {}\nprintf '%s|' \"a  b\" 'c\\d' $'e\\tf' 'é€'\ncat <<'END'\n x\n\n",
        "x".repeat(20_000)
    );
    let outcome = served(&policy, &long).await;
    assert_eq!(outcome.stdout, "a  b|c\\d|e\tf|é€| x\n\n", "{outcome:?}");
    // Up to 2 KiB, the text goes to the shell already waiting for it (its
    // command line is the waiting shell's), whole; a longer one, to a `bash -c`
    // of its own.
    let text = "printf '%s|' \"a  b\" 'c\\d' $'e\\tf' 'é€'\ncat <<'END'\n x\n\n";
    let shell = "tr '\\0' ' ' </proc/$$/cmdline; echo\n";
    let output = "\na  b|c\\d|e\tf|é€| x\n\n";
    let waiting = served(&policy, &format!("{shell}{text}")).await;
    assert!(
        waiting.stdout.starts_with("bash -c IFS= read ") && waiting.stdout.ends_with(output),
        "{waiting:?}"
    );
    let padding = format!(": {}\n", "x".repeat(2100));
    let own = served(&policy, &format!("{shell}{padding}{text}")).await;
    assert!(
        own.stdout.starts_with("bash -c tr ") && own.stdout.ends_with(output),
        "{own:?}"
    );
    // `$SECONDS` counts from the command's start, not from its shell's.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let seconds = served(&policy, "echo $SECONDS").await;
    assert_eq!(seconds.stdout, "0\n", "{seconds:?}");
}

async fn one_sandbox_serves_the_commands_and_none_outlives_its_command() {
    let (ws, policy) = served_workspace().await;
    let background = marker("served-background");
    let outcome = served(
        &policy,
        &format!(
            "echo kept > /tmp/scratch; echo made > made.txt; \
             (setsid bash -c 'sleep 60' {background} &); bash -c 'sleep 60' {background} & echo started"
        ),
    )
    .await;
    assert_eq!(outcome.stdout, "started\n");
    assert_eq!(
        std::fs::read_to_string(ws.path.join("made.txt")).unwrap(),
        "made\n"
    );
    assert_none_left(&background).await;

    // Orphans are reaped as they end, not left as zombies until the end.
    let outcome = served(
        &policy,
        "for i in $(seq 50); do (true &); done; sleep 0.2; \
         grep -l '^State:.*zombie' /proc/[0-9]*/status | wc -l",
    )
    .await;
    assert_eq!(outcome.stdout, "0\n", "{outcome:?}");

    // The next command runs in the same sandbox (its /tmp is the session's
    // scratch space), with its own exit code, stderr and large output.
    let outcome = served(
        &policy,
        "cat /tmp/scratch; head -c 300000 /dev/zero | tr '\\0' a; echo oops >&2; exit 3",
    )
    .await;
    assert_eq!(outcome.exit_code, Some(3));
    assert_eq!(outcome.stderr, "oops\n");
    assert_eq!(outcome.stdout.len(), 5 + 300_000);
    assert!(outcome.stdout.starts_with("kept\naaa"));
    assert_eq!(spares_waiting(), 1, "the sandbox went back to the pool");

    // A command over 64 KiB starts cold; the sandbox waits for the next one.
    let used = spares_used();
    let huge = format!(": {}; echo huge", "x".repeat(70_000));
    assert_eq!(run(&policy, &huge).await.stdout, "huge\n");
    assert_eq!(spares_used(), used);
    assert_eq!(served(&policy, "cat /tmp/scratch").await.stdout, "kept\n");

    // A command that runs beside it starts cold, and its end starts a spare;
    // the session's sandbox, coming back later, takes that one's place.
    let used = spares_used();
    let (slow, beside) = tokio::join!(run(&policy, "sleep 0.5; echo slow"), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        run(&policy, "echo beside").await
    });
    assert_eq!(
        (slow.stdout.as_str(), beside.stdout.as_str()),
        ("slow\n", "beside\n")
    );
    assert_eq!(spares_used(), used + 1, "one of the two was served");
    wait_for_spare().await;
    assert_eq!(served(&policy, "cat /tmp/scratch").await.stdout, "kept\n");
}

async fn timeout_and_cancel_end_the_served_sandbox() {
    let (_ws, policy) = served_workspace().await;
    let timeout = marker("served-timeout");
    let started = Instant::now();
    let outcome = run_for(
        &policy,
        &format!("echo before; bash -c 'sleep 30' {timeout} & sleep 30"),
        Duration::from_millis(300),
    )
    .await;
    assert!(outcome.timed_out && !outcome.cancelled, "{outcome:?}");
    assert_eq!(outcome.stdout, "before\n");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_none_left(&timeout).await;

    // A new sandbox replaces it; a cancel ends that one the same way.
    wait_for_spare().await;
    let cancelled = marker("served-cancel");
    let used = spares_used();
    let outcome = run_cancelled_after(
        &policy,
        &format!("echo > /tmp/left; bash -c 'sleep 30' {cancelled}"),
        Duration::from_millis(300),
    )
    .await;
    assert!(outcome.cancelled && !outcome.timed_out, "{outcome:?}");
    assert_eq!(spares_used(), used + 1);
    assert_none_left(&cancelled).await;
    wait_for_spare().await;
    let outcome = served(&policy, "test ! -e /tmp/left && echo fresh").await;
    assert_eq!(
        outcome.stdout, "fresh\n",
        "a new sandbox, not the cancelled one"
    );
}

async fn a_served_sandbox_cannot_be_stopped_and_a_dead_one_is_not_used() {
    let (ws, policy) = served_workspace().await;
    // The server is the sandbox's init: a command can neither kill nor stop it.
    let outcome = served(&policy, "kill -9 $PPID; kill -STOP $PPID; echo survived").await;
    assert_eq!(outcome.stdout, "survived\n", "{outcome:?}");
    assert_eq!(
        served(&policy, "echo same sandbox").await.stdout,
        "same sandbox\n"
    );

    // Its shell waiting for the next command, killed (for memory, say), is
    // replaced: the command runs, in the same sandbox, with its own status.
    let waiting = "BASH_EXECUTION_STRING; SECONDS=0";
    let deadline = Instant::now() + Duration::from_secs(5);
    while processes_mentioning(waiting) == 0 {
        assert!(
            Instant::now() < deadline,
            "no shell waits for the next command"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(kill_processes_mentioning(waiting) > 0);
    let outcome = served(&policy, "echo after a dead shell").await;
    assert_eq!(
        (outcome.stdout.as_str(), outcome.exit_code),
        ("after a dead shell\n", Some(0)),
        "{outcome:?}"
    );

    // One killed from outside while it waits is noticed when a command comes.
    wait_for_spare().await;
    let ws_name = ws.path.display().to_string();
    let killed = kill_processes_mentioning(&ws_name);
    assert!(killed > 0, "found the waiting sandbox");
    assert_none_left(&ws_name).await;
    let used = spares_used();
    let outcome = run(&policy, "echo works").await;
    assert_eq!(
        (outcome.stdout.as_str(), outcome.exit_code),
        ("works\n", Some(0))
    );
    assert_eq!(spares_used(), used, "ran cold");
    assert!(processes_mentioning(&ws_name) <= 2, "no sandboxes piled up");

    // One that ends during a command says so: what the command did is unknown.
    wait_for_spare().await;
    let ending = tokio::spawn(async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        kill_processes_mentioning(support::SERVE_ARGUMENT)
    });
    let ended = Sandbox
        .exec(
            &policy,
            &request("sleep 3; echo finished", Duration::from_secs(20)),
            None,
            CancellationToken::new(),
        )
        .await;
    assert!(ending.await.unwrap() > 0, "found the server");
    let err = ended.expect_err("the sandbox ended").to_string();
    assert!(
        err.contains("the sandbox ended while running the command"),
        "{err}"
    );
    assert_eq!(run(&policy, "echo again").await.stdout, "again\n");

    // The server itself is PID 1 of a serving sandbox; a policy allowing too
    // few open files for it gets a one-shot spare (bubblewrap's init there).
    wait_for_spare().await;
    assert_eq!(
        served(&policy, "cat /proc/1/comm").await.stdout,
        "agentd-sandbox\n"
    );
    let mut few_files = policy.clone();
    few_files.limits.open_files = Some(12);
    run(&few_files, "true").await;
    wait_for_spares(2).await;
    assert_eq!(
        served(&few_files, "cat /proc/1/comm").await.stdout,
        "bwrap\n"
    );
}

async fn a_command_that_changes_what_the_next_would_inherit_ends_its_sandbox() {
    let (_ws, policy) = served_workspace().await;
    let probe = "nice; ulimit -f -n; taskset -p $$ | sed 's/.*: //'";
    set_spare_capacity(0);
    let cold = run(&policy, probe).await.stdout;
    set_spare_capacity(4);
    for change in [
        "renice -n 7 -p 1",
        "prlimit --pid 1 --fsize=1000:1000 --nofile=20:20",
        "taskset -p 1 1",
    ] {
        run(&policy, "true").await;
        wait_for_spare().await;
        let outcome = served(&policy, &format!("{change} > /dev/null; echo changed")).await;
        assert_eq!(outcome.stdout, "changed\n", "{outcome:?}");
        wait_for_spare().await;
        assert_eq!(served(&policy, probe).await.stdout, cold, "after {change}");
    }
}

/// SIGKILL the host processes whose command line mentions `needle`, as
/// listed before the first kill (a sandbox the kill makes the server start
/// again is not one of them).
fn kill_processes_mentioning(needle: &str) -> usize {
    let pids: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let mentions = cmdline
                .windows(needle.len())
                .any(|window| window == needle.as_bytes());
            (mentions && pid != std::process::id()).then_some(pid)
        })
        .collect();
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    if !pids.is_empty() {
        let _ = std::process::Command::new("kill")
            .arg("-9")
            .args(&pids)
            .status();
    }
    // A killed process's command line reads empty before its parent can
    // reap it; wait until each can be reaped, as a parent would see it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|pid| !ended(pid)) {
        assert!(Instant::now() < deadline, "a killed process lives on");
        std::thread::sleep(Duration::from_millis(5));
    }
    pids.len()
}

/// Gone, or a zombie its parent can reap.
fn ended(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'))
    })
}

/// `prestart` readies the sandbox before any command ran under the policy
/// (a one-shot run's first turn), and starts nothing with spares off.
async fn a_prestarted_sandbox_serves_the_first_command() {
    let ws = workspace("agentd-served");
    let policy = Policy::new(&ws.path);
    set_spare_capacity(0);
    Sandbox.prestart(&policy);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(spares_waiting(), 0, "spares off: nothing prestarted");
    set_spare_capacity(4);
    Sandbox.prestart(&policy);
    wait_for_spare().await;
    Sandbox.prestart(&policy);
    assert_eq!(
        spares_waiting(),
        1,
        "one spare per policy, however often asked"
    );
    let outcome = served(&policy, "echo first").await;
    assert_eq!(outcome.stdout, "first\n");

    // Asked for while that sandbox is being set up: the command waits for it
    // rather than start a second one beside it. The first policy's sandbox
    // goes back to the pool after its command; wait for that first, so the
    // only start under way below is the second policy's.
    let deadline = Instant::now() + Duration::from_secs(10);
    while spares_starting() != 0 || spares_waiting() != 1 {
        assert!(
            Instant::now() < deadline,
            "the first sandbox never came back"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let other = workspace("agentd-served");
    let policy = Policy::new(&other.path);
    Sandbox.prestart(&policy);
    let deadline = Instant::now() + Duration::from_secs(10);
    while spares_starting() == 0 && spares_waiting() < 2 {
        assert!(Instant::now() < deadline, "the spare's start never began");
        tokio::task::yield_now().await;
    }
    let outcome = served(&policy, "echo second").await;
    assert_eq!(outcome.stdout, "second\n");
}
