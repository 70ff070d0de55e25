//! [`ErrorCode`]: every `code` of an [`crate::ErrorInfo`] (the `error` event
//! and `turn.finished`'s `error`) that agentd emits. Unknown codes read as
//! `Other` (see `wire_enum`).

wire_enum! {
    /// Why a turn failed or stopped, or what else went wrong: stable and
    /// machine-readable (the message is for people).
    pub enum ErrorCode {
        ModelAuth = "model_auth": "The model provider refused the credentials.",
        ModelBadRequest = "model_bad_request": "The model provider refused the request as malformed.",
        ContextOverflow = "context_overflow": "The conversation no longer fits the model's context window.",
        ModelRateLimited = "model_rate_limited": "The model provider rate-limited the call, past the retries.",
        ModelOverloaded = "model_overloaded": "The model provider was overloaded, past the retries.",
        ModelServerError = "model_server_error": "The model provider failed (5xx), past the retries.",
        ModelUnreachable = "model_unreachable": "The model provider could not be reached, past the retries.",
        ModelStreamBroken = "model_stream_broken": "The model's response stream broke off.",
        ModelProtocolError = "model_protocol_error": "The model sent something agentd could not read.",
        Cancelled = "cancelled": "A model call was cancelled.",
        StoreError = "store_error": "The store (database, disk) failed during or before the turn.",
        PromptBlocked = "prompt_blocked": "A `UserPromptSubmit` hook blocked the message.",
        CompactionFailed = "compaction_failed": "Compacting the context failed (the model wrote an empty summary).",
        CheckpointFailed = "checkpoint_failed": "The workspace could not be checkpointed, so the turn cannot be rewound to; the turn goes on.",
        MaxTurns = "max_turns": "The turn made `max_turns` model calls.",
        Timeout = "timeout": "The turn ran longer than its profile's `turn_timeout_s`.",
        BudgetExceeded = "budget_exceeded": "The turn (with its subagents) spent its `max_budget_usd`.",
        SpendQuotaExceeded = "spend_quota_exceeded": "The turn spent what was left of its owner's spend quota.",
        SessionBudgetExceeded = "session_budget_exceeded": "The session spent its `max_session_budget_usd`.",
        TooManyFailures = "too_many_failures": "The circuit breaker: too many tool calls in a row failed.",
        RepeatedCall = "repeated_call": "The circuit breaker: the agent made the same call over and over.",
        ServerRestarted = "server_restarted": "agentd stopped while the turn was running; it ended `interrupted`.",
        ServerStopped = "server_stopped": "agentd stopped before the queued turn could start.",
        WorkspaceUnavailable = "workspace_unavailable": "The session's workspace could not be prepared for the turn.",
        TurnNotStarted = "turn_not_started": "The turn could not start (its profile, model or workspace is unusable).",
        UserDisabled = "user_disabled": "The queued turn's user was disabled before it started.",
        NotGranted = "not_granted": "The queued turn's profile or model grant was taken back before it started.",
        QuotaExceeded = "quota_exceeded": "The queued turn's user reached a quota before it started.",
        RateLimited = "rate_limited": "The queued turn's user reached a turn rate limit before it started.",
        TurnLost = "turn_lost": "In a cluster: the turn stopped on its node without being recorded.",
        NodeLost = "node_lost": "In a cluster: the node running the turn stopped responding.",
        ClaudeCodeMcp = "claude_code_mcp": "The `claude-code` engine could not serve agentd's tools to the CLI.",
        ClaudeCodeStart = "claude_code_start": "The `claude-code` engine could not start the `claude` CLI.",
        ClaudeCodeCrashed = "claude_code_crashed": "The `claude` CLI exited during the turn.",
        ClaudeCodeInterrupt = "claude_code_interrupt": "The `claude` CLI did not stop its turn after an interrupt.",
        ClaudeCodeProtocol = "claude_code_protocol": "The `claude` CLI wrote something agentd could not read.",
        ClaudeCodeLineTooLong = "claude_code_line_too_long": "The `claude` CLI wrote a line over agentd's limit.",
        InvalidInput = "invalid_input": "`agentd run --input-format stream-json` read a stdin line that is not a usable user message (the turns before it ran).",
    }
    extra {
        ClaudeCodeResult(Box<str>) = "claude_code_" "<subtype>": "The `claude` CLI ended the turn with result `<subtype>` (e.g. `error_max_turns`, `error_during_execution`).",
    }
}
