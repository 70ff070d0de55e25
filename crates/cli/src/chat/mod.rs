//! `agentd chat`: an interactive terminal client for sessions.
//!
//! One code path: the chat always speaks agentd's HTTP API and event
//! stream. With `--server URL` that is a remote `agentd serve`; without, an
//! agentd server embedded in this process on this machine's store (see
//! `connect`), so local and remote chats behave the same.

pub(crate) mod api;
mod ask;
mod commands;
pub(crate) mod connect;
mod render;
mod term;
mod turn;

pub(crate) use connect::token;

use std::io::IsTerminal;
use std::path::PathBuf;

use agentd_protocol::Message;
use agentd_server::config::Config;
use crossterm::style::Stylize;
use serde_json::{Value, json};

use crate::SessionFlags;
use crate::exit::{self, Failure, usage};
use api::Api;
use commands::Slash;
use connect::Backend;
use term::{Input, Terminal};
use turn::Start;

#[derive(Debug, clap::Args)]
pub struct ChatArgs {
    #[command(flatten)]
    session: SessionFlags,
    /// Talk to this agentd server (e.g. `https://agents.example.com`) instead
    /// of this machine's store; the token comes from `AGENTD_TOKEN`, else
    /// the file `~/.config/agentd/token`.
    #[arg(long, env = "AGENTD_SERVER", value_name = "URL")]
    server: Option<String>,
}

/// The chat's state: where it talks, in which session, from which event on.
pub struct Conversation {
    api: Api,
    session: String,
    /// The last event seen: the next turn's stream starts after it.
    last_seq: u64,
    /// The session's profile (`/clear` makes a new session of it).
    profile: String,
    /// Keys typed while a turn ran: the next prompt starts with them.
    typed_ahead: String,
    term: Terminal,
    flags: SessionFlags,
    backend: Backend,
}

pub async fn run(args: ChatArgs, config: Config, data_dir: PathBuf) -> u8 {
    match chat(args, config, data_dir).await {
        Ok(()) => exit::OK,
        Err(Failure(code, message)) => exit::report(code, message),
    }
}

async fn chat(args: ChatArgs, config: Config, data_dir: PathBuf) -> Result<(), Failure> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(usage(
            "agentd chat needs a terminal; for scripts use `agentd run`",
        ));
    }
    let resumed = args.session.resume.is_some() || args.session.continue_latest;
    let connected = connect::connect(&args, config, data_dir.clone()).await?;
    let mut conversation = Conversation {
        api: connected.api,
        session: String::new(),
        last_seq: 0,
        profile: String::new(),
        typed_ahead: String::new(),
        term: Terminal::new(Some(data_dir.join("chat_history"))),
        flags: args.session,
        backend: connected.backend,
    };
    conversation.switch_to(&connected.session);
    conversation.term.set_raw(true);
    let mut view = connected.session;
    if resumed {
        let shown = conversation.show_transcript().await;
        conversation.report(shown);
        // As it is now (a turn may have moved on); `--model` on a resumed
        // session switches it, as `/model` would.
        let path = format!("/v1/sessions/{}", conversation.session);
        let now = match conversation.flags.model.clone() {
            Some(model) => conversation.api.patch(&path, json!({"model": model})).await,
            None => conversation.api.get(&path).await,
        };
        match now {
            Ok(now) => view = now,
            Err(err) => conversation.report::<()>(Err(err)),
        }
    }
    conversation.greet(&view);
    // A turn still running (or waiting for an answer) is followed first:
    // until it ends, every message would be refused.
    if let Some(turn_id) = view["running_turn_id"].as_str() {
        let replay_end = view["last_seq"].as_u64().unwrap_or(0);
        let followed = conversation.follow_running(turn_id, replay_end).await;
        conversation.report(followed);
    }
    conversation.repl().await;
    conversation.term.set_raw(false);
    conversation.backend.close().await;
    Ok(())
}

impl Conversation {
    fn greet(&mut self, session: &Value) {
        let model = session["model"].as_str().unwrap_or_default();
        self.term.line(
            format!(
                "agentd chat · session {} · model {model} · /help for commands, \
                 Esc interrupts, Ctrl-D exits",
                self.session
            )
            .dim(),
        );
    }

    /// Read and act on lines until the person leaves.
    async fn repl(&mut self) {
        let mut ctrl_c = false;
        loop {
            let ahead = std::mem::take(&mut self.typed_ahead);
            self.term.prefill(&ahead);
            let line = match self.term.read("› ") {
                Input::Line(line) => line,
                Input::CtrlC if ctrl_c => return,
                Input::CtrlC => {
                    ctrl_c = true;
                    self.term.line("(press Ctrl-C again to exit)".dim());
                    continue;
                }
                Input::End => return,
            };
            ctrl_c = false;
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            match Slash::parse(line) {
                Some(command) => {
                    if !self.command(command).await {
                        return;
                    }
                }
                None => {
                    let outcome = self.turn(Start::Message(line.to_string())).await;
                    self.report(outcome);
                }
            }
        }
    }

    /// The session's transcript so far (`--resume`, `--continue`).
    async fn show_transcript(&mut self) -> api::ApiResult<()> {
        let path = format!("/v1/sessions/{}/messages", self.session);
        let transcript = self.api.get(&path).await?;
        let messages: Vec<Message> = transcript["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|stored| serde_json::from_value(stored["message"].clone()).ok())
            .collect();
        render::transcript(&mut self.term, &messages);
        Ok(())
    }
}
