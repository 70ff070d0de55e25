-- The identity-provider accounts (issuer + subject) users were created
-- from or linked to: OIDC and JWT sign-ins find their user by this pair,
-- never by a bare name someone at the provider may choose.
-- `group_admin` / `group_grants` (a JSON list of {"kind", "name"}) are what
-- the provider's groups gave at the last sign-in: a later sign-in without
-- the group takes back exactly those, not what an admin granted by hand.
CREATE TABLE user_identities (
    issuer       TEXT NOT NULL,
    subject      TEXT NOT NULL,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at   INTEGER NOT NULL,
    group_admin  INTEGER NOT NULL DEFAULT 0,
    group_grants TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (issuer, subject)
) STRICT;
CREATE INDEX user_identities_user ON user_identities(user_id);
