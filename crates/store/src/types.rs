use agentd_protocol::{EventEnvelope, Message, TurnStatus, Usage};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    Idle,
    Running,
    Waiting,
}

/// `as_str` and `parse` of an enum stored as text, from one list of each
/// variant's text.
macro_rules! text_enum {
    ($name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        impl $name {
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }
    };
}
pub(crate) use text_enum;

text_enum!(SessionStatus { Idle = "idle", Running = "running", Waiting = "waiting" });

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub id: String,
    pub owner: String,
    pub title: Option<String>,
    pub workspace: String,
    /// `workspace` is an existing directory a user chose (under their
    /// roots, or a project's), not one agentd made or `agentd run` was given.
    #[serde(default)]
    pub existing_workspace: bool,
    pub model: String,
    pub profile: String,
    /// The session's own extended-thinking budget, set over HTTP; wins over
    /// its profile's and its model's. `None`: theirs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    pub status: SessionStatus,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Totals over all turns.
    pub usage: Usage,
    pub cost_usd: f64,
    pub turns: u64,
    /// The highest event `seq` so far (0 when none).
    pub last_seq: u64,
    /// Listed first (`PATCH /v1/sessions/{id}`).
    #[serde(default)]
    pub pinned: bool,
    /// Hidden from lists unless asked for.
    #[serde(default)]
    pub archived: bool,
    /// The owner's labels, as the server validated them.
    #[serde(default)]
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    /// Chosen by the store (UUID v7) when `None`.
    pub id: Option<String>,
    pub owner: String,
    pub title: Option<String>,
    pub workspace: String,
    /// See [`SessionRecord::existing_workspace`].
    pub existing_workspace: bool,
    pub model: String,
    pub profile: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionUpdate {
    pub title: Option<String>,
    pub status: Option<SessionStatus>,
    /// The model of the next turns (a resolved spec).
    pub model: Option<String>,
    /// The session's own thinking budget: `Some(None)` clears it (back to
    /// its profile's or model's), `None` leaves it.
    pub thinking_budget: Option<Option<u32>>,
    /// Added to the totals.
    pub add_usage: Option<Usage>,
    pub add_cost_usd: Option<f64>,
    pub add_turns: Option<u64>,
    pub pinned: Option<bool>,
    pub archived: Option<bool>,
    /// Replaces the tags.
    pub tags: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    pub id: String,
    pub session_id: String,
    pub turn_id: Option<String>,
    /// 1, 2, 3, … within the session.
    pub position: u64,
    pub message: Message,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    pub id: String,
    pub session_id: String,
    /// `None` while running.
    pub status: Option<TurnStatus>,
    pub client_request_id: Option<String>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TurnStart {
    Started(TurnRecord),
    /// The `client_request_id` was seen before; this is that turn.
    Duplicate(TurnRecord),
}

/// A person or program that owns sessions. Sessions name their owner by
/// `name`, so `auth = "none"` and `"header"` work without user rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserRecord {
    pub id: String,
    pub name: String,
    pub is_admin: bool,
    pub created_at: DateTime<Utc>,
    pub disabled_at: Option<DateTime<Utc>>,
}

/// An API token as stored: only its SHA-256 (`token_hash`, hex) and a short
/// non-secret `prefix` to recognise it by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenRecord {
    pub id: String,
    pub user_id: String,
    /// The owner's name (joined from `users`).
    pub user_name: String,
    /// Set when the owner is disabled: the token no longer works.
    pub user_disabled: bool,
    /// Whether the owner is an admin.
    #[serde(default)]
    pub user_is_admin: bool,
    /// A label chosen at creation.
    pub name: String,
    pub token_hash: String,
    pub prefix: String,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl TokenRecord {
    /// Whether the token may authenticate a request at `now`.
    pub fn is_usable(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none()
            && !self.user_disabled
            && self.expires_at.is_none_or(|at| at > now)
    }
}

/// An open or answered permission request or question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingRecord {
    pub id: String,
    pub session_id: String,
    pub turn_id: Option<String>,
    pub kind: agentd_protocol::PendingKind,
    pub call_id: Option<String>,
    /// The request as clients see it.
    pub data: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
    /// The decision or answers; `None` while open.
    pub resolution: Option<serde_json::Value>,
}

/// A checkpoint: the state of a session before one of its turns, to rewind
/// to. The workspace files are in a manifest (path -> blob hash) stored as a
/// blob itself; the transcript part is `message_position`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointRecord {
    pub id: String,
    pub session_id: String,
    pub turn_id: Option<String>,
    /// The transcript position of the turn's user message: rewinding to this
    /// checkpoint deletes the messages with `position >= message_position`
    /// (see [`Store::truncate_history`](crate::Store::truncate_history)).
    pub message_position: i64,
    /// The hash of the blob holding the encoded manifest.
    pub manifest_hash: String,
    /// The checkpoint whose manifest this one's is a delta against; `None`
    /// for a full manifest.
    pub base_checkpoint_id: Option<String>,
    /// Paths changed since the previous checkpoint, for display.
    pub files: Vec<String>,
    pub stats: serde_json::Value,
    /// Kept to the millisecond.
    pub created_at: DateTime<Utc>,
}

/// A compaction of a session's transcript: after it, the model's context is
/// `summary`, then the messages with `position >= first_kept_position`. The
/// transcript itself stays whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionRecord {
    pub id: String,
    pub session_id: String,
    pub turn_id: Option<String>,
    /// `auto` (the context grew too large) or `manual` (asked for).
    pub trigger: String,
    pub summary: String,
    /// The model's context as the compaction left it: the summary as a user
    /// message, then the recent messages kept verbatim.
    pub context: Vec<agentd_protocol::Message>,
    /// Messages from this position on came after the compaction and follow
    /// `context` in the model's view.
    pub first_kept_position: i64,
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// Kept to the millisecond.
    pub created_at: DateTime<Utc>,
}

/// Everything of one session, to move it between stores (`agentd sessions
/// export`/`import`): the record with its totals, the transcript, the event
/// log with its `seq`s and times, turns, permission requests and rules.
///
/// Checkpoints, their blobs and compactions are left out: an imported session
/// has nothing to rewind to, and its model context is its whole transcript
/// again (no summary). So are its host mounts: host paths need not mean the
/// same in another store, and mounts are granted per user by the server
/// that runs the session (an imported session has none). The transcript itself is complete and consistent:
/// messages a history truncation removed are not in it, and the positions of
/// the rest are gapless from 1, so appends after an import continue as they
/// would have in the source store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionExport {
    /// [`SessionExport::FORMAT`] when written by this version.
    pub format: u32,
    pub session: SessionRecord,
    pub messages: Vec<StoredMessage>,
    pub events: Vec<EventEnvelope>,
    pub turns: Vec<TurnRecord>,
    pub pending: Vec<PendingRecord>,
    /// Permission rules allowed for the session, in their stored order.
    pub rules: Vec<String>,
}

impl SessionExport {
    pub const FORMAT: u32 = 1;
}

/// What a new checkpoint is made against: the session's latest checkpoint
/// and its latest keyframe (a checkpoint with a full manifest).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatestCheckpoints {
    pub keyframe: Option<CheckpointRecord>,
    pub last: Option<CheckpointRecord>,
}
