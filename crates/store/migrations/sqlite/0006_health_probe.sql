-- One row, rewritten by `Store::probe_write`: proof that the database still
-- takes writes (a full disk answers reads, not writes).
CREATE TABLE health_probe (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at INTEGER NOT NULL
) STRICT;
