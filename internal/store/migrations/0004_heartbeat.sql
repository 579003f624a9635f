-- 0004: one row the readiness probe rewrites to prove the database takes
-- writes (SQLite.Heartbeat). at is Unix nanoseconds in UTC.
CREATE TABLE heartbeat (
    id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    at INTEGER NOT NULL
) STRICT;
