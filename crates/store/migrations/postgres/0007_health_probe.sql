-- One row, rewritten by `Store::probe_write`: proof that the database still
-- takes writes (a full disk answers reads, not writes).
CREATE TABLE IF NOT EXISTS health_probe (
    id SMALLINT PRIMARY KEY CHECK (id = 1),
    at TIMESTAMPTZ NOT NULL
);
