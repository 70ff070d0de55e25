-- The webhook outbox: one row per event per configured webhook, written when
-- the event happens and sent by a background task. `seq` orders a session's
-- deliveries: a row is sent only when no earlier row of the same webhook and
-- session is still pending. `lease_*` keep one sender on a row at a time.
-- A session's rows go with it; delivered and failed rows are pruned after
-- each webhook's `retention_days`.
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    webhook         TEXT NOT NULL,
    event           TEXT NOT NULL,
    session_id      TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
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
-- Pending rows only: the sender's scans stay as small as the backlog.
CREATE INDEX IF NOT EXISTS webhook_deliveries_due
    ON webhook_deliveries(webhook, next_attempt_at) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS webhook_deliveries_order
    ON webhook_deliveries(webhook, session_id, seq) WHERE status = 'pending';
-- The delivery log by status, newest first; the retention sweep; a
-- session's rows when it is deleted.
CREATE INDEX IF NOT EXISTS webhook_deliveries_log
    ON webhook_deliveries(status, seq);
CREATE INDEX IF NOT EXISTS webhook_deliveries_done
    ON webhook_deliveries(webhook, created_at) WHERE status <> 'pending';
CREATE INDEX IF NOT EXISTS webhook_deliveries_session
    ON webhook_deliveries(session_id);
