-- The unprivileged uid each user's agent works as when agentd runs as root:
-- allocated once from `[server] agent_uids` and kept, so a user's files keep
-- their owner across restarts and nodes. A uid is never handed to another
-- user. BIGINT: uids go up to 2^32 - 2.
CREATE TABLE IF NOT EXISTS agent_uids (
    user_name TEXT COLLATE "C" PRIMARY KEY,
    uid       BIGINT NOT NULL UNIQUE CHECK (uid > 0)
);
