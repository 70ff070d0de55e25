-- Who may use what, what they spent, and who did what.

-- Profiles and models granted to a user beyond the server's defaults.
-- `user_name` is not a foreign key: `auth = "header"` users have no row.
CREATE TABLE IF NOT EXISTS grants (
    user_name  TEXT COLLATE "C" NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('profile', 'model')),
    name       TEXT COLLATE "C" NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (user_name, kind, name)
);

-- Every increase of a session's cost, by owner: spend per day and month
-- survives deleting the session.
CREATE TABLE IF NOT EXISTS spend (
    owner    TEXT NOT NULL,
    at       BIGINT NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS spend_owner_at ON spend(owner, at);
CREATE OR REPLACE FUNCTION agentd_record_spend() RETURNS trigger AS $$
BEGIN
    IF NEW.cost_usd > OLD.cost_usd THEN
        INSERT INTO spend (owner, at, cost_usd)
        VALUES (NEW.owner, NEW.updated_at, NEW.cost_usd - OLD.cost_usd);
    END IF;
    RETURN NEW;
END
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS sessions_spend ON sessions;
CREATE TRIGGER sessions_spend AFTER UPDATE OF cost_usd ON sessions
FOR EACH ROW EXECUTE FUNCTION agentd_record_spend();

-- Every turn's start, by owner: turns per hour survive deleting the session.
CREATE TABLE IF NOT EXISTS turn_starts (
    owner TEXT NOT NULL,
    at    BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS turn_starts_owner_at ON turn_starts(owner, at);
CREATE OR REPLACE FUNCTION agentd_record_turn_start() RETURNS trigger AS $$
BEGIN
    INSERT INTO turn_starts (owner, at)
    SELECT owner, NEW.started_at FROM sessions WHERE id = NEW.session_id;
    RETURN NEW;
END
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS turns_started ON turns;
CREATE TRIGGER turns_started AFTER INSERT ON turns
FOR EACH ROW EXECUTE FUNCTION agentd_record_turn_start();

-- Append-only: who did what, when. `detail` is a JSON object.
CREATE TABLE IF NOT EXISTS audit_log (
    id     BIGSERIAL PRIMARY KEY,
    at     BIGINT NOT NULL,
    actor  TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT,
    detail TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS audit_log_actor ON audit_log(actor, id);
CREATE OR REPLACE FUNCTION agentd_audit_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only';
END
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS audit_log_append_only ON audit_log;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
FOR EACH ROW EXECUTE FUNCTION agentd_audit_append_only();
DROP TRIGGER IF EXISTS audit_log_no_truncate ON audit_log;
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
FOR EACH STATEMENT EXECUTE FUNCTION agentd_audit_append_only();
