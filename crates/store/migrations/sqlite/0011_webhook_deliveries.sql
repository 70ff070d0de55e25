-- The webhook outbox: one row per event per configured webhook, written when
-- the event happens and sent by a background task. `seq` orders a session's
-- deliveries: a row is sent only when no earlier row of the same webhook and
-- session is still pending. `lease_*` keep one sender on a row at a time.
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    webhook         TEXT NOT NULL,
    event           TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    payload         TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_status     INTEGER,
    last_error      TEXT,
    next_attempt_at INTEGER NOT NULL,
    lease_owner     TEXT,
    lease_until     INTEGER,
    created_at      INTEGER NOT NULL,
    delivered_at    INTEGER
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due
    ON webhook_deliveries(status, next_attempt_at);
CREATE INDEX IF NOT EXISTS webhook_deliveries_order
    ON webhook_deliveries(webhook, session_id, seq);
