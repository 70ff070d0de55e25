-- Several `agentd serve` nodes on one database: node heartbeats,
-- the queue of accepted turns, one lease per running turn, messages between
-- nodes, and where each session's workspace was last saved. Times here are
-- the database's clock (TIMESTAMPTZ), so nodes' clocks never need to agree.

CREATE TABLE IF NOT EXISTS cluster_nodes (
    id           TEXT COLLATE "C" PRIMARY KEY,
    address      TEXT NOT NULL DEFAULT '',
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    draining     BOOLEAN NOT NULL DEFAULT FALSE,
    -- Random per process: two live processes claiming one id are told apart.
    instance     TEXT NOT NULL DEFAULT ''
);

-- Accepted turns no node has taken yet, oldest first per session.
CREATE TABLE IF NOT EXISTS turn_queue (
    seq               BIGSERIAL PRIMARY KEY,
    turn_id           TEXT COLLATE "C" NOT NULL UNIQUE,
    session_id        TEXT COLLATE "C" NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    text              TEXT NOT NULL,
    client_request_id TEXT,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS turn_queue_session ON turn_queue(session_id, seq);

-- At most one running turn per session, owned by one node. `start_seq` is the
-- session's last event when the turn was taken: a `turn.finished` after it
-- means the turn is over and only bookkeeping is left. `client_request_id`
-- stays visible to duplicate checks until the turn has its `turns` row.
CREATE TABLE IF NOT EXISTS turn_leases (
    session_id        TEXT COLLATE "C" PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id           TEXT COLLATE "C" NOT NULL,
    node_id           TEXT COLLATE "C" NOT NULL,
    start_seq         BIGINT NOT NULL,
    client_request_id TEXT,
    taken_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS turn_leases_node ON turn_leases(node_id);

-- Interrupts and answers for the node that owns a turn; it deletes them as
-- it reads them. NOTIFY only wakes it: a lost notification costs latency.
CREATE TABLE IF NOT EXISTS cluster_signals (
    id         BIGSERIAL PRIMARY KEY,
    node_id    TEXT COLLATE "C" NOT NULL,
    kind       TEXT NOT NULL,
    target     TEXT NOT NULL,
    data       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS cluster_signals_node ON cluster_signals(node_id, id);

-- The manifest (a blob) of each session's workspace as of its last turn end.
CREATE TABLE IF NOT EXISTS session_workspaces (
    session_id    TEXT COLLATE "C" PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    manifest_hash TEXT NOT NULL,
    saved_by      TEXT NOT NULL,
    saved_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
