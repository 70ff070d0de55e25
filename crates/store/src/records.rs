//! What both backends share: value conversions, error mapping, and reading
//! each record from a row. Rows are read through [`Columns`], which SQLite's
//! and PostgreSQL's rows implement, so each record's mapping exists once and
//! the backends cannot drift apart.

use agentd_protocol::{EventEnvelope, TurnStatus, Usage};
use chrono::{DateTime, SubsecRound, Utc};
use serde_json::Value;
use sqlx::{IntoArguments, Row};

use crate::{
    CheckpointRecord, CompactionRecord, PendingRecord, SessionRecord, SessionStatus, StoreError,
    StoreResult, StoredMessage, TokenRecord, TurnRecord, UserRecord,
};

/// Now, truncated to what the databases keep (milliseconds), so a value we
/// return equals the value read back later.
pub(crate) fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}

pub(crate) fn to_ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub(crate) fn from_ms(ms: i64, what: &str) -> StoreResult<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms)
        .ok_or_else(|| StoreError::Corrupt(format!("{what}: timestamp {ms} out of range")))
}

/// u64 counters are stored as signed 64-bit integers.
pub(crate) fn to_i64(v: u64, what: &str) -> StoreResult<i64> {
    i64::try_from(v).map_err(|_| StoreError::Database(format!("{what}: {v} is too large")))
}

pub(crate) fn to_u64(v: i64, what: &str) -> StoreResult<u64> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("{what}: negative value {v}")))
}

/// Map a sqlx error, saying what we were doing. Undecodable columns mean the
/// stored data is not what this code wrote: `Corrupt`.
pub(crate) fn db(context: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
    move |e| match e {
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
            StoreError::Corrupt(format!("{context}: {e}"))
        }
        e => StoreError::Database(format!("{context}: {e}")),
    }
}

/// A query with its values bound.
pub(crate) type Query<'q, DB> = sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments<'q>>;

/// Every row of `query`, each read by `map`.
pub(crate) async fn fetch_all<'q, 'c, DB: sqlx::Database, T>(
    exec: impl sqlx::Executor<'c, Database = DB>,
    query: Query<'q, DB>,
    context: &str,
    map: impl Fn(&DB::Row) -> StoreResult<T>,
) -> StoreResult<Vec<T>>
where
    DB::Arguments<'q>: IntoArguments<'q, DB>,
{
    let rows = query.fetch_all(exec).await.map_err(db(context))?;
    rows.iter().map(map).collect()
}

/// The row of `query` read by `map`; `None` when there is none.
pub(crate) async fn fetch_optional<'q, 'c, DB: sqlx::Database, T>(
    exec: impl sqlx::Executor<'c, Database = DB>,
    query: Query<'q, DB>,
    context: &str,
    map: impl Fn(&DB::Row) -> StoreResult<T>,
) -> StoreResult<Option<T>>
where
    DB::Arguments<'q>: IntoArguments<'q, DB>,
{
    let row = query.fetch_optional(exec).await.map_err(db(context))?;
    row.as_ref().map(map).transpose()
}

/// Run `query`, which returns no rows.
pub(crate) async fn execute<'q, 'c, DB: sqlx::Database>(
    exec: impl sqlx::Executor<'c, Database = DB>,
    query: Query<'q, DB>,
    context: &str,
) -> StoreResult<DB::QueryResult>
where
    DB::Arguments<'q>: IntoArguments<'q, DB>,
{
    query.execute(exec).await.map_err(db(context))
}

/// Whether `e` is a foreign key violation (a row referring to nothing).
pub(crate) fn is_fk_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_foreign_key_violation())
}

/// Map the error of an insert: a unique violation is a `Database` error
/// saying `taken()`.
pub(crate) fn unique_error<'a>(
    context: &'a str,
    taken: impl FnOnce() -> String + 'a,
) -> impl FnOnce(sqlx::Error) -> StoreError + 'a {
    move |e| match &e {
        sqlx::Error::Database(d) if d.is_unique_violation() => {
            StoreError::Database(format!("{context}: {}", taken()))
        }
        _ => db(context)(e),
    }
}

