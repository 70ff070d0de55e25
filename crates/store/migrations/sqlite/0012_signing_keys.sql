-- The keys agentd signs `{user_token}` JWTs with (identity for tools): kept
-- in the store so every node of a cluster signs with the same keys and a
-- tool verifies against one key set. Ed25519: `private_key` is the 32-byte
-- seed, `public_key` the 32-byte point, both base64url without padding.
CREATE TABLE signing_keys (
    kid         TEXT PRIMARY KEY,
    algorithm   TEXT NOT NULL,
    private_key TEXT NOT NULL,
    public_key  TEXT NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX signing_keys_created ON signing_keys (created_at);
