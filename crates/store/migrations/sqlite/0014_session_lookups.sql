-- Deleting a session deletes its pending requests (the foreign key's
-- cascade); only the open ones had an index, so each deletion read the table.
CREATE INDEX IF NOT EXISTS pending_requests_session ON pending_requests(session_id);