/// Map the error of a write that refers to session `session_id`: a missing
/// session (deleted since it was looked at) is `NotFound`.
pub(crate) fn session_error<'a>(
    context: &'a str,
    session_id: &'a str,
) -> impl FnOnce(sqlx::Error) -> StoreError + 'a {
    move |e| match is_fk_violation(&e) {
        true => StoreError::NotFound(format!("session {session_id}")),
        false => db(context)(e),
    }
}

/// Map the error of inserting row `id` of session `session_id`: a missing
/// session is `NotFound`, a taken id a `Database` error saying so.
pub(crate) fn insert_error<'a>(
    context: &'a str,
    session_id: &'a str,
    id: &'a str,
) -> impl FnOnce(sqlx::Error) -> StoreError + 'a {
    move |e| match is_fk_violation(&e) {
        true => StoreError::NotFound(format!("session {session_id}")),
        false => unique_error(context, || format!("id {id:?} already exists"))(e),
    }
}

pub(crate) fn to_json<T: serde::Serialize>(value: &T, what: &str) -> StoreResult<String> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Database(format!("encoding {what} as JSON: {e}")))
}

pub(crate) fn from_json<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("decoding {what}: {e}")))
}

/// Typed column reads with the column named in the error. Timestamps are
/// integer milliseconds and counters signed 64-bit integers in both schemas.
pub(crate) trait Columns {
    fn text(&self, name: &str) -> StoreResult<String>;
    fn opt_text(&self, name: &str) -> StoreResult<Option<String>>;
    fn int(&self, name: &str) -> StoreResult<i64>;
    fn opt_int(&self, name: &str) -> StoreResult<Option<i64>>;
    fn real(&self, name: &str) -> StoreResult<f64>;
    /// SQLite keeps booleans as integers, PostgreSQL as `boolean`.
    fn flag(&self, name: &str) -> StoreResult<bool>;

    fn count(&self, name: &str) -> StoreResult<u64> {
        to_u64(self.int(name)?, name)
    }

    fn time(&self, name: &str) -> StoreResult<DateTime<Utc>> {
        from_ms(self.int(name)?, name)
    }

    fn opt_time(&self, name: &str) -> StoreResult<Option<DateTime<Utc>>> {
        self.opt_int(name)?.map(|ms| from_ms(ms, name)).transpose()
    }
}

fn column_error<E: std::fmt::Display>(name: &str) -> impl FnOnce(E) -> StoreError + '_ {
    move |e| StoreError::Corrupt(format!("column {name}: {e}"))
}

/// `Columns` for a row type whose method `$get` reads a column by name.
macro_rules! columns_for {
    ($row:ty, $get:ident, flag: $flag:ty, $to_bool:expr) => {
        impl Columns for $row {
            fn text(&self, name: &str) -> StoreResult<String> {
                self.$get(name).map_err(column_error(name))
            }
            fn opt_text(&self, name: &str) -> StoreResult<Option<String>> {
                self.$get(name).map_err(column_error(name))
            }
            fn int(&self, name: &str) -> StoreResult<i64> {
                self.$get(name).map_err(column_error(name))
            }
            fn opt_int(&self, name: &str) -> StoreResult<Option<i64>> {
                self.$get(name).map_err(column_error(name))
            }
            fn real(&self, name: &str) -> StoreResult<f64> {
                self.$get(name).map_err(column_error(name))
            }
            fn flag(&self, name: &str) -> StoreResult<bool> {
                let value: $flag = self.$get(name).map_err(column_error(name))?;
                Ok($to_bool(value))
            }
        }
    };
}

