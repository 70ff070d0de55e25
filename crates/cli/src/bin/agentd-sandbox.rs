//! The small executable agentd starts sandboxes through (see
//! `agentd_sandbox::enter_exe`): the trampoline, a serving sandbox's init and
//! the egress forwarder, without the rest of agentd.

use std::process::ExitCode;

fn main() -> ExitCode {
    agentd_sandbox::trampoline::run_if_asked();
    eprintln!("agentd-sandbox: agentd starts this to enter a sandbox; it is not run by hand");
    ExitCode::from(2)
}
