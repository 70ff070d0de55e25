-- Who may use what, what they spent, and who did what.

-- Profiles and models granted to a user beyond the server's defaults.
-- `user_name` is not a foreign key: `auth = "header"` users have no row.
CREATE TABLE grants (
    user_name  TEXT NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('profile', 'model')),
    name       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (user_name, kind, name)
) STRICT;

-- Every increase of a session's cost, by owner: spend per day and month
-- survives deleting the session.
CREATE TABLE spend (
    owner    TEXT NOT NULL,
    at       INTEGER NOT NULL,
    cost_usd REAL NOT NULL
) STRICT;
CREATE INDEX spend_owner_at ON spend(owner, at);
CREATE TRIGGER sessions_spend AFTER UPDATE OF cost_usd ON sessions
WHEN NEW.cost_usd > OLD.cost_usd
BEGIN
    INSERT INTO spend (owner, at, cost_usd)
    VALUES (NEW.owner, NEW.updated_at, NEW.cost_usd - OLD.cost_usd);
END;

-- Every turn's start, by owner: turns per hour survive deleting the session.
CREATE TABLE turn_starts (
    owner TEXT NOT NULL,
    at    INTEGER NOT NULL
) STRICT;
CREATE INDEX turn_starts_owner_at ON turn_starts(owner, at);
CREATE TRIGGER turns_started AFTER INSERT ON turns
BEGIN
    INSERT INTO turn_starts (owner, at)
    SELECT owner, NEW.started_at FROM sessions WHERE id = NEW.session_id;
END;

-- Append-only: who did what, when. `detail` is a JSON object.
CREATE TABLE audit_log (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    at     INTEGER NOT NULL,
    actor  TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT,
    detail TEXT NOT NULL DEFAULT '{}'
) STRICT;
CREATE INDEX audit_log_actor ON audit_log(actor, id);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
