//! The integration tests of `agentd-testkit`, one module per area, in one test
//! binary: each `tests/*.rs` used to link its own 16–23 MB executable (4 of
//! them, 85 MB; now one of 24 MB), which ran CI out of disk. Tests of all
//! modules run in parallel threads of this one process, so none may rely on a
//! process of its own (environment, globals, fixed ports or paths). Run one
//! area with `cargo test -p agentd-testkit --test testkit <module>::`.

mod support;

mod anthropic;
mod claude_cli;
mod faults;
mod openai;
