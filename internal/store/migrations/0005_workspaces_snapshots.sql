-- 0005: workspaces and snapshots (internal/session.Workspace, .Snapshot) and
-- which session uses which (internal/session.Attachment).
--
-- Encodings as in 0001: times are Unix nanoseconds in UTC, NULL for the zero
-- time; booleans are 0 or 1; overlays is a JSON array of strings. id is the
-- host-level name of the thing on disk (<data>/workspaces/layers/<id>,
-- <data>/snapshots/<id>), unique across tenants; names are unique within a
-- tenant.
CREATE TABLE workspaces (
    tenant     TEXT    NOT NULL CHECK (tenant <> ''),
    name       TEXT    NOT NULL CHECK (name <> ''),
    id         TEXT    NOT NULL UNIQUE CHECK (id <> ''),
    size_mb    INTEGER NOT NULL,
    shared     INTEGER NOT NULL CHECK (shared IN (0, 1)),
    created_at INTEGER,
    PRIMARY KEY (tenant, name)
) STRICT;

-- parent is the id of the snapshot whose session this one was taken from
-- ('' for none): its layer lies below this one's. auto_delete marks the
-- snapshot of a fork, removed with the last session that uses it.
CREATE TABLE snapshots (
    tenant       TEXT    NOT NULL CHECK (tenant <> ''),
    name         TEXT    NOT NULL CHECK (name <> ''),
    id           TEXT    NOT NULL UNIQUE CHECK (id <> ''),
    image        TEXT    NOT NULL,
    image_digest TEXT    NOT NULL,
    parent       TEXT    NOT NULL,
    overlays     TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(overlays)),
    session      TEXT    NOT NULL,
    size_bytes   INTEGER NOT NULL,
    auto_delete  INTEGER NOT NULL CHECK (auto_delete IN (0, 1)),
    created_at   INTEGER,
    PRIMARY KEY (tenant, name)
) STRICT;

-- One row per session that mounts a workspace or starts from a snapshot,
-- keyed by the session's sandbox name (sessions.name), so a daemon that
-- adopts running sessions knows again who holds what. workspace and
-- snapshot are ids, '' for none; workspace_mode is 'rw' or 'ro'.
CREATE TABLE attachments (
    session        TEXT NOT NULL PRIMARY KEY CHECK (session <> ''),
    tenant         TEXT NOT NULL,
    session_id     TEXT NOT NULL,
    workspace      TEXT NOT NULL,
    workspace_mode TEXT NOT NULL,
    snapshot       TEXT NOT NULL
) STRICT;
