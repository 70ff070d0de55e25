-- A session's own extended-thinking budget (`PATCH /v1/sessions/{id}`):
-- wins over its profile's and its model's; NULL leaves theirs.
ALTER TABLE sessions ADD COLUMN thinking_budget INTEGER;
