-- Messages are indexed for search after they are stored, not inside the
-- append: extracting a message's text and adding it to the FTS index wrote
-- about as many pages as the rest of a turn's appends, in the transaction
-- the turn's next events wait behind. The trigger now only queues the
-- message; `index_pending_search` (a task of `agentd serve`, and each search
-- before it runs) indexes the queue in batches, one FTS segment a batch.
CREATE TABLE search_pending (
    message_id TEXT PRIMARY KEY NOT NULL REFERENCES messages(id) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

DROP TRIGGER messages_search_insert;
CREATE TRIGGER messages_search_queue AFTER INSERT ON messages BEGIN
    INSERT OR IGNORE INTO search_pending (message_id) VALUES (new.id);
END;
