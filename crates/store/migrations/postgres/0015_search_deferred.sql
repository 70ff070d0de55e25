-- Messages are indexed for search after they are stored, not inside the
-- append: extracting a message's text and building its tsvector takes
-- milliseconds for a long reply, and in the append's transaction that held
-- the session's (and the turn lease's) row and the turn's next events behind
-- it. The trigger now only queues the message; `index_pending_search` (a
-- task of every `agentd serve`, and each search before it runs) indexes the
-- queue in batches.
CREATE TABLE IF NOT EXISTS search_pending (
    message_id TEXT COLLATE "C" PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE
);

CREATE OR REPLACE FUNCTION agentd_search_message() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_pending (message_id) VALUES (NEW.id);
    RETURN NULL;
END
$$;
