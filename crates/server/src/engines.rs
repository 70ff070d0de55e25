//! Which engine runs a turn, and running it there: the model is resolved
//! once per turn into an [`EngineChoice`]; the native loop, its compaction
//! and the `claude-code` engine each run inside the engine's one frame
//! ([`agentd_engine::run_framed`]) and are recorded alike.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use agentd_claude_code::ClaudeCodeTurn;
use agentd_engine::{TurnInput, run_framed};
use agentd_protocol::{EventEnvelope, Message, TurnFinished};
use agentd_store::SessionRecord;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::ConfigError;
use crate::models::{ClaudeCodeSettings, EngineChoice, EnvLookup, ResolvedModel, resolve_model};
use crate::registry::TurnKind;
use crate::runtime::{RunError, Runtime, TurnOptions};
use crate::sink::StoreSink;

/// One turn as its caller asks for it.
pub struct TurnRequest<'a> {
    pub session: &'a SessionRecord,
    /// What the user sent: `turn.started` shows it, the session's title
    /// comes from its text.
    pub message: Message,
    pub options: TurnOptions,
    pub env: EnvLookup<'a>,
    /// Gets each event as it is stored.
    pub observer: Option<mpsc::UnboundedSender<EventEnvelope>>,
    pub cancel: CancellationToken,
}

impl Runtime {
    /// Run one turn of `kind`: the model is resolved once, into the
    /// engine that runs the turn.
    pub async fn run_work(
        &self,
        request: TurnRequest<'_>,
        kind: &TurnKind,
    ) -> Result<Option<TurnFinished>, RunError> {
        let spec = request
            .options
            .model
            .as_deref()
            .unwrap_or(&request.session.model);
        let model = resolve_model(&self.config, Some(spec), request.env)?;
        match (kind, model.engine()) {
            // Compaction is agentd's own, whichever engine the session runs on.
            (TurnKind::Compact, _) => self.run_native(request, model, true).await,
            (TurnKind::Message(_), EngineChoice::Native) => {
                self.run_native(request, model, false).await
            }
            (TurnKind::Message(_), EngineChoice::ClaudeCode(settings)) => {
                self.run_claude_turn(request, model, settings).await
            }
        }
    }

    /// A turn of the native loop, or (`compact`) only its compaction.
    async fn run_native(
        &self,
        request: TurnRequest<'_>,
        model: ResolvedModel,
        compact: bool,
    ) -> Result<Option<TurnFinished>, RunError> {
        let (session, options) = (request.session, &request.options);
        let text = request.message.text();
        let turn_position = Arc::new(OnceLock::new());
        // The transcript is read (read pool) while the agent is built and the
        // turn recorded (writes): the read is the longest of the three. The
        // turn is recorded only once its agent could be built.
        let (prepared, history) = tokio::join!(
            async {
                let (agent, commands) = self
                    .agent_for(session, options, request.env, turn_position.clone(), model)
                    .await?;
                let begun = self.begin_turn(session, options).await?;
                Ok::<_, RunError>((agent, commands, begun))
            },
            self.model_context(&session.id)
        );
        let (agent, commands, begun) = prepared?;
        let Some(turn_id) = begun else {
            return Ok(None);
        };
        let (history, last_position, wire_cache) = history?;
        let agent = agent.with_wire_cache(wire_cache);
        // Only the running turn appends to its session: its user message
        // comes next.
        let _ = turn_position.set(last_position as i64 + 1);
        let sink = self.sink_for(session, &turn_id, request.observer);
        let input = TurnInput {
            turn_id: turn_id.clone(),
            history,
            message: if compact {
                request.message
            } else {
                commands.apply(request.message)
            },
        };
        let finished = if compact {
            agent.run_compaction(input, &sink, request.cancel).await
        } else {
            agent.run_turn(input, &sink, request.cancel).await
        };
        self.record_finished_by(&sink, session, &turn_id, &text, &finished)
            .await?;
        Ok(Some(finished))
    }

    /// A turn of a `claude-code` session: the CLI drives it (see
    /// [`agentd_claude_code`]), framed and recorded like a native turn.
    async fn run_claude_turn(
        &self,
        request: TurnRequest<'_>,
        model: ResolvedModel,
        mut settings: ClaudeCodeSettings,
    ) -> Result<Option<TurnFinished>, RunError> {
        let (session, options) = (request.session, &request.options);
        let text = request.message.text();
        let profile = self.config.profile(&session.profile)?;
        // The CLI's user message is not the engine's: its checkpoints read
        // the turn's position back.
        let agent = Arc::new(
            self.agent_for(session, options, request.env, Arc::default(), model)
                .await?
                .0,
        );
        // Held until the turn is recorded: the session's key serves the CLI
        // only while a turn of it runs.
        let gateway_turn = match &settings.backend {
            Some(backend) => {
                let turn = self
                    .model_gateway
                    .open_turn(
                        &self.config,
                        request.env,
                        &session.id,
                        backend,
                        agent.clone(),
                    )
                    .await
                    .map_err(ConfigError::Invalid)?;
                settings.base_url = Some(turn.base_url.clone());
                settings.api_key = turn.api_key.clone();
                Some(turn)
            }
            None => None,
        };
        let Some(turn_id) = self.begin_turn(session, options).await? else {
            return Ok(None);
        };
        let sink = Arc::new(self.sink_for(session, &turn_id, request.observer));
        let engine = ClaudeCodeTurn {
            claude: self.claude.clone(),
            session_id: session.id.clone(),
            session_turns: session.turns,
            workspace: PathBuf::from(&session.workspace),
            data_dir: self.data_dir.clone(),
            store: self.store.clone(),
            settings,
            agent,
            sink: sink.clone(),
            timeout: std::time::Duration::from_secs(profile.turn_timeout_s),
            max_turns: options.max_turns.unwrap_or(profile.max_turns),
            meter: gateway_turn.as_ref().map(|turn| turn.meter()),
        };
        let input = TurnInput {
            turn_id: turn_id.clone(),
            history: Vec::new(),
            message: request.message,
        };
        let finished = run_framed(&engine, input, sink.as_ref(), request.cancel).await;
        drop(gateway_turn);
        self.record_finished_by(&sink, session, &turn_id, &text, &finished)
            .await?;
        Ok(Some(finished))
    }

    /// The turn's end recorded, unless its `sink` was fenced out: then the
    /// node that took the turn over records it (`LeaseLost`, nothing here).
    async fn record_finished_by(
        &self,
        sink: &StoreSink,
        session: &SessionRecord,
        turn_id: &str,
        text: &str,
        finished: &TurnFinished,
    ) -> Result<(), RunError> {
        if let Some(lost) = sink.lease_lost() {
            return Err(lost.into());
        }
        Ok(self
            .record_finished(session, turn_id, text, finished)
            .await?)
    }
}
