//! The integration tests of `agentd-tools`, one module per area, in one test
//! binary: each `tests/*.rs` used to link its own 17–39 MB executable (7 of
//! them, 238 MB; now one of 54 MB), which ran CI out of disk. Tests of all
//! modules run in parallel threads of this one process, so none may rely on a
//! process of its own (environment, globals, fixed ports or paths). Run one
//! area with `cargo test -p agentd-tools --test tools <module>::`.

mod mcp_support;
mod support;

mod background;
mod bash_tool;
mod commands;
mod confinement;
mod file_tools;
mod mcp;
mod mcp_mounts;
mod races;
mod search_tools;
mod skills;
mod web_fetch;
mod web_fetch_egress;
