-- 0001: session records (internal/session.Session).
--
-- Encodings: times are Unix nanoseconds in UTC, NULL for the zero time;
-- durations are nanoseconds; Env and Labels are JSON objects, '{}' when
-- empty. The key is (tenant, id); name is the host-level sandbox name (its
-- state directory and cgroup), so it is unique across all tenants.
CREATE TABLE sessions (
    tenant       TEXT    NOT NULL CHECK (tenant <> ''),
    id           TEXT    NOT NULL CHECK (id <> ''),
    name         TEXT    NOT NULL UNIQUE CHECK (name <> ''),
    image        TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    reason       TEXT    NOT NULL,
    created_at   INTEGER,
    last_used_at INTEGER,
    idle_ttl     INTEGER NOT NULL,
    max_lifetime INTEGER NOT NULL,
    base_dir     TEXT    NOT NULL,
    env          TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(env)),
    memory_mb    INTEGER NOT NULL,
    cpus         REAL    NOT NULL,
    pids         INTEGER NOT NULL,
    disk_mb      INTEGER NOT NULL,
    network      TEXT    NOT NULL,
    labels       TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(labels)),
    pid          INTEGER NOT NULL,
    PRIMARY KEY (tenant, id)
) STRICT;

-- ListSessions orders by creation time then id, within one tenant or across
-- all of them (tenant breaks the remaining ties).
CREATE INDEX sessions_by_tenant_created ON sessions (tenant, created_at, id);
CREATE INDEX sessions_by_created ON sessions (created_at, id, tenant);
