package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// migrationFiles holds the schema, one file per version. To change the
// schema, add the next NNNN_name.sql; never edit a file that has shipped.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one schema step: running sql on a database at version-1
// brings it to version.
type migration struct {
	version int
	name    string // the file name, for errors
	sql     string
}

// loadMigrations reads migrations/NNNN_name.sql from fsys. Versions must run
// 1, 2, 3… without gaps or repeats, so that a database's user_version says
// exactly which files it has seen.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	// fs.Glob returns names in lexical order, which with four-digit
	// prefixes is version order.
	var ms []migration
	for _, name := range names {
		base := path.Base(name)
		prefix, rest, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(prefix)
		if !ok || len(prefix) != 4 || err != nil || rest == ".sql" {
			return nil, fmt.Errorf("migration %s: name is not NNNN_name.sql", base)
		}
		if want := len(ms) + 1; version != want {
			return nil, fmt.Errorf("migration %s: version %d, want %d (versions run 1, 2, 3… without gaps or repeats)", base, version, want)
		}
		text, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", base, err)
		}
		ms = append(ms, migration{version: version, name: base, sql: string(text)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations found")
	}
	return ms, nil
}

// schemaTooNewError refuses a database written by a newer warren: its
// tables may have meanings this binary does not know.
type schemaTooNewError struct {
	have, known int
}

func (e *schemaTooNewError) Error() string {
	return fmt.Sprintf("database schema version %d is newer than this warren (%d); upgrade warren", e.have, e.known)
}

// migrate brings db up to the last of ms and returns how many migrations it
// applied. Everything happens in one transaction, so a failing migration
// leaves the database as it was, and two processes opening the same file
// cannot both apply a step. The version lives in PRAGMA user_version, which
// is part of the database header and so commits or rolls back with the
// transaction.
//
// Preconditions: db begins its transactions with BEGIN IMMEDIATE (the
// _txlock=immediate DSN parameter), so the version is read under the write
// lock.
func migrate(ctx context.Context, db *sql.DB, ms []migration) (applied int, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin migration: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback() // the error that got us here matters more
		}
	}()

	have, err := userVersion(ctx, tx)
	if err != nil {
		return 0, err
	}
	known := len(ms)
	if have > known {
		return 0, &schemaTooNewError{have: have, known: known}
	}
	for _, m := range ms[have:] {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return 0, fmt.Errorf("apply migration %s: %w", m.name, err)
		}
		applied++
	}
	if applied == 0 {
		if err := tx.Rollback(); err != nil {
			return 0, fmt.Errorf("end migration check: %w", err)
		}
		return 0, nil
	}
	// PRAGMA takes no bound parameters; known is an int we computed.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", known)); err != nil {
		return 0, fmt.Errorf("set schema version %d: %w", known, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit migrations to version %d: %w", known, err)
	}
	return applied, nil
}

// queryer is what userVersion needs of a *sql.DB, *sql.Conn or *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// userVersion reads the schema version recorded in the database header.
func userVersion(ctx context.Context, q queryer) (int, error) {
	var v int
	if err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
