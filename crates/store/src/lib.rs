//! Durable state behind one trait, [`Store`]: sessions, the lossless transcript
//! (messages), the event log with a gapless per-session `seq`, turns, users
//! with their API tokens (stored hashed), checkpoints with the
//! content-addressed blobs they refer to, and compactions.
//!
//! Backends: [`sqlite::SqliteStore`] (embedded, WAL; the default) and
//! [`postgres::PostgresStore`] (shared, pooled). Each backend
//! has its own migration set and must behave identically: each query is
//! written once (`queries`, one module a role, over the `dialect` layer) and
//! runs on both; a backend keeps only what truly differs.

mod access;
mod agent_uids;
mod dialect;
mod error;
mod identities;
mod log;
mod migrate;
mod queries;
mod records;
mod search;
mod signing_keys;
mod types;
mod webhooks;

pub mod postgres;
pub mod sqlite;

pub use access::{
    AuditQuery, AuditRecord, GrantKind, GrantRecord, NewAudit, UsageWindow, UserUsage,
};
pub use error::StoreError;
pub use identities::{GroupGiven, GroupGrant, IdentityRecord};
pub use log::{Fence, LogAppend, LogEntry, Logged};
pub use search::{
    ListCursor, MAX_SEARCH_CHARS, MAX_SEARCH_TERMS, MAX_TAG_CHARS, SEARCH_INDEX_BATCH, SearchText,
    SessionFilter, SessionHit, SessionOrder, check_tag,
};
pub use signing_keys::{SigningKeyRecord, SigningKeyStore};
pub use types::{
    CheckpointRecord, CompactionRecord, LatestCheckpoints, NewSession, PendingRecord,
    SessionExport, SessionRecord, SessionStatus, SessionUpdate, StoredMessage, TokenRecord,
    TurnRecord, TurnStart, UserRecord,
};
pub use webhooks::{AttemptResult, DeliveryRecord, DeliveryStatus, NewDelivery, WebhookStore};

use agentd_protocol::{Event, EventEnvelope, Message, TurnStatus};
use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub type StoreResult<T> = Result<T, StoreError>;

/// Sessions: their rows, totals and retention.
#[async_trait]
pub trait SessionStore: Send + Sync {
    async fn create_session(&self, new: NewSession) -> StoreResult<SessionRecord>;

    /// `None` when no such session exists.
    async fn get_session(&self, id: &str) -> StoreResult<Option<SessionRecord>>;

