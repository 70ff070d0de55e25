//! The small closed-ish vocabularies of permission requests and questions:
//! what was decided ([`Decision`]), who or what resolved a request
//! ([`Resolver`], the events' `by`), and which kind a pending request is
//! ([`PendingKind`]). Unknown values read as `Other` (see `wire_enum`).

wire_enum! {
    /// How a permission request was decided (`permission.resolved`'s `decision`).
    pub enum Decision {
        Allow = "allow": "The call runs.",
        AllowSession = "allow_session": "The call runs, and the same call is allowed for the rest of the session.",
        Deny = "deny": "The call does not run; the model is told so.",
    }
}

wire_enum! {
    /// Which kind of request waits for an answer (`GET …/pending`'s `kind`).
    pub enum PendingKind {
        Permission = "permission": "A tool call waits for a permission (`permission.requested`).",
        Question = "question": "The agent asked the user (`question.asked`).",
    }
}

wire_enum! {
    /// Who or what resolved a permission request or question: the `by` of
    /// `permission.resolved` and `question.answered`.
    pub enum Resolver {
        Terminal = "user": "The person at `agentd run`'s terminal.",
        Client = "client": "The program that started `agentd claude` (an Agent SDK app's `canUseTool` callback).",
        Timeout = "timeout": "Nobody answered within the profile's `approval_timeout_s`; its `on_no_answer` applied.",
        Interrupted = "interrupted": "The turn was interrupted while it waited.",
        Restart = "restart": "agentd stopped while the turn waited; the turn ended `interrupted`.",
        NoTerminal = "no_terminal": "`agentd run` had no terminal to ask at; the profile's `on_no_answer` applied.",
        NoApprover = "no_approver": "Nobody can answer where the agent runs; permissions are denied.",
        StoreError = "store_error": "The request could not be stored, so nobody could answer it.",
    }
    extra {
        User(Box<str>) = "user:" "<name>": "The signed-in user `<name>` answered through the API.",
    }
}

/// Events stored before `question.answered` had a `by` read with an empty one.
impl Default for Resolver {
    fn default() -> Self {
        Resolver::Other(String::new())
    }
}
