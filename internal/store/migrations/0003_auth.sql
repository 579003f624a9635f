-- 0003: API keys (internal/auth.Key) and tenants' settings (internal/auth.Tenant).
--
-- Encodings as in 0001: times are Unix nanoseconds in UTC, NULL for the
-- zero time or, for expires_at and revoked_at, for "never"; admin is 0 or 1.
--
-- An API key's secret is never stored: hash is the SHA-256 of it. Keys do
-- not reference tenants: a tenant needs no row to have keys, and deleting
-- a tenant's row (its settings) leaves its keys alone.
CREATE TABLE api_keys (
    id         TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
    tenant     TEXT    NOT NULL CHECK (tenant <> ''),
    name       TEXT    NOT NULL,
    admin      INTEGER NOT NULL CHECK (admin IN (0, 1)),
    hash       BLOB    NOT NULL CHECK (length(hash) = 32),
    created_at INTEGER,
    expires_at INTEGER,
    revoked_at INTEGER
) STRICT;

-- ListKeys orders one tenant's keys by creation time then id.
CREATE INDEX api_keys_by_tenant ON api_keys (tenant, created_at, id);

-- quota and policy are JSON objects (see internal/store/auth.go), '{}' when
-- every field is zero.
CREATE TABLE tenants (
    name       TEXT NOT NULL PRIMARY KEY CHECK (name <> ''),
    quota      TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(quota)),
    policy     TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(policy)),
    updated_at INTEGER
) STRICT;
