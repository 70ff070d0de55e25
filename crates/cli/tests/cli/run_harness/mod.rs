//! Running the real `agentd` binary against the testkit model server.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use agentd_model::scripted::Script;
use agentd_protocol::{Event, EventEnvelope, TurnFinished};
use agentd_testkit::{ModelServer, RecordedRequest};
use serde_json::Value;
use tempfile::TempDir;

/// Which wire format the run speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Anthropic,
    OpenAi,
}

pub struct Harness {
    pub server: ModelServer,
    pub workspace: TempDir,
    pub data_dir: TempDir,
    pub wire: Wire,
    pub config: Option<PathBuf>,
}

impl Harness {
    pub async fn new(wire: Wire, script: Value) -> Self {
        let script: Script = serde_json::from_value(script).unwrap();
        Self {
            server: ModelServer::start(script).await.unwrap(),
            workspace: TempDir::new().unwrap(),
            data_dir: TempDir::new().unwrap(),
            wire,
            config: None,
        }
    }

    pub fn ws(&self) -> &Path {
        self.workspace.path()
    }

    /// Write an agentd.toml into the data dir's sibling and use it.
    pub fn with_config(mut self, toml: &str) -> Self {
        let path = self.data_dir.path().join("agentd.toml");
        std::fs::write(&path, toml.replace("{URL}", &self.server.url())).unwrap();
        self.config = Some(path);
        self
    }

    /// `agentd` with a clean environment pointing at the model server.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.program(Path::new(env!("CARGO_BIN_EXE_agentd")));
        cmd.args(args);
        cmd
    }

    /// `program` (agentd, or a client that starts it) in the workspace, with
    /// the clean environment agentd gets: the model server, the data dir.
    pub fn program(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .env("HOME", self.data_dir.path())
            .env("AGENTD_DATA_DIR", self.data_dir.path())
            .current_dir(self.ws())
            .stdin(Stdio::null());
        match self.wire {
            Wire::Anthropic => cmd
                .env("ANTHROPIC_API_KEY", "test-key")
                .env("ANTHROPIC_BASE_URL", self.server.url()),
            Wire::OpenAi => cmd
                .env("OPENAI_API_KEY", "test-key")
                .env("OPENAI_BASE_URL", self.server.openai_base_url()),
        };
        if let Some(config) = &self.config {
            cmd.env("AGENTD_CONFIG", config);
        }
        cmd
    }

    /// `agentd run --output-format stream-json --permission-mode bypass
    /// PROMPT`, not started (for a test that watches or signals it).
    pub fn run_command(&self, prompt: &str) -> Command {
        self.command(&[
            "run",
            "--output-format",
            "stream-json",
            "--permission-mode",
            "bypass",
            prompt,
        ])
    }

    /// `agentd run --output-format stream-json --permission-mode bypass PROMPT
    /// EXTRA…`, run to its end (tests of permissions use [`Harness::run_as_is`]).
    pub async fn run(&self, prompt: &str, extra: &[&str]) -> Run {
        let mut args = vec!["--permission-mode", "bypass"];
        args.extend_from_slice(extra);
        self.run_as_is(prompt, &args).await
    }

    /// `agentd run --output-format stream-json EXTRA… PROMPT`.
    pub async fn run_as_is(&self, prompt: &str, extra: &[&str]) -> Run {
        let mut args = vec!["run", "--output-format", "stream-json"];
        args.extend_from_slice(extra);
        args.push(prompt);
        let mut cmd = self.command(&args);
        let output = tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap();
        Run::from_output(output)
    }

    /// `agentd run --input-format stream-json --output-format stream-json
    /// --permission-mode bypass EXTRA…` with `stdin` written and closed.
    pub async fn run_stdin(&self, stdin: &str, extra: &[&str]) -> Run {
        let mut args = stream_json_run("bypass");
        args.extend_from_slice(extra);
        let mut cmd = self.command(&args);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let stdin = stdin.to_string();
        let output = tokio::task::spawn_blocking(move || {
            use std::io::Write;
            let mut child = cmd.spawn().unwrap();
            let mut pipe = child.stdin.take().unwrap();
            // The run may stop reading early (a bad line): ignore EPIPE.
            let _ = pipe.write_all(stdin.as_bytes());
            drop(pipe);
            child.wait_with_output().unwrap()
        })
        .await
        .unwrap();
        Run::from_output(output)
    }

    pub fn model_requests(&self) -> Vec<RecordedRequest> {
        self.server
            .requests()
            .into_iter()
            .filter(|r| r.path.ends_with("/messages") || r.path.ends_with("/chat/completions"))
            .collect()
    }

    pub async fn store(&self) -> agentd_store::sqlite::SqliteStore {
        agentd_store::sqlite::SqliteStore::open(&self.data_dir.path().join("agentd.db"))
            .await
            .unwrap()
    }
}

pub struct Run {
    pub code: i32,
    pub events: Vec<EventEnvelope>,
    pub stderr: String,
}

impl Run {
    pub fn from_output(output: Output) -> Self {
        let stdout = String::from_utf8(output.stdout).unwrap();
        let events = stdout
            .lines()
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|err| panic!("not an event line ({err}): {line}"))
            })
            .collect();
        Self {
            code: output.status.code().unwrap_or(-1),
            events,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    pub fn session_id(&self) -> String {
        self.events.first().expect("no events").session_id.clone()
    }

    pub fn types(&self) -> Vec<&'static str> {
        self.events.iter().map(|e| e.event.type_name()).collect()
    }

    pub fn finished(&self) -> &TurnFinished {
        self.events
            .iter()
            .find_map(|e| match &e.event {
                Event::TurnFinished(f) => Some(f),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no turn.finished; stderr: {}", self.stderr))
    }

    /// Seqs are consecutive from `first`.
    pub fn assert_gapless_from(&self, first: u64) {
        let seqs: Vec<u64> = self.events.iter().map(|e| e.seq).collect();
        let expected: Vec<u64> = (first..first + seqs.len() as u64).collect();
        assert_eq!(seqs, expected);
    }
}

/// The request body's messages, whatever the wire format.
pub fn request_text(request: &RecordedRequest) -> String {
    request.body.to_string()
}

/// `agentd run` with messages on stdin and events out, as JSON lines, in `mode`.
pub fn stream_json_run(mode: &str) -> Vec<&str> {
    vec![
        "run",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--permission-mode",
        mode,
    ]
}
