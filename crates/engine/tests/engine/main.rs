//! The integration tests of `agentd-engine`, one module per area, in one test
//! binary: each `tests/*.rs` used to link its own 17–44 MB executable (6 of
//! them, 183 MB; now one of 49 MB), which ran CI out of disk. Tests of all
//! modules run in parallel threads of this one process, so none may rely on a
//! process of its own (environment, globals, fixed ports or paths). Run one
//! area with `cargo test -p agentd-engine --test engine <module>::`.

mod agent_tools;
mod approver_answers;
mod collected;
mod frame;
mod guardrails;
mod live_output;
mod prompt;
mod turn;
mod wire;
