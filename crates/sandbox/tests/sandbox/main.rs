//! The integration tests of `agentd-sandbox`, one module per area, in one test
//! binary: each `tests/*.rs` used to link its own 8–12 MB executable (5 of
//! them, 53 MB; now one of 12 MB), which ran CI out of disk. Tests of all
//! modules run in parallel threads of this one process, so none may rely on a
//! process of its own (environment, globals, fixed ports or paths): `secrets`
//! runs its probe in a copy of this binary started with the secrets in its
//! environment, and the process-wide spare pool is kept to the `spares` tests
//! by a lock (`support::exclusive_pool`). Run one area with
//! `cargo test -p agentd-sandbox --test sandbox <module>::`.

mod support;

mod background;
mod escapes;
mod exec;
mod limits;
mod mounts;
mod run_as;
mod secrets;
mod spares;
mod ssh_agent;
