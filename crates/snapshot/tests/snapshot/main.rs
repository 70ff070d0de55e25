//! The integration tests of `agentd-snapshot`, in one test binary. Run one
//! area with `cargo test -p agentd-snapshot --test snapshot <module>::`.

mod race;
mod snapshots;
mod trees;
