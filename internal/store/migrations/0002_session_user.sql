-- 0002: the user a session's processes run as ("" is root).
ALTER TABLE sessions ADD COLUMN user TEXT NOT NULL DEFAULT '';
