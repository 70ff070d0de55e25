//! The integration tests of `agentd-policy`, in one test binary. Run one area
//! with `cargo test -p agentd-policy --test policy <module>::`.

mod hooks;
