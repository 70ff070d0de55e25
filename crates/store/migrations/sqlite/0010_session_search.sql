-- Finding sessions: pin, archive and tags on sessions, and full-text search
-- over titles and transcripts (text, tool calls' inputs, tool results).

ALTER TABLE sessions ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
-- A JSON array of tags (lowercase, validated by the server).
ALTER TABLE sessions ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
CREATE INDEX sessions_owner_pinned ON sessions(owner, pinned DESC, created_at DESC, id DESC);

-- The searchable text of each message (`message_id`) and each session's
-- title (`message_id` NULL), kept by the triggers below so that every
-- writer of messages (appends, imports, forks) is covered. An INTEGER
-- PRIMARY KEY keeps rowids stable (VACUUM), as the FTS index refers to them.
CREATE TABLE search_docs (
    rowid      INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    message_id TEXT UNIQUE REFERENCES messages(id) ON DELETE CASCADE,
    body       TEXT NOT NULL
) STRICT;
CREATE INDEX search_docs_session ON search_docs(session_id);
CREATE UNIQUE INDEX search_docs_title ON search_docs(session_id) WHERE message_id IS NULL;

-- Words split at anything not a letter or digit, as the server splits a
-- query; no diacritics folding (PostgreSQL's `simple` does none either).
CREATE VIRTUAL TABLE search_fts USING fts5(
    body, content = 'search_docs', content_rowid = 'rowid',
    tokenize = 'unicode61 remove_diacritics 0'
);

CREATE TRIGGER search_docs_insert AFTER INSERT ON search_docs BEGIN
    INSERT INTO search_fts (rowid, body) VALUES (new.rowid, new.body);
END;
CREATE TRIGGER search_docs_delete AFTER DELETE ON search_docs BEGIN
    INSERT INTO search_fts (search_fts, rowid, body) VALUES ('delete', old.rowid, old.body);
END;

-- The text of a message: text blocks, tool calls (name and every string of
-- the input), tool results and documents' titles; not thinking, not images.
-- NULL when it has none; only its first 200 000 characters, as in PostgreSQL
-- (whose tsvector is bounded). SQLite's text ends at a NUL, so a NUL
-- (`\u0000`, not one after an escaped backslash `\\`: JSON text has no raw
-- char(1) to stand for those meanwhile) is read as a space.
CREATE VIEW message_search_text AS
SELECT m.id, m.session_id, substr((
    SELECT group_concat(part, char(10)) FROM (
        SELECT CASE json_extract(b.value, '$.type')
            WHEN 'text' THEN json_extract(b.value, '$.text')
            WHEN 'tool_result' THEN json_extract(b.value, '$.content')
            WHEN 'tool_use' THEN json_extract(b.value, '$.name') || ' ' || COALESCE(
                (SELECT group_concat(t.value, ' ') FROM json_tree(b.value, '$.input') AS t
                 WHERE t.type = 'text'), '')
            WHEN 'document' THEN json_extract(b.value, '$.title')
        END AS part
        FROM json_each(CASE WHEN instr(m.content, '\u0000') = 0 THEN m.content
            ELSE replace(replace(replace(m.content, '\\', char(1)), '\u0000', '\u0020'),
                         char(1), '\\')
        END, '$.content') AS b
    ) WHERE part IS NOT NULL AND part <> ''
), 1, 200000) AS body
FROM messages AS m;

-- A message without text (thinking only, say) gets no row: its NULL body
-- is skipped by OR IGNORE (a `body IS NOT NULL` would extract it twice).
CREATE TRIGGER messages_search_insert AFTER INSERT ON messages BEGIN
    INSERT OR IGNORE INTO search_docs (session_id, message_id, body)
    SELECT session_id, id, body FROM message_search_text WHERE id = new.id;
END;

CREATE TRIGGER sessions_search_insert AFTER INSERT ON sessions WHEN new.title IS NOT NULL BEGIN
    INSERT INTO search_docs (session_id, message_id, body)
    VALUES (new.id, NULL, substr(new.title, 1, 200000));
END;
CREATE TRIGGER sessions_search_title AFTER UPDATE OF title ON sessions
WHEN old.title IS NOT new.title BEGIN
    DELETE FROM search_docs WHERE session_id = new.id AND message_id IS NULL;
    INSERT INTO search_docs (session_id, message_id, body)
    SELECT new.id, NULL, substr(new.title, 1, 200000) WHERE new.title IS NOT NULL;
END;

-- Backfill: the sessions and messages stored before this migration (each
-- message's text extracted once, as in the trigger). A one-off that reads
-- every message; `search_docs` and `search_fts` take about twice the size
-- of the transcripts' text.
INSERT INTO search_docs (session_id, message_id, body)
SELECT id, NULL, substr(title, 1, 200000) FROM sessions WHERE title IS NOT NULL;
INSERT OR IGNORE INTO search_docs (session_id, message_id, body)
SELECT session_id, id, body FROM message_search_text;
