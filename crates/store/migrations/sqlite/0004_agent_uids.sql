-- The unprivileged uid each user's agent works as when agentd runs as root:
-- allocated once from `[server] agent_uids` and kept, so a user's files keep
-- their owner across restarts and nodes. A uid is never handed to another user.
CREATE TABLE agent_uids (
    user_name TEXT PRIMARY KEY,
    uid       INTEGER NOT NULL UNIQUE CHECK (uid > 0)
) STRICT;