columns_for!(sqlx::sqlite::SqliteRow, try_get, flag: i64, |v: i64| v != 0);
columns_for!(sqlx::postgres::PgRow, try_get, flag: bool, |v: bool| v);
// Rows read on the asking thread (`sqlite::direct`).
columns_for!(rusqlite::Row<'_>, get, flag: i64, |v: i64| v != 0);

pub(crate) const SESSION_COLUMNS: &str = "id, owner, title, workspace, model, profile, status, \
    created_at, updated_at, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, \
    cost_usd, turns, last_seq, existing_workspace, thinking_budget, pinned, archived, tags";

pub(crate) fn session(row: &impl Columns) -> StoreResult<SessionRecord> {
    let status = row.text("status")?;
    Ok(SessionRecord {
        id: row.text("id")?,
        owner: row.text("owner")?,
        title: row.opt_text("title")?,
        workspace: row.text("workspace")?,
        existing_workspace: row.flag("existing_workspace")?,
        model: row.text("model")?,
        profile: row.text("profile")?,
        thinking_budget: row
            .opt_int("thinking_budget")?
            .map(|n| {
                u32::try_from(n)
                    .map_err(|_| StoreError::Corrupt(format!("thinking budget {n} out of range")))
            })
            .transpose()?,
        status: SessionStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown session status {status:?}")))?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
        usage: Usage {
            input_tokens: row.count("input_tokens")?,
            output_tokens: row.count("output_tokens")?,
            cache_read_tokens: row.count("cache_read_tokens")?,
            cache_write_tokens: row.count("cache_write_tokens")?,
        },
        cost_usd: row.real("cost_usd")?,
        turns: row.count("turns")?,
        last_seq: row.count("last_seq")?,
        pinned: row.flag("pinned")?,
        archived: row.flag("archived")?,
        tags: from_json(&row.text("tags")?, "session tags")?,
    })
}

pub(crate) fn message(row: &impl Columns) -> StoreResult<StoredMessage> {
    Ok(StoredMessage {
        id: row.text("id")?,
        session_id: row.text("session_id")?,
        turn_id: row.opt_text("turn_id")?,
        position: row.count("position")?,
        message: from_json(&row.text("content")?, "message")?,
        created_at: row.time("created_at")?,
    })
}

/// An event row (`seq`, `data`, `created_at`) of `session_id`.
pub(crate) fn envelope(session_id: &str, row: &impl Columns) -> StoreResult<EventEnvelope> {
    let seq = row.count("seq")?;
    Ok(EventEnvelope {
        seq,
        session_id: session_id.to_owned(),
        at: row.time("created_at")?,
        event: from_json(&row.text("data")?, &format!("event {session_id}/{seq}"))?,
    })
}

pub(crate) const TURN_COLUMNS: &str =
    "id, session_id, status, client_request_id, started_at, finished_at";

pub(crate) fn turn(row: &impl Columns) -> StoreResult<TurnRecord> {
    let status = row
        .opt_text("status")?
        .map(|s| {
            TurnStatus::parse(&s)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown turn status {s:?}")))
        })
        .transpose()?;
    Ok(TurnRecord {
        id: row.text("id")?,
        session_id: row.text("session_id")?,
        status,
        client_request_id: row.opt_text("client_request_id")?,
        started_at: row.time("started_at")?,
        finished_at: row.opt_time("finished_at")?,
    })
}

pub(crate) const PENDING_COLUMNS: &str =
    "id, session_id, turn_id, kind, call_id, data, created_at, resolved_at, resolution";

pub(crate) fn pending(row: &impl Columns) -> StoreResult<PendingRecord> {
    let resolution = row
        .opt_text("resolution")?
        .map(|r| from_json::<Value>(&r, "pending resolution"))
        .transpose()?;
    Ok(PendingRecord {
        id: row.text("id")?,
        session_id: row.text("session_id")?,
        turn_id: row.opt_text("turn_id")?,
        kind: agentd_protocol::PendingKind::parse(&row.text("kind")?),
        call_id: row.opt_text("call_id")?,
        data: from_json(&row.text("data")?, "pending data")?,
        created_at: row.time("created_at")?,
        resolved_at: row.opt_time("resolved_at")?,
        resolution,
    })
}

pub(crate) const USER_COLUMNS: &str = "id, name, is_admin, created_at, disabled_at";

pub(crate) fn user(row: &impl Columns) -> StoreResult<UserRecord> {
    Ok(UserRecord {
        id: row.text("id")?,
        name: row.text("name")?,
        is_admin: row.flag("is_admin")?,
        created_at: row.time("created_at")?,
        disabled_at: row.opt_time("disabled_at")?,
    })
}

pub(crate) const TOKEN_SELECT: &str = "SELECT t.id, t.user_id, u.name AS user_name, \
    u.disabled_at AS user_disabled_at, u.is_admin AS user_is_admin, t.name, t.token_hash, t.prefix, t.created_at, \
    t.last_used_at, t.expires_at, t.revoked_at \
    FROM api_tokens t JOIN users u ON u.id = t.user_id";

pub(crate) fn token(row: &impl Columns) -> StoreResult<TokenRecord> {
    Ok(TokenRecord {
        id: row.text("id")?,
        user_id: row.text("user_id")?,
        user_name: row.text("user_name")?,
        user_disabled: row.opt_int("user_disabled_at")?.is_some(),
        user_is_admin: row.flag("user_is_admin")?,
        name: row.text("name")?,
        token_hash: row.text("token_hash")?,
        prefix: row.text("prefix")?,
        created_at: row.time("created_at")?,
        last_used_at: row.opt_time("last_used_at")?,
        expires_at: row.opt_time("expires_at")?,
        revoked_at: row.opt_time("revoked_at")?,
    })
}

pub(crate) const CHECKPOINT_COLUMNS: &str = "id, session_id, turn_id, message_position, \
    manifest_hash, base_checkpoint_id, files, stats, created_at";

pub(crate) fn checkpoint(row: &impl Columns) -> StoreResult<CheckpointRecord> {
    Ok(CheckpointRecord {
        id: row.text("id")?,
        session_id: row.text("session_id")?,
        turn_id: row.opt_text("turn_id")?,
        message_position: row.int("message_position")?,
        manifest_hash: row.text("manifest_hash")?,
        base_checkpoint_id: row.opt_text("base_checkpoint_id")?,
        files: from_json(&row.text("files")?, "checkpoint files")?,
        stats: from_json(&row.text("stats")?, "checkpoint stats")?,
        created_at: row.time("created_at")?,
    })
}

/// A row of the latest-checkpoints query: which it is (0 the latest, 1 the
/// latest keyframe), and the checkpoint.
pub(crate) fn ranked_checkpoint(row: &impl Columns) -> StoreResult<(i64, CheckpointRecord)> {
    Ok((row.int("which")?, checkpoint(row)?))
}

/// `trigger` is an SQL keyword, hence quoted.
pub(crate) const COMPACTION_COLUMNS: &str = "id, session_id, turn_id, \"trigger\", summary, \
    context, first_kept_position, tokens_before, tokens_after, created_at";

pub(crate) fn compaction(row: &impl Columns) -> StoreResult<CompactionRecord> {
    Ok(CompactionRecord {
        id: row.text("id")?,
        session_id: row.text("session_id")?,
        turn_id: row.opt_text("turn_id")?,
        trigger: row.text("trigger")?,
        summary: row.text("summary")?,
        context: from_json(&row.text("context")?, "compaction context")?,
        first_kept_position: row.int("first_kept_position")?,
        tokens_before: row.count("tokens_before")?,
        tokens_after: row.count("tokens_after")?,
        created_at: row.time("created_at")?,
    })
}

/// Hashes per query when looking blobs up: one bound array (a JSON array for
/// SQLite), so no parameter limit applies; batches keep each query modest.
pub(crate) const BLOB_LOOKUP_BATCH: usize = 2_000;

/// A message's role as the `role` column keeps it (a copy for queries).
pub(crate) fn role_str(role: agentd_protocol::Role) -> &'static str {
    match role {
        agentd_protocol::Role::User => "user",
        agentd_protocol::Role::Assistant => "assistant",
    }
}

pub(crate) fn delivery(row: &impl Columns) -> StoreResult<crate::DeliveryRecord> {
    let status = row.text("status")?;
    let last_status = row
        .opt_int("last_status")?
        .map(|s| u16::try_from(s).map_err(|_| StoreError::Corrupt(format!("HTTP status {s}"))))
        .transpose()?;
    Ok(crate::DeliveryRecord {
        id: row.text("id")?,
        webhook: row.text("webhook")?,
        event: row.text("event")?,
        session_id: row.text("session_id")?,
        payload: row.text("payload")?,
        status: crate::DeliveryStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("delivery status {status:?}")))?,
        attempts: row.count("attempts")?,
        last_status,
        last_error: row.opt_text("last_error")?,
        next_attempt_at: row.time("next_attempt_at")?,
        created_at: row.time("created_at")?,
        delivered_at: row.opt_time("delivered_at")?,
    })
}
