-- Checkpoints (rewinding the workspace and the transcript), content-addressed
-- blobs, and compactions (what the model sees of a long transcript).

-- The checkpoints table of version 1 was never written: recreate it.
DROP TABLE checkpoints;

-- A checkpoint: the state before a turn. `message_position` is the position
-- of the turn's user message (rewinding to the checkpoint deletes messages
-- from there on); `manifest_hash` names the blob holding the encoded file
-- manifest, a delta against `base_checkpoint_id`'s when that is set.
CREATE TABLE checkpoints (
    id                 TEXT PRIMARY KEY NOT NULL,
    session_id         TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id            TEXT,
    message_position   INTEGER NOT NULL,
    manifest_hash      TEXT NOT NULL,
    base_checkpoint_id TEXT,
    files              TEXT NOT NULL,     -- JSON array: paths changed since the previous checkpoint
    stats              TEXT NOT NULL,     -- JSON
    created_at         INTEGER NOT NULL
) STRICT;
CREATE INDEX checkpoints_session ON checkpoints(session_id, created_at);

-- The model's context after a compaction: `context` (a JSON array of messages:
-- the summary, then the recent messages kept verbatim), then the messages with
-- position >= `first_kept_position` (those appended after the compaction).
CREATE TABLE compactions (
    id                  TEXT PRIMARY KEY NOT NULL,
    session_id          TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id             TEXT,
    "trigger"           TEXT NOT NULL,    -- 'auto' | 'manual'
    summary             TEXT NOT NULL,
    context             TEXT NOT NULL,    -- JSON array of messages
    first_kept_position INTEGER NOT NULL,
    tokens_before       INTEGER NOT NULL,
    tokens_after        INTEGER NOT NULL,
    created_at          INTEGER NOT NULL
) STRICT;
CREATE INDEX compactions_session ON compactions(session_id, created_at);
