-- A session on an existing directory (`[workspaces] roots`, `[[projects]]`):
-- never handed to the agent's user, re-checked and opened anew for each turn.
ALTER TABLE sessions ADD COLUMN existing_workspace BOOLEAN NOT NULL DEFAULT FALSE;
