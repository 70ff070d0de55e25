-- agentd PostgreSQL schema, version 1: the same tables and columns as SQLite's.
-- Timestamps are BIGINT milliseconds since the Unix epoch (UTC), so values
-- round-trip exactly as with SQLite. JSON columns are TEXT holding serde_json
-- output of the protocol types (byte-exact, unlike JSONB). Ids and rules sort
-- bytewise (COLLATE "C") like SQLite's BINARY, whatever the database locale.

CREATE TABLE IF NOT EXISTS users (
    id          TEXT COLLATE "C" PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    is_admin    BOOLEAN NOT NULL DEFAULT FALSE,
    created_at  BIGINT NOT NULL,
    disabled_at BIGINT
);

-- Bearer tokens are stored hashed; `prefix` is the shown, non-secret start.
CREATE TABLE IF NOT EXISTS api_tokens (
    id           TEXT COLLATE "C" PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name         TEXT NOT NULL DEFAULT '',
    token_hash   TEXT NOT NULL UNIQUE,
    prefix       TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    expires_at   BIGINT,
    revoked_at   BIGINT
);
CREATE INDEX IF NOT EXISTS api_tokens_user ON api_tokens(user_id);

-- `owner` is not a foreign key: single-user setups run without `users` rows.
CREATE TABLE IF NOT EXISTS sessions (
    id                 TEXT COLLATE "C" PRIMARY KEY,
    owner              TEXT NOT NULL,
    title              TEXT,
    workspace          TEXT NOT NULL,
    model              TEXT NOT NULL,
    profile            TEXT NOT NULL,
    status             TEXT NOT NULL DEFAULT 'idle',
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL,
    input_tokens       BIGINT NOT NULL DEFAULT 0,
    output_tokens      BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens  BIGINT NOT NULL DEFAULT 0,
    cache_write_tokens BIGINT NOT NULL DEFAULT 0,
    cost_usd           DOUBLE PRECISION NOT NULL DEFAULT 0,
    turns              BIGINT NOT NULL DEFAULT 0,
    last_seq           BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS sessions_owner_created ON sessions(owner, created_at DESC, id DESC);

-- `turn_id` is not a foreign key: messages may predate turn bookkeeping (imports, forks).
CREATE TABLE IF NOT EXISTS messages (
    id         TEXT COLLATE "C" PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id    TEXT,
    position   BIGINT NOT NULL,
    role       TEXT NOT NULL,
    content    TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (session_id, position)
);

CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq        BIGINT NOT NULL,
    type       TEXT NOT NULL,
    data       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- `status` is NULL while the turn runs. NULL client_request_ids never collide.
CREATE TABLE IF NOT EXISTS turns (
    id                TEXT COLLATE "C" PRIMARY KEY,
    session_id        TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    status            TEXT,
    client_request_id TEXT,
    started_at        BIGINT NOT NULL,
    finished_at       BIGINT,
    UNIQUE (session_id, client_request_id)
);
CREATE INDEX IF NOT EXISTS turns_running ON turns(started_at, id) WHERE status IS NULL;

-- Open (and answered) permission requests and questions.
CREATE TABLE IF NOT EXISTS pending_requests (
    id          TEXT COLLATE "C" PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id     TEXT,
    kind        TEXT NOT NULL,            -- 'permission' | 'question'
    call_id     TEXT,
    data        TEXT NOT NULL,            -- the request as sent to clients (JSON)
    created_at  BIGINT NOT NULL,
    resolved_at BIGINT,
    resolution  TEXT                      -- decision or answers (JSON), NULL while open
);
CREATE INDEX IF NOT EXISTS pending_requests_open ON pending_requests(session_id, created_at) WHERE resolved_at IS NULL;

-- A checkpoint: the transcript length and the workspace files (path -> blob hash,
-- NULL for a file that did not exist) before a turn changed them.
CREATE TABLE IF NOT EXISTS checkpoints (
    id               TEXT COLLATE "C" PRIMARY KEY,
    session_id       TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id          TEXT,
    message_position BIGINT NOT NULL,
    files            TEXT NOT NULL,       -- JSON object
    created_at       BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS checkpoints_session ON checkpoints(session_id, created_at);

-- Content-addressed file contents for checkpoints (sha256 hex).
CREATE TABLE IF NOT EXISTS blobs (
    hash       TEXT PRIMARY KEY,
    size       BIGINT NOT NULL,
    data       BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