    /// The owner's sessions, newest first by `(created_at, id)`. `before` is a
    /// cursor: the id of the last session of the previous page; an id that is
    /// not one of the owner's sessions is `NotFound`.
    async fn list_sessions(
        &self,
        owner: &str,
        before: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<SessionRecord>>;

    /// The sessions `filter` selects (see [`SessionFilter`]): pinned first
    /// then newest first, or, searching, best match first with a snippet.
    async fn find_sessions(&self, filter: &SessionFilter) -> StoreResult<Vec<SessionHit>>;

    /// Index for search up to `limit` of the messages stored and not yet
    /// indexed; how many were taken. Both stores index a message after its
    /// append (a search catches up first, so it always finds what is stored).
    async fn index_pending_search(&self, limit: u32) -> StoreResult<u64>;

    /// Apply the fields that are set (totals are added); bumps `updated_at`;
    /// returns the updated session. `NotFound` for an unknown id.
    async fn update_session(&self, id: &str, update: SessionUpdate) -> StoreResult<SessionRecord>;

    /// Remove the session and everything of it. `false` when it did not exist.
    async fn delete_session(&self, id: &str) -> StoreResult<bool>;

    /// Sessions of all owners whose `updated_at` is before `cutoff`, not
    /// pinned and with no running turn (candidates for retention), oldest first by
    /// `(updated_at, id)`, at most `limit`.
    async fn sessions_updated_before(
        &self,
        cutoff: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<SessionRecord>>;

    /// How many sessions exist (all owners).
    async fn count_sessions(&self) -> StoreResult<u64>;
}

/// The lossless transcript: messages in order, compactions, rewinding.
#[async_trait]
pub trait TranscriptStore: Send + Sync {
    /// Append a message to the transcript (position assigned in order).
    /// `NotFound` for an unknown session.
    async fn append_message(
        &self,
        session_id: &str,
        turn_id: Option<&str>,
        message: &Message,
    ) -> StoreResult<StoredMessage>;

    /// The whole transcript in order (empty for an unknown session).
    async fn messages(&self, session_id: &str) -> StoreResult<Vec<StoredMessage>>;

    /// The messages at `from_position` and after, in order: what a reader
    /// that holds the transcript up to there needs to catch up.
    async fn messages_from(
        &self,
        session_id: &str,
        from_position: u64,
    ) -> StoreResult<Vec<StoredMessage>>;

    /// Record a compaction. `NotFound` for an unknown session; an id already
    /// used is a `Database` error.
    async fn add_compaction(&self, record: &CompactionRecord) -> StoreResult<()>;

    /// [`Self::add_compaction`] by the turn `fence` names, run under a
    /// cluster lease: stored only while `fence.node_id` holds that lease, as
    /// [`EventLog::append_log_fenced`] is (`LeaseLost` otherwise). SQLite
    /// (one node): `add_compaction`.
    async fn add_compaction_fenced(
        &self,
        record: &CompactionRecord,
        fence: &Fence,
    ) -> StoreResult<()>;

    /// The session's newest compaction by `(created_at, id)`: the one that
    /// shapes the model's context. `None` when there is none (or no session).
    async fn latest_compaction(&self, session_id: &str) -> StoreResult<Option<CompactionRecord>>;

    /// The position of the first message of `turn_id` in the session's
    /// transcript; `None` when the turn has no message (yet).
    async fn turn_position(&self, session_id: &str, turn_id: &str) -> StoreResult<Option<i64>>;

    /// Rewind the transcript to before `from_position`, in one transaction:
    /// delete the messages with `position >= from_position`, the checkpoints
    /// with `message_position > from_position` (one at `from_position` stays:
    /// it is the state rewound to), and the compactions that no longer fit:
    /// those with `first_kept_position > from_position` and those created at
    /// or after the earliest deleted message (they may summarise it). Bumps
    /// the session's `updated_at`. Returns how many messages were deleted.
    /// Positions stay gapless: the next message appended gets
    /// `max(from_position, 1)` when anything was deleted. `NotFound` for an
    /// unknown session.
    async fn truncate_history(&self, session_id: &str, from_position: i64) -> StoreResult<u64>;
}

/// The event log: a gapless `seq` per session, appended with the transcript.
#[async_trait]
pub trait EventLog: TranscriptStore {
    /// Store an event with the next `seq` of its session (1, 2, 3, … no gaps,
    /// atomic under concurrent appends). `NotFound` for an unknown session.
    async fn append_event(&self, session_id: &str, event: &Event) -> StoreResult<EventEnvelope>;

    /// Store several events of one session, in order, with consecutive `seq`s.
    /// SQLite commits them together; PostgreSQL in one statement.
    async fn append_events(
        &self,
        session_id: &str,
        events: &[Event],
    ) -> StoreResult<Vec<EventEnvelope>>;

    /// Store a session's events and messages in order, each as
    /// [`Self::append_event`] and [`Self::append_message`] would. Stops at the
    /// first entry that cannot be stored and says so; what came before it is
    /// stored. SQLite commits all of it together (its group-commit writer);
    /// PostgreSQL appends each run of events, then each message, on its own.
    async fn append_log(&self, session_id: &str, entries: &[LogEntry<'_>]) -> LogAppend;

    /// [`Self::append_log`] for a turn that runs under a cluster lease: each
    /// commit checks, in its own transaction and serialised against a
    /// takeover, that `fence.node_id` still holds the lease of
    /// `fence.turn_id`. Once it does not, the entry is refused with
    /// [`StoreError::LeaseLost`] and nothing of it is stored. SQLite has no
    /// leases (a single node): there it is `append_log`.
    async fn append_log_fenced(
        &self,
        session_id: &str,
        fence: &Fence,
        entries: &[LogEntry<'_>],
    ) -> LogAppend;

    /// Events with `seq > after`, in order, at most `limit` (empty for an
    /// unknown session).
    async fn events_after(
        &self,
        session_id: &str,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<EventEnvelope>>;
}

/// Turns: started, finished, found by `client_request_id`.
#[async_trait]
pub trait TurnStore: SessionStore {
    /// Record a turn as running, and its session as `running`, in one
    /// transaction. With a `client_request_id` already used in this session,
    /// nothing is written and the existing turn is returned.
    async fn start_turn(
        &self,
        session_id: &str,
        turn_id: &str,
        client_request_id: Option<&str>,
    ) -> StoreResult<TurnStart>;

    /// Set the turn's status and `finished_at`. The first finish wins: a
    /// finished turn is left as it is. `NotFound` for an unknown turn.
    async fn finish_turn(&self, turn_id: &str, status: TurnStatus) -> StoreResult<()>;

    /// A turn's end: [`TurnStore::finish_turn`], then [`SessionStore::update_session`]
    /// of its session (`NotFound` for an unknown turn, the session left as
    /// it was). One transaction where the backend can: the session's next
    /// turn waits for it.
    async fn finish_turn_with_session(
        &self,
        turn_id: &str,
        status: TurnStatus,
        session_id: &str,
        update: SessionUpdate,
    ) -> StoreResult<SessionRecord>;

    /// [`Self::start_turn`] of turn `fence.turn_id`, run under a cluster
    /// lease: written (row and session status together) only while
    /// `fence.node_id` holds that lease, serialised against a takeover, as
    /// [`EventLog::append_log_fenced`] is; [`StoreError::LeaseLost`] and
    /// nothing written otherwise. SQLite (one node): `start_turn`.
    async fn start_turn_fenced(
        &self,
        session_id: &str,
        fence: &Fence,
        client_request_id: Option<&str>,
    ) -> StoreResult<TurnStart>;

    /// [`Self::finish_turn`] of turn `fence.turn_id` of `session_id`, fenced
    /// as [`Self::start_turn_fenced`] is (`LeaseLost` even when the turn was
    /// finished already).
    async fn finish_turn_fenced(
        &self,
        session_id: &str,
        fence: &Fence,
        status: TurnStatus,
    ) -> StoreResult<()>;

    /// [`SessionStore::update_session`] by the turn `fence` names (its
    /// status, its totals), fenced as [`Self::start_turn_fenced`] is.
    async fn update_session_fenced(
        &self,
        session_id: &str,
        fence: &Fence,
        update: SessionUpdate,
    ) -> StoreResult<SessionRecord>;

    /// Turns recorded as running (after a crash: the ones to finish as interrupted).
    async fn running_turns(&self) -> StoreResult<Vec<TurnRecord>>;

    /// The turn of this session started with `client_request_id`, if any.
    async fn find_turn(
        &self,
        session_id: &str,
        client_request_id: &str,
    ) -> StoreResult<Option<TurnRecord>>;
}

/// Round trips for health checks.
#[async_trait]
pub trait HealthStore: SessionStore {
    /// A cheap round trip to the database, for health checks. The default
    /// counts sessions; backends may do something cheaper.
    async fn ping(&self) -> StoreResult<()> {
        self.count_sessions().await.map(|_| ())
    }

    /// A tiny write (one row of `health_probe`), for `/healthz` and before a
    /// turn is accepted: [`HealthStore::ping`] is a read, which a full disk still
    /// answers.
    async fn probe_write(&self) -> StoreResult<()>;
}

/// Users, their API tokens and their agents' uids.
#[async_trait]
pub trait UserStore: Send + Sync {
    /// Create a user; a name already taken is a `Database` error naming it.
    async fn create_user(&self, name: &str) -> StoreResult<UserRecord>;

    async fn get_user_by_name(&self, name: &str) -> StoreResult<Option<UserRecord>>;

    /// Store a token of `user_id` by its hash only. `NotFound` for an unknown user.
    async fn create_token(
        &self,
        user_id: &str,
        name: &str,
        token_hash: &str,
        prefix: &str,
    ) -> StoreResult<TokenRecord>;

    /// The token with this hash, usable or not (see [`TokenRecord::is_usable`]).
    async fn token_by_hash(&self, token_hash: &str) -> StoreResult<Option<TokenRecord>>;

    /// Tokens of one user, or of everyone with `None`; newest first.
    async fn list_tokens(&self, user_id: Option<&str>) -> StoreResult<Vec<TokenRecord>>;

    /// Revoke a token by id. `false` when there is no such token; revoking
    /// again keeps the first time.
    async fn revoke_token(&self, id: &str) -> StoreResult<bool>;

    /// The uid `user`'s agent works as when the server is root: the one
    /// recorded for them, else the lowest uid in `first..=last` no user has,
    /// recorded now. Atomic across processes and nodes: two allocations at
    /// once never get the same uid, nor one user two. A recorded uid is kept
    /// even when it is outside the range (the range changed). A range with
    /// no free uid left is a `Database` error saying so.
    async fn agent_uid(&self, user: &str, first: u32, last: u32) -> StoreResult<u32>;

    /// Every user with a row, by name.
    async fn list_users(&self) -> StoreResult<Vec<UserRecord>>;

    /// Set a user's admin flag and/or disabled state (`None`: unchanged;
    /// disabling again keeps the first time). `false` when no such user.
    async fn set_user_flags(
        &self,
        name: &str,
        admin: Option<bool>,
        disabled: Option<bool>,
    ) -> StoreResult<bool>;
}

/// Identity-provider accounts (issuer, subject) linked to users: OIDC and
/// JWT sign-ins find their user by the account, not by a claimed name.
#[async_trait]
pub trait IdentityStore: Send + Sync {
    /// The account `(issuer, subject)` and its user, if linked.
    async fn user_by_identity(
        &self,
        issuer: &str,
        subject: &str,
    ) -> StoreResult<Option<IdentityRecord>>;

    /// The accounts linked to a user, by issuer and subject.
    async fn identities_of(&self, user_id: &str) -> StoreResult<Vec<IdentityRecord>>;

    /// Link an account to a user. An account linked already is a
    /// `Database` error saying so; an unknown user `NotFound`.
    async fn link_identity(&self, user_id: &str, issuer: &str, subject: &str) -> StoreResult<()>;

    /// Record what the account's groups gave at this sign-in. `false` when
    /// the account is not linked.
    async fn set_group_given(
        &self,
        issuer: &str,
        subject: &str,
        given: &GroupGiven,
    ) -> StoreResult<bool>;
}

/// Grants, usage and the audit log.
#[async_trait]
pub trait AccessStore: Send + Sync {
    /// Grant (`true`) or take back a profile or model. `false` when nothing
    /// changed (already granted, or no such grant).
    async fn set_grant(
        &self,
        user: &str,
        kind: GrantKind,
        name: &str,
        granted: bool,
    ) -> StoreResult<bool>;

    /// Grants of one user, or of everyone with `None`.
    async fn grants(&self, user: Option<&str>) -> StoreResult<Vec<GrantRecord>>;

    /// What `owner` uses now: running and recent turns, spend (kept when
    /// sessions are deleted), sessions.
    async fn user_usage(&self, owner: &str, window: UsageWindow) -> StoreResult<UserUsage>;

    /// Add spend of `owner`'s outside any session (a call of the
    /// Anthropic-compatible `/v1/messages`): it counts against spend quotas
    /// like a session's cost.
    async fn record_spend(&self, owner: &str, cost_usd: f64) -> StoreResult<()>;

    /// Append to the audit log, which nothing updates or deletes.
    async fn append_audit(&self, entry: &NewAudit) -> StoreResult<AuditRecord>;

    /// Read the audit log, oldest first.
    async fn audit_log(&self, query: &AuditQuery) -> StoreResult<Vec<AuditRecord>>;
}

/// Open permission requests and questions, and rules allowed for a session.
#[async_trait]
pub trait PendingStore: Send + Sync {
    /// Record an open permission request or question.
    async fn create_pending(&self, record: &PendingRecord) -> StoreResult<()>;

    /// Resolve an open request. `false` when it is unknown or already resolved
    /// (the first answer wins).
    async fn resolve_pending(&self, id: &str, resolution: &serde_json::Value) -> StoreResult<bool>;

    async fn get_pending(&self, id: &str) -> StoreResult<Option<PendingRecord>>;

    /// Open requests of one session, or of all with `None`, oldest first.
    async fn open_pending(&self, session_id: Option<&str>) -> StoreResult<Vec<PendingRecord>>;

    /// Remember a permission rule allowed for the rest of a session.
    async fn add_session_rule(&self, session_id: &str, rule: &str) -> StoreResult<()>;

    async fn session_rules(&self, session_id: &str) -> StoreResult<Vec<String>>;

    /// Keep the host mounts a session was given at creation (opaque JSON to
    /// the store); replaces earlier ones.
    async fn set_session_mounts(&self, session_id: &str, mounts: &str) -> StoreResult<()>;

    /// The session's mounts as stored; `None` when it has none.
    async fn session_mounts(&self, session_id: &str) -> StoreResult<Option<String>>;
}

/// Checkpoints and the content-addressed blobs they refer to.
#[async_trait]
pub trait CheckpointStore: Send + Sync {
    /// Store content-addressed blobs, `(hash, data)`; a hash already stored is
    /// skipped (its data is not compared). All in one transaction, its own:
    /// with SQLite it holds the write lock while it runs, so callers with a
    /// lot of data should call this in batches of a few MiB.
    async fn put_blobs(&self, blobs: &[(String, Vec<u8>)]) -> StoreResult<()>;

    /// The hashes of `hashes` that are not stored, in the order given, each
    /// once. Any number of hashes (queried in batches).
    async fn missing_blobs(&self, hashes: &[String]) -> StoreResult<Vec<String>>;

    /// A blob's data; `None` when it is not stored.
    async fn get_blob(&self, hash: &str) -> StoreResult<Option<Vec<u8>>>;

    /// Record a checkpoint. `NotFound` for an unknown session; an id already
    /// used is a `Database` error.
    async fn create_checkpoint(&self, record: &CheckpointRecord) -> StoreResult<()>;

    /// [`Self::put_blobs`] then [`Self::create_checkpoint`]; backends may do
    /// both in one transaction (a few blobs: say, the changed files and the
    /// manifest of a checkpoint).
    async fn create_checkpoint_with_blobs(
        &self,
        record: &CheckpointRecord,
        blobs: &[(String, Vec<u8>)],
    ) -> StoreResult<()>;

    /// A session's checkpoints, oldest first by `(created_at, id)` (empty
    /// for an unknown session).
    async fn list_checkpoints(&self, session_id: &str) -> StoreResult<Vec<CheckpointRecord>>;

    /// The session's latest checkpoint and latest keyframe (what a new
    /// checkpoint is made against), as `list_checkpoints` orders them.
    async fn latest_checkpoints(&self, session_id: &str) -> StoreResult<LatestCheckpoints>;

    async fn get_checkpoint(&self, id: &str) -> StoreResult<Option<CheckpointRecord>>;
}

/// A whole session out of one store and into another.
#[async_trait]
pub trait TransferStore: Send + Sync {
    /// Everything of one session (see [`SessionExport`]); `None` when no such
    /// session exists. Reads in one transaction: a consistent snapshot.
    async fn export_session(&self, id: &str) -> StoreResult<Option<SessionExport>>;

    /// Write an exported session as it was: same ids, positions, `seq`s,
    /// times and totals, all or nothing. A session with that id already here
    /// is a `Database` error naming it.
    async fn import_session(&self, export: &SessionExport) -> StoreResult<()>;
}

/// Declares [`Store`] as all the role traits listed, and implements it for
/// every type that has them all.
macro_rules! store {
    ($(#[$meta:meta])* $first:ident $(+ $role:ident)*) => {
        $(#[$meta])*
        pub trait Store: $first $(+ $role)* {}

        impl<T> Store for T where T: $first $(+ $role)* {}
    };
}

store! {
    /// Everything agentd persists, as one object with every role. Implementations
    /// are cheap to clone and safe to share across tasks.
    SessionStore + TranscriptStore + EventLog + TurnStore + HealthStore + UserStore
        + AccessStore + PendingStore + CheckpointStore + TransferStore + WebhookStore
        + SigningKeyStore + IdentityStore
}

/// The role traits, for callers of [`Store`] methods: `use agentd_store::prelude::*;`.
pub mod prelude {
    pub use crate::SigningKeyStore;
    pub use crate::{
        AccessStore, CheckpointStore, EventLog, HealthStore, IdentityStore, PendingStore,
        SessionStore, Store, TranscriptStore, TransferStore, TurnStore, UserStore, WebhookStore,
    };
}
