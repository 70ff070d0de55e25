//! Slash commands. A line starting with `/` that is none of these goes to
//! the agent as a message (the server expands project commands).

use crossterm::style::Stylize;
use serde_json::{Value, json};

use super::Conversation;
use super::api::ApiResult;
use super::term::Input;
use super::turn::Start;

#[derive(Debug, PartialEq, Eq)]
pub enum Slash {
    Compact,
    /// To a checkpoint by its number in the list; asks when absent.
    Rewind(Option<usize>),
    Fork,
    /// Switch to this model; show the current one when absent.
    Model(Option<String>),
    Clear,
    Cost,
    Help,
    Exit,
}

impl Slash {
    /// The command on `line`, if it is one of ours.
    pub fn parse(line: &str) -> Option<Self> {
        let mut words = line.split_whitespace();
        let name = words.next()?;
        let arg = words.next().map(str::to_string);
        let command = match name {
            "/compact" => Slash::Compact,
            "/rewind" => Slash::Rewind(arg.and_then(|n| n.parse().ok())),
            "/fork" => Slash::Fork,
            "/model" => Slash::Model(arg),
            "/clear" => Slash::Clear,
            "/cost" => Slash::Cost,
            "/help" => Slash::Help,
            "/exit" | "/quit" => Slash::Exit,
            _ => return None,
        };
        Some(command)
    }
}

const HELP: &str = "\
/compact       summarise the conversation so far (frees context)
/rewind [N]    go back to before an earlier message (its files and transcript)
/fork          continue in a copy of this session
/model [NAME]  show or switch the model of the next turns
/clear         start a new session
/cost          tokens and cost of this session
/help          this list
/exit          leave (also Ctrl-D, or Ctrl-C twice)
Esc or Ctrl-C interrupts a running turn. Any other /line is sent to the agent.";

impl Conversation {
    /// Run `command`; whether the chat goes on.
    pub async fn command(&mut self, command: Slash) -> bool {
        let outcome = match command {
            Slash::Exit => return false,
            Slash::Help => {
                for line in HELP.lines() {
                    self.term.line(line);
                }
                Ok(())
            }
            Slash::Compact => self.turn(Start::Compact).await,
            Slash::Rewind(n) => self.rewind(n).await,
            Slash::Fork => self.fork().await,
            Slash::Model(name) => self.model(name).await,
            Slash::Clear => self.clear().await,
            Slash::Cost => self.cost().await,
        };
        self.report(outcome);
        true
    }

    async fn rewind(&mut self, pick: Option<usize>) -> ApiResult<()> {
        let id = self.session.clone();
        let checkpoints = self
            .api
            .get(&format!("/v1/sessions/{id}/checkpoints"))
            .await?;
        let messages = self.api.get(&format!("/v1/sessions/{id}/messages")).await?;
        let checkpoints = checkpoints["checkpoints"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if checkpoints.is_empty() {
            self.term
                .line("(nothing to rewind to: no turn has changed the workspace yet)");
            return Ok(());
        }
        for (n, checkpoint) in checkpoints.iter().enumerate() {
            let text = user_text_at(&messages, checkpoint["message_position"].as_i64());
            self.term.line(format!("{:>3}. {text}", n + 1));
        }
        let pick = match pick {
            Some(n) => Some(n),
            None => match self
                .term
                .read("rewind to before which message? (number, Enter: none) ")
            {
                Input::Line(line) => line.trim().parse().ok(),
                _ => None,
            },
        };
        let Some(checkpoint) = pick.and_then(|n| checkpoints.get(n.checked_sub(1)?)) else {
            self.term.line("(not rewound)");
            return Ok(());
        };
        let body = json!({"checkpoint_id": checkpoint["id"]});
        let rewound = self
            .api
            .post(&format!("/v1/sessions/{id}/rewind"), body)
            .await?;
        self.term.line(format!(
            "(rewound: {} files restored, {} messages removed)",
            rewound["files_restored"].as_array().map_or(0, Vec::len),
            rewound["messages_removed"]
        ));
        Ok(())
    }

    async fn fork(&mut self) -> ApiResult<()> {
        let from = self.session.clone();
        let forked = self
            .api
            .post(&format!("/v1/sessions/{from}/fork"), json!({}))
            .await?;
        self.switch_to(&forked);
        self.term
            .line(format!("(forked {from}: now in session {})", self.session).dim());
        Ok(())
    }

    async fn model(&mut self, name: Option<String>) -> ApiResult<()> {
        let path = format!("/v1/sessions/{}", self.session);
        let session = match name {
            Some(name) => self.api.patch(&path, json!({"model": name})).await?,
            None => self.api.get(&path).await?,
        };
        let model = session["model"].as_str().unwrap_or_default();
        self.term.line(format!("(model: {model})"));
        Ok(())
    }

    async fn clear(&mut self) -> ApiResult<()> {
        match self
            .backend
            .new_session(&self.api, &self.flags, &self.profile)
            .await
        {
            Ok(session) => {
                self.switch_to(&session);
                self.term
                    .line(format!("(new session {})", self.session).dim());
            }
            Err(err) => self.term.line(format!("error: {err}").red()),
        }
        Ok(())
    }

    async fn cost(&mut self) -> ApiResult<()> {
        let session = self.api.session(&self.session).await?;
        let totals = &session["totals"];
        self.term.line(format!(
            "{} turns, {} input + {} output tokens ({} read from cache), ${:.4}",
            totals["turns"],
            totals["input_tokens"],
            totals["output_tokens"],
            totals["cache_read_tokens"],
            totals["cost_usd"].as_f64().unwrap_or(0.0)
        ));
        Ok(())
    }

    /// Talk in `session` (a session view) from now on.
    pub fn switch_to(&mut self, session: &Value) {
        self.session = session["id"].as_str().unwrap_or_default().to_string();
        self.last_seq = session["last_seq"].as_u64().unwrap_or(0);
        self.profile = session["profile"].as_str().unwrap_or("default").to_string();
    }
}

/// The text of the user message at `position` of a transcript.
fn user_text_at(transcript: &Value, position: Option<i64>) -> String {
    let message = transcript["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["position"].as_i64() == position);
    let text = message
        .and_then(|m| m["message"]["content"].as_array())
        .into_iter()
        .flatten()
        .find_map(|block| block["text"].as_str())
        .unwrap_or("(a message)");
    crate::output::first_line(text, 70)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_commands_are_ours() {
        assert_eq!(Slash::parse("/compact"), Some(Slash::Compact));
        assert_eq!(Slash::parse("/rewind 2"), Some(Slash::Rewind(Some(2))));
        assert_eq!(
            Slash::parse("/model  haiku"),
            Some(Slash::Model(Some("haiku".into())))
        );
        // A project command: the server expands it.
        assert_eq!(Slash::parse("/review src/main.rs"), None);
    }
}
