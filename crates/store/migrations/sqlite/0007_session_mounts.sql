-- Host directories a session asked for at creation (a JSON array), checked
-- then against the owner's mountable roots.
CREATE TABLE session_mounts (
    session_id TEXT NOT NULL PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    mounts     TEXT NOT NULL
) STRICT;
