//! Exit codes of `agentd run` and `agentd serve` (documented in the README).

use agentd_protocol::TurnStatus;

pub const OK: u8 = 0;
pub const FAILED: u8 = 1;
pub const USAGE: u8 = 2;
pub const MAX_TURNS: u8 = 3;
pub const TIMEOUT: u8 = 4;
pub const BUDGET_EXCEEDED: u8 = 5;
pub const CIRCUIT_BREAKER: u8 = 6;
/// `agentd serve`: the shutdown gave up on something at `[server]
/// shutdown_deadline_s` (turns not recorded, a database that did not answer,
/// connections cut); what is logged.
pub const SHUTDOWN_INCOMPLETE: u8 = 7;
pub const INTERRUPTED: u8 = 130;

/// A command's failure: its exit code and what to print.
pub struct Failure(pub u8, pub String);

pub fn usage(err: impl std::fmt::Display) -> Failure {
    Failure(USAGE, err.to_string())
}

pub fn failed(err: impl std::fmt::Display) -> Failure {
    Failure(FAILED, err.to_string())
}

/// Print `err` as agentd's and return `code`.
pub fn report(code: u8, err: impl std::fmt::Display) -> u8 {
    eprintln!("agentd: {err}");
    code
}

/// An outcome's exit code; an error is printed and is [`FAILED`].
pub fn or_failed<E: std::fmt::Display>(outcome: Result<u8, E>) -> u8 {
    outcome.unwrap_or_else(|err| report(FAILED, err))
}

/// `value` as pretty JSON on stdout.
pub fn print_json(value: &impl serde::Serialize) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

pub fn for_status(status: TurnStatus) -> u8 {
    match status {
        TurnStatus::Completed => OK,
        TurnStatus::Failed => FAILED,
        TurnStatus::Interrupted => INTERRUPTED,
        TurnStatus::MaxTurns => MAX_TURNS,
        TurnStatus::Timeout => TIMEOUT,
        TurnStatus::BudgetExceeded => BUDGET_EXCEEDED,
        TurnStatus::CircuitBreaker => CIRCUIT_BREAKER,
    }
}
