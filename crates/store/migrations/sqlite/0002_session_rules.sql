-- Permission rules a user added with "allow for this session".
CREATE TABLE session_rules (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    rule       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, rule)
) STRICT;
