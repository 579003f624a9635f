package store

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/session/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) session.Store {
		return mustOpen(t, dbPath(t))
	})
}

// dbPath is a database path in a fresh temporary directory.
func dbPath(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "warren.db")
}

// mustOpen opens the store at path. The caller closes it.
func mustOpen(t *testing.T, path string) *SQLite {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%q) = %v, want nil", path, err)
	}
	return s
}

func mustClose(t *testing.T, s *SQLite) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
}

// latest is the schema version of the embedded migrations.
func latest(t *testing.T) int {
	t.Helper()
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatalf("loadMigrations(embedded) = %v, want nil", err)
	}
	return len(ms)
}

func checkVersion(t *testing.T, q queryer, want int) {
	t.Helper()
	got, err := userVersion(t.Context(), q)
	if err != nil {
		t.Fatalf("userVersion() = %v, want nil", err)
	}
	if got != want {
		t.Errorf("user_version = %d, want %d", got, want)
	}
}

// schema lists the database's tables and indexes as their CREATE text.
func schema(t *testing.T, q *sql.DB) []string {
	t.Helper()
	rows, err := q.QueryContext(t.Context(), `SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY name`)
	if err != nil {
		t.Fatalf("read schema: %v", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatalf("read schema: %v", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read schema: %v", err)
	}
	return out
}

func TestOpenFresh(t *testing.T) {
	s := mustOpen(t, dbPath(t))
	defer mustClose(t, s)
	checkVersion(t, s.db, latest(t))

	// Every pooled connection must carry the DSN's settings, so hold them
	// all at once and ask each.
	want := map[string]string{
		"journal_mode": "wal",
		"foreign_keys": "1",
		"synchronous":  "1", // NORMAL
		"busy_timeout": fmt.Sprint(busyTimeout.Milliseconds()),
	}
	var conns []*sql.Conn
	for range maxConns {
		c, err := s.db.Conn(t.Context())
		if err != nil {
			t.Fatalf("Conn() = %v, want nil", err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	for i, c := range conns {
		for pragma, want := range want {
			var got string
			if err := c.QueryRowContext(t.Context(), "PRAGMA "+pragma).Scan(&got); err != nil {
				t.Fatalf("conn %d: PRAGMA %s: %v", i, pragma, err)
			}
			if got != want {
				t.Errorf("conn %d: PRAGMA %s = %q, want %q", i, pragma, got, want)
			}
		}
	}
}

func TestReopenIsNoop(t *testing.T) {
	path := dbPath(t)
	s := mustOpen(t, path)
	before := schema(t, s.db)

	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatalf("loadMigrations(embedded) = %v, want nil", err)
	}
	if n, err := migrate(t.Context(), s.db, ms); n != 0 || err != nil {
		t.Errorf("migrate() on a current database = %d, %v, want 0, nil", n, err)
	}
	mustClose(t, s)

	s = mustOpen(t, path)
	defer mustClose(t, s)
	checkVersion(t, s.db, latest(t))
	if diff := cmp.Diff(before, schema(t, s.db)); diff != "" {
		t.Errorf("schema changed on reopen (-before +after):\n%s", diff)
	}
}

func TestRefuseNewerSchema(t *testing.T) {
	path := dbPath(t)
	s := mustOpen(t, path)
	newer := latest(t) + 1
	if _, err := s.db.ExecContext(t.Context(), fmt.Sprintf("PRAGMA user_version = %d", newer)); err != nil {
		t.Fatalf("set user_version: %v", err)
	}
	mustClose(t, s)

	s, err := Open(path)
	if err == nil {
		s.Close()
		t.Fatalf("Open(%q) of schema version %d = nil error, want refusal", path, newer)
	}
	var tooNew *schemaTooNewError
	if !errors.As(err, &tooNew) || tooNew.have != newer || tooNew.known != latest(t) {
		t.Errorf("Open(%q) = %v, want a schemaTooNewError{%d, %d}", path, err, newer, latest(t))
	}
	// The message is what an operator reads; check it says what to do.
	want := fmt.Sprintf("database schema version %d is newer than this warren (%d); upgrade warren", newer, latest(t))
	if !strings.Contains(err.Error(), want) {
		t.Errorf("Open(%q) = %q, want it to contain %q", path, err, want)
	}

	// Refusing must not touch the file.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatalf("sql.Open(%q) = %v", path, err)
	}
	defer db.Close()
	checkVersion(t, db, newer)
}

func TestFileMode(t *testing.T) {
	path := dbPath(t)
	s := mustOpen(t, path)
	defer mustClose(t, s)
	// A write makes sure the WAL and its index exist while we look.
	sess := &session.Session{Tenant: "acme", ID: "s1", Name: "w-1"}
	if err := s.CreateSession(t.Context(), sess); err != nil {
		t.Fatalf("CreateSession() = %v, want nil", err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Errorf("Stat(%q) = %v, want nil", p, err)
			continue
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("mode of %s = %v, want %v", filepath.Base(p), got, fs.FileMode(0o600))
		}
	}
}

func TestDataSurvivesReopen(t *testing.T) {
	path := dbPath(t)
	want := &session.Session{
		ID:          "s1",
		Tenant:      "acme",
		Name:        "w-acme-s1",
		Image:       "python:3.13",
		State:       session.StateRunning,
		CreatedAt:   time.Date(2026, 5, 6, 7, 8, 9, 987654321, time.UTC),
		LastUsedAt:  time.Date(2026, 5, 6, 7, 9, 9, 1, time.UTC),
		IdleTTL:     10 * time.Minute,
		MaxLifetime: time.Hour,
		BaseDir:     "/home/user",
		Env:         map[string]string{"A": "1"},
		Limits:      session.Limits{MemoryMB: 256, CPUs: 0.5, Pids: 128, DiskMB: 1024},
		Network:     "none",
		Labels:      map[string]string{"k": "v"},
		Pid:         1234,
	}
	s := mustOpen(t, path)
	if err := s.CreateSession(t.Context(), want); err != nil {
		t.Fatalf("CreateSession() = %v, want nil", err)
	}
	mustClose(t, s)

	s = mustOpen(t, path)
	defer mustClose(t, s)
	got, err := s.GetSession(t.Context(), "acme", "s1")
	if err != nil {
		t.Fatalf("GetSession(%q, %q) after reopen = %v, want nil", "acme", "s1", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetSession(%q, %q) after reopen mismatch (-want +got):\n%s", "acme", "s1", diff)
	}
}

// withExtra returns the embedded migrations plus one more, numbered next,
// with the given SQL, and that next version.
func withExtra(t *testing.T, sql string) ([]migration, int) {
	t.Helper()
	files := fstest.MapFS{}
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		t.Fatalf("read migrations: %v", err)
	}
	for _, e := range entries {
		b, err := fs.ReadFile(migrationFiles, "migrations/"+e.Name())
		if err != nil {
			t.Fatalf("read %s: %v", e.Name(), err)
		}
		files["migrations/"+e.Name()] = &fstest.MapFile{Data: b}
	}
	next := len(entries) + 1
	files[fmt.Sprintf("migrations/%04d_extra.sql", next)] = &fstest.MapFile{Data: []byte(sql)}
	ms, err := loadMigrations(files)
	if err != nil {
		t.Fatalf("loadMigrations() = %v, want nil", err)
	}
	return ms, next
}

func TestMigrateUpFromPrevious(t *testing.T) {
	s := mustOpen(t, dbPath(t)) // at the latest embedded version
	defer mustClose(t, s)
	ms, next := withExtra(t, `
		CREATE TABLE extra (x INTEGER NOT NULL) STRICT;
		INSERT INTO extra (x) VALUES (42);`)

	if n, err := migrate(t.Context(), s.db, ms); n != 1 || err != nil {
		t.Fatalf("migrate() from version %d = %d, %v, want 1, nil", next-1, n, err)
	}
	checkVersion(t, s.db, next)
	var x int
	if err := s.db.QueryRowContext(t.Context(), `SELECT x FROM extra`).Scan(&x); err != nil || x != 42 {
		t.Errorf("SELECT x FROM extra = %d, %v, want 42, nil", x, err)
	}
	if n, err := migrate(t.Context(), s.db, ms); n != 0 || err != nil {
		t.Errorf("migrate() again = %d, %v, want 0, nil", n, err)
	}
}

func TestMigrateFailureRollsBack(t *testing.T) {
	s := mustOpen(t, dbPath(t))
	defer mustClose(t, s)
	before := schema(t, s.db)
	ms, next := withExtra(t, `
		CREATE TABLE extra (x INTEGER NOT NULL) STRICT;
		THIS IS NOT SQL;`)

	if n, err := migrate(t.Context(), s.db, ms); err == nil {
		t.Fatalf("migrate() with a broken %04d = %d, nil, want an error", next, n)
	}
	checkVersion(t, s.db, next-1)
	if diff := cmp.Diff(before, schema(t, s.db)); diff != "" {
		t.Errorf("a failed migration changed the schema (-before +after):\n%s", diff)
	}
}

func TestLoadMigrations(t *testing.T) {
	file := &fstest.MapFile{Data: []byte("SELECT 1;")}
	tests := []struct {
		name    string
		files   []string
		wantErr bool
	}{
		{"in order", []string{"0001_a.sql", "0002_b.sql", "0003_c.sql"}, false},
		{"gap", []string{"0001_a.sql", "0003_c.sql"}, true},
		{"repeat", []string{"0001_a.sql", "0001_b.sql"}, true},
		{"not from 1", []string{"0002_b.sql"}, true},
		{"short prefix", []string{"1_a.sql"}, true},
		{"no name", []string{"0001_.sql"}, true},
		{"no underscore", []string{"0001.sql"}, true},
		{"not a number", []string{"abcd_a.sql"}, true},
		{"none", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{"migrations/README": file} // not *.sql: ignored
			for _, f := range tc.files {
				fsys["migrations/"+f] = file
			}
			ms, err := loadMigrations(fsys)
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("loadMigrations(%v) = %v, want error: %t", tc.files, err, tc.wantErr)
			}
			if err == nil && len(ms) != len(tc.files) {
				t.Errorf("loadMigrations(%v) = %d migrations, want %d", tc.files, len(ms), len(tc.files))
			}
		})
	}
}

// TestTwoHandles writes through two stores on one file at once, as two
// processes would: their writers meet only on SQLite's file lock, which
// busy_timeout must make them wait for.
func TestTwoHandles(t *testing.T) {
	path := dbPath(t)
	stores := []*SQLite{mustOpen(t, path), mustOpen(t, path)}
	defer mustClose(t, stores[1])
	defer mustClose(t, stores[0])

	const workers, perWorker = 8, 16
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			st := stores[w%2]
			for i := range perWorker {
				s := &session.Session{Tenant: "acme", ID: fmt.Sprintf("w%d-%d", w, i), Name: fmt.Sprintf("n%d-%d", w, i)}
				if err := st.CreateSession(t.Context(), s); err != nil {
					t.Errorf("CreateSession(%q, %q) = %v, want nil", s.Tenant, s.ID, err)
					return
				}
				s.State = session.StateRunning
				if err := st.UpdateSession(t.Context(), s); err != nil {
					t.Errorf("UpdateSession(%q, %q) = %v, want nil", s.Tenant, s.ID, err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, err := stores[0].ListSessions(t.Context(), "acme")
	if err != nil || len(got) != workers*perWorker {
		t.Errorf("ListSessions(%q) = %d sessions, %v, want %d, nil", "acme", len(got), err, workers*perWorker)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(""); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Open(%q) = %v, want %v", "", err, errdefs.ErrInvalidArgument)
	}
	missing := filepath.Join(t.TempDir(), "no-such-dir", "warren.db")
	if s, err := Open(missing); err == nil {
		s.Close()
		t.Errorf("Open(%q) = nil error, want one (the directory does not exist)", missing)
	}
}

// TestStrangePath opens a path holding characters that mean something in a
// URI; the DSN must escape them rather than read them as syntax.
func TestStrangePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a b?c=d#e%20f.db")
	s := mustOpen(t, path)
	mustClose(t, s)
	if _, err := os.Stat(path); err != nil {
		t.Errorf("Stat(%q) = %v, want the database there", path, err)
	}
}

func TestCreateUnencodable(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*session.Session)
	}{
		{"time after 2262", func(s *session.Session) { s.CreatedAt = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"time before 1678", func(s *session.Session) { s.LastUsedAt = time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC) }},
		{"env not UTF-8", func(s *session.Session) { s.Env = map[string]string{"A": "\xff"} }},
		{"label key not UTF-8", func(s *session.Session) { s.Labels = map[string]string{"\xfe": "v"} }},
	}
	s := mustOpen(t, dbPath(t))
	defer mustClose(t, s)
	for _, tc := range tests {
		sess := &session.Session{Tenant: "acme", ID: "s1", Name: "w-1"}
		tc.modify(sess)
		if err := s.CreateSession(t.Context(), sess); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("CreateSession(%s) = %v, want %v", tc.name, err, errdefs.ErrInvalidArgument)
		}
	}
}
