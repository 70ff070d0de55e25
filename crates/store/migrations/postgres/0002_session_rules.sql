-- Permission rules a user added with "allow for this session".
CREATE TABLE IF NOT EXISTS session_rules (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    rule       TEXT COLLATE "C" NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, rule)
);
