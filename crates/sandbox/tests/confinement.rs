//! Confinement against the real bubblewrap, through the trampoline (as the
//! `agentd` binary runs it), with spares off (cold starts) and on (serving
//! sandboxes): agent work runs as the session's unprivileged user when the
//! server is root, and a concurrent swap of `.git` never gets a host path
//! mounted, written or created; the egress bridge reaches the host's proxy
//! from every kind of program. Own `main` (`harness = false`): the
//! trampoline must be first in `main`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "confinement/egress.rs"]
mod egress;
#[path = "confinement/git_race.rs"]
mod git_race;
#[path = "confinement/run_as.rs"]
mod run_as;
#[path = "sandbox/support/mod.rs"]
mod support;

use std::future::Future;
use std::pin::Pin;

use agentd_sandbox::set_spare_capacity;

type Case = fn() -> Pin<Box<dyn Future<Output = ()>>>;

fn main() {
    agentd_sandbox::trampoline::run_if_asked();
    agentd_sandbox::trampoline::enable();
    if let Some(copy) = std::env::var_os(egress::SWAPPED) {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(egress::swapped_child(std::path::Path::new(&copy)));
        return;
    }
    let cases: [(&str, Case, usize); 9] = [
        (
            "agent_work_runs_as_the_session_user_cold",
            || Box::pin(run_as::agent_work_runs_as_the_session_user(false)),
            0,
        ),
        (
            "agent_work_runs_as_the_session_user_served",
            || Box::pin(run_as::agent_work_runs_as_the_session_user(true)),
            4,
        ),
        (
            "git_swaps_never_reach_the_host_cold",
            || Box::pin(git_race::git_swaps_never_reach_the_host(false)),
            0,
        ),
        (
            "git_swaps_never_reach_the_host_served",
            || Box::pin(git_race::git_swaps_never_reach_the_host(true)),
            4,
        ),
        (
            "the_process_limit_binds_the_agents_sandbox",
            || Box::pin(run_as::the_process_limit_binds_the_agents_sandbox()),
            0,
        ),
        (
            "egress_commands_reach_the_host_proxy_cold",
            || Box::pin(egress::commands_reach_the_host_proxy(false)),
            0,
        ),
        (
            "egress_commands_reach_the_host_proxy_spare",
            || Box::pin(egress::commands_reach_the_host_proxy(true)),
            4,
        ),
        (
            "egress_an_exec_d_program_reaches_the_host_proxy",
            || Box::pin(egress::an_exec_d_program_reaches_the_host_proxy()),
            0,
        ),
        (
            "egress_a_replaced_executable_is_never_the_forwarder",
            || Box::pin(egress::a_replaced_executable_is_never_the_forwarder()),
            0,
        ),
    ];
    let filter = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut passed = 0;
    for (name, case, spares) in cases {
        if filter
            .as_ref()
            .is_some_and(|filter| !name.contains(filter.as_str()))
        {
            continue;
        }
        set_spare_capacity(0);
        set_spare_capacity(spares);
        runtime.block_on(case());
        println!("test {name} ... ok");
        passed += 1;
    }
    set_spare_capacity(0);
    println!("\ntest result: ok. {passed} passed; 0 failed; 0 ignored");
}
