-- Finding sessions: pin, archive and tags on sessions, and full-text search
-- over titles and transcripts (text, tool calls' inputs, tool results).

ALTER TABLE sessions ADD COLUMN IF NOT EXISTS pinned BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS archived BOOLEAN NOT NULL DEFAULT FALSE;
-- A JSON array of tags (lowercase, validated by the server).
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS tags TEXT NOT NULL DEFAULT '[]';
CREATE INDEX IF NOT EXISTS sessions_owner_pinned
    ON sessions(owner, pinned DESC, created_at DESC, id DESC);

-- The text of a message: text blocks, tool calls (name and every string of
-- the input), tool results and documents' titles; not thinking, not images.
-- NULL when it has none; only its first 200 000 characters (PostgreSQL
-- refuses a tsvector of more than 1 MiB of words, which would refuse the
-- message itself: 200 000 characters are at most 800 000 bytes). `jsonb`
-- refuses NUL (`\u0000`, which `text` keeps): those escapes are made spaces
-- first, as in SQLite (those after an even number of backslashes: the others
-- are text), when there may be one.
CREATE OR REPLACE FUNCTION agentd_message_search_text(content TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$
    SELECT left(NULLIF(string_agg(part, E'\n'), ''), 200000) FROM (
        SELECT CASE b ->> 'type'
            WHEN 'text' THEN b ->> 'text'
            WHEN 'tool_result' THEN b ->> 'content'
            WHEN 'tool_use' THEN (b ->> 'name') || ' ' || COALESCE(
                (SELECT string_agg(v #>> '{}', ' ')
                 FROM jsonb_path_query(b -> 'input', 'strict $.**') AS v
                 WHERE jsonb_typeof(v) = 'string'), '')
            WHEN 'document' THEN b ->> 'title'
        END AS part
        FROM jsonb_array_elements((CASE
            WHEN strpos(content, '\u0000') = 0 THEN content
            ELSE regexp_replace(content, '(?<!\\)((?:\\\\)*)\\u0000', '\1\\u0020', 'g')
        END)::jsonb -> 'content') AS b
    ) AS parts WHERE part IS NOT NULL AND part <> ''
$$;

-- Words are split at every ASCII character but letters and digits, on both
-- sides (the documents here, the query in `search`),
-- so the parser's special tokens (paths, URLs, e-mail addresses) match word
-- by word as in SQLite; the parser splits the rest (non-ASCII punctuation)
-- as the database's LC_CTYPE says. Not `[:alnum:]`: under a C or POSIX
-- LC_CTYPE, it is ASCII only and would drop every other letter.
CREATE OR REPLACE FUNCTION agentd_search_words(body TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$
    SELECT regexp_replace(body, '[\x01-\x2F\x3A-\x40\x5B-\x60\x7B-\x7F]+', ' ', 'g')
$$;

-- The searchable text of each message (`message_id`) and each session's
-- title (`message_id` NULL), kept by the triggers below so that every
-- writer of messages (appends, imports, forks) is covered.
CREATE TABLE IF NOT EXISTS search_docs (
    id         BIGSERIAL PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    message_id TEXT COLLATE "C" UNIQUE REFERENCES messages(id) ON DELETE CASCADE,
    body       TEXT NOT NULL,
    doc        TSVECTOR GENERATED ALWAYS AS
               (to_tsvector('simple'::regconfig, agentd_search_words(body))) STORED
);
CREATE INDEX IF NOT EXISTS search_docs_session ON search_docs(session_id);
CREATE UNIQUE INDEX IF NOT EXISTS search_docs_title
    ON search_docs(session_id) WHERE message_id IS NULL;

CREATE OR REPLACE FUNCTION agentd_search_message() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    text_of TEXT := agentd_message_search_text(NEW.content);
BEGIN
    IF text_of IS NOT NULL THEN
        INSERT INTO search_docs (session_id, message_id, body)
        VALUES (NEW.session_id, NEW.id, text_of);
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS messages_search_insert ON messages;
CREATE TRIGGER messages_search_insert AFTER INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION agentd_search_message();

CREATE OR REPLACE FUNCTION agentd_search_title() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM search_docs WHERE session_id = NEW.id AND message_id IS NULL;
    END IF;
    IF NEW.title IS NOT NULL THEN
        INSERT INTO search_docs (session_id, message_id, body)
        VALUES (NEW.id, NULL, left(NEW.title, 200000));
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS sessions_search_insert ON sessions;
CREATE TRIGGER sessions_search_insert AFTER INSERT ON sessions
    FOR EACH ROW EXECUTE FUNCTION agentd_search_title();
DROP TRIGGER IF EXISTS sessions_search_title ON sessions;
CREATE TRIGGER sessions_search_title AFTER UPDATE OF title ON sessions
    FOR EACH ROW WHEN (OLD.title IS DISTINCT FROM NEW.title)
    EXECUTE FUNCTION agentd_search_title();

-- Backfill: the sessions and messages stored before this migration (each
-- message's text extracted once: OFFSET 0 keeps the subquery from being
-- flattened into two calls), then the index over them all at once. A one-off
-- that reads every message; `search_docs` takes about the size of the
-- transcripts' text again.
INSERT INTO search_docs (session_id, message_id, body)
SELECT id, NULL, left(title, 200000) FROM sessions WHERE title IS NOT NULL
ON CONFLICT DO NOTHING;
INSERT INTO search_docs (session_id, message_id, body)
SELECT m.session_id, m.id, t.body
FROM messages AS m
CROSS JOIN LATERAL (SELECT agentd_message_search_text(m.content) AS body OFFSET 0) AS t
WHERE t.body IS NOT NULL
ON CONFLICT DO NOTHING;
CREATE INDEX IF NOT EXISTS search_docs_doc ON search_docs USING GIN (doc);
