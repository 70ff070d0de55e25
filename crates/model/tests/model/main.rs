//! The integration tests of `agentd-model`, one module per provider, in one
//! test binary: each `tests/*.rs` used to link its own 24 MB executable (2 of
//! them, 47 MB; now one of 24 MB), which ran CI out of disk. Tests of all
//! modules run in parallel threads of this one process, so none may rely on a
//! process of its own (environment, globals, fixed ports or paths). Run one
//! provider with `cargo test -p agentd-model --test model <module>::`.

mod support;

mod anthropic_http;
mod openai_http;
