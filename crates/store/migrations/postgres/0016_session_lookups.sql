-- Lookups by session that had to read a whole table.
--
-- A session's latest turn (`last_turn`, before every turn a node takes):
-- without an index that starts with the session, PostgreSQL walked the turns'
-- primary key backwards, through every turn of every session for a session
-- with none yet.
CREATE INDEX IF NOT EXISTS turns_session_latest ON turns(session_id, id);

-- Deleting a session deletes its pending requests (the foreign key's
-- cascade); only the open ones had an index.
CREATE INDEX IF NOT EXISTS pending_requests_session ON pending_requests(session_id);

-- `sessions.id` compares in the "C" collation and `search_docs.session_id` in
-- the database's: compared as they are, the collations conflict and no index
-- on `search_docs.session_id` applies, so a title change read every title.
CREATE OR REPLACE FUNCTION agentd_search_title() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM search_docs
        WHERE session_id = NEW.id COLLATE "default" AND message_id IS NULL;
    END IF;
    IF NEW.title IS NOT NULL THEN
        INSERT INTO search_docs (session_id, message_id, body)
        VALUES (NEW.id, NULL, left(NEW.title, 200000));
    END IF;
    RETURN NULL;
END
$$;
