-- agentd SQLite schema, version 1.
-- Timestamps are INTEGER milliseconds since the Unix epoch (UTC).
-- JSON columns are TEXT holding serde_json output of the protocol types.

CREATE TABLE users (
    id          TEXT PRIMARY KEY NOT NULL,
    name        TEXT NOT NULL UNIQUE,
    is_admin    INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    disabled_at INTEGER
) STRICT;

-- Bearer tokens are stored hashed; `prefix` is the shown, non-secret start.
CREATE TABLE api_tokens (
    id           TEXT PRIMARY KEY NOT NULL,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name         TEXT NOT NULL DEFAULT '',
    token_hash   TEXT NOT NULL UNIQUE,
    prefix       TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    expires_at   INTEGER,
    revoked_at   INTEGER
) STRICT;
CREATE INDEX api_tokens_user ON api_tokens(user_id);

-- `owner` is not a foreign key: single-user setups run without `users` rows.
CREATE TABLE sessions (
    id                 TEXT PRIMARY KEY NOT NULL,
    owner              TEXT NOT NULL,
    title              TEXT,
    workspace          TEXT NOT NULL,
    model              TEXT NOT NULL,
    profile            TEXT NOT NULL,
    status             TEXT NOT NULL DEFAULT 'idle',
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd           REAL NOT NULL DEFAULT 0,
    turns              INTEGER NOT NULL DEFAULT 0,
    last_seq           INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX sessions_owner_created ON sessions(owner, created_at DESC, id DESC);

-- `turn_id` is not a foreign key: messages may predate turn bookkeeping (imports, forks).
CREATE TABLE messages (
    id         TEXT PRIMARY KEY NOT NULL,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id    TEXT,
    position   INTEGER NOT NULL,
    role       TEXT NOT NULL,
    content    TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (session_id, position)
) STRICT;

CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    type       TEXT NOT NULL,
    data       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
) STRICT;

-- `status` is NULL while the turn runs. NULL client_request_ids never collide.
CREATE TABLE turns (
    id                TEXT PRIMARY KEY NOT NULL,
    session_id        TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    status            TEXT,
    client_request_id TEXT,
    started_at        INTEGER NOT NULL,
    finished_at       INTEGER,
    UNIQUE (session_id, client_request_id)
) STRICT;
CREATE INDEX turns_running ON turns(started_at, id) WHERE status IS NULL;

-- Open (and answered) permission requests and questions.
CREATE TABLE pending_requests (
    id          TEXT PRIMARY KEY NOT NULL,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id     TEXT,
    kind        TEXT NOT NULL,            -- 'permission' | 'question'
    call_id     TEXT,
    data        TEXT NOT NULL,            -- the request as sent to clients (JSON)
    created_at  INTEGER NOT NULL,
    resolved_at INTEGER,
    resolution  TEXT                      -- decision or answers (JSON), NULL while open
) STRICT;
CREATE INDEX pending_requests_open ON pending_requests(session_id, created_at) WHERE resolved_at IS NULL;

-- A checkpoint: the transcript length and the workspace files (path -> blob hash,
-- NULL for a file that did not exist) before a turn changed them.
CREATE TABLE checkpoints (
    id               TEXT PRIMARY KEY NOT NULL,
    session_id       TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id          TEXT,
    message_position INTEGER NOT NULL,
    files            TEXT NOT NULL,       -- JSON object
    created_at       INTEGER NOT NULL
) STRICT;
CREATE INDEX checkpoints_session ON checkpoints(session_id, created_at);

-- Content-addressed file contents for checkpoints (sha256 hex).
CREATE TABLE blobs (
    hash       TEXT PRIMARY KEY NOT NULL,
    size       INTEGER NOT NULL,
    data       BLOB NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;
