//! Command tools: operator verbs (`[[commands]]` in the config) offered to
//! the model as tools, and callable by a user without it.
//!
//! A command is a FIXED argv whose `{param}` elements are replaced, whole,
//! by arguments checked against a typed schema. Nothing goes through a
//! shell, nothing is split, and a value that could be read as an option
//! (`-x`, `--`), hide a line break or a control character, pass for another
//! letter (non-ASCII) or be re-parsed by a remote shell (`ssh host cmd
//! {x}` joins its arguments into a shell line) is refused before anything
//! runs. Where it runs: in the session's sandbox (as `Bash` does), or on the
//! host as a configured unprivileged user — never as root, and never on the
//! host unless configured so.

mod args;
mod config;
mod runner;
mod spec;
mod tool;

#[cfg(test)]
mod tests;

pub use args::argv_for;
pub use config::{CommandToml, ParamToml};
pub use runner::{CommandEnv, CommandRun, EnvFiller, OUTPUT_CAP, command_env, run_command};
pub use spec::{ArgvPart, CommandSpec, Param, ParamType, RunsOn};
pub use tool::{CommandTool, RUNS_MARK};
