package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

var _ session.Store = (*SQLite)(nil)

// Connection settings. Every connection gets them from the DSN as it opens,
// so no pooled connection can miss one.
const (
	// busyTimeout is how long a connection waits for another's write lock
	// before failing with SQLITE_BUSY. Writes here take microseconds to
	// milliseconds; seconds of waiting means something is wrong.
	busyTimeout = 5 * time.Second

	// maxConns bounds the pool. In WAL mode readers never block the writer
	// or each other, so a few connections let requests read in parallel;
	// writers serialize inside SQLite on the database's write lock, and
	// busy_timeout makes them queue for it instead of failing. Two things
	// make that queueing safe:
	//   - _txlock=immediate begins every transaction with BEGIN IMMEDIATE,
	//     so a transaction takes the write lock before reading. A deferred
	//     transaction that reads first and then upgrades to a writer gets
	//     SQLITE_BUSY at once, whatever busy_timeout says (waiting could
	//     deadlock), which is the usual source of "database is locked".
	//   - single-statement writes outside a transaction take the write lock
	//     at the start of the statement, where the busy handler applies.
	// We keep one pool rather than a separate one-connection writer pool:
	// at our write rates (a few per session lifetime) lock waits are rare
	// and short, and one *sql.DB is one thing to open, configure and close.
	// The bound matters too: each connection carries its own page cache and
	// libc state in modernc.org/sqlite, and database/sql's default is no
	// bound at all.
	maxConns = 4
)

// SQLite is a session.Store in one SQLite database file. It is safe for
// concurrent use, including by several processes sharing the file.
//
// Times are stored as Unix nanoseconds and come back in UTC, equal to what
// went in at nanosecond precision; the zero time is stored as NULL and comes
// back as the zero time. Env and Labels come back nil when they were nil or
// empty.
type SQLite struct {
	db  *sql.DB
	res *reserve
}

// Open opens the database at path, creating it with mode 0600 if it does
// not exist, and migrates its schema to the latest version this binary
// knows. It refuses a database whose schema is newer. The directory must
// exist. An existing file keeps its mode.
func Open(path string) (*SQLite, error) {
	ctx := context.Background()
	if path == "" {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "open store: empty database path")
	}
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	dsn, err := dataSourceName(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// Create the file ourselves so it is private from the start: SQLite
	// would create it 0644. The -wal and -shm files SQLite creates later
	// copy the database file's mode.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, dbError(err, "open store %s", path)
	}
	if err := f.Close(); err != nil {
		return nil, dbError(err, "open store %s", path)
	}

	res := &reserve{path: path + ".reserve"}
	s, err := open(ctx, dsn, ms, res)
	// Opening a WAL database sizes its -shm file, which needs a page: on a
	// full disk the reserve a previous daemon left makes room for it.
	if err != nil && fullDisk(err) && res.release() {
		s, err = open(ctx, dsn, ms, res)
	}
	if err != nil {
		return nil, dbError(err, "open store %s", path)
	}
	res.fill()
	return s, nil
}

func open(ctx context.Context, dsn string, ms []migration, res *reserve) (*SQLite, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(maxConns)
	// Keep every connection: a new one re-runs the DSN's PRAGMAs.
	db.SetMaxIdleConns(maxConns)
	s := &SQLite{db: db, res: res}
	if err := s.init(ctx, ms); err != nil {
		_ = db.Close() // the init error is the one to report
		return nil, err
	}
	return s, nil
}

// dataSourceName is the driver DSN for the database file at path: a file:
// URI, so that any character in the path is escaped rather than read as
// URI syntax, with the per-connection settings as driver parameters.
func dataSourceName(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(busyTimeout.Milliseconds(), 10))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL") // durable in WAL except for the last commits on power loss
	q.Set("_foreign_keys", "1")
	q.Set("_txlock", "immediate")
	u := url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}
	return u.String(), nil
}

// init checks the connection settings took and migrates the schema.
func (s *SQLite) init(ctx context.Context, ms []migration) error {
	// journal_mode=WAL silently stays "delete" where WAL cannot work (for
	// instance a filesystem without shared memory); our concurrency relies
	// on WAL, so say so instead.
	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return dbError(err, "read journal mode")
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, want wal", mode)
	}
	if _, err := migrate(ctx, s.db, ms); err != nil {
		return err
	}
	return nil
}

// Close closes the database. The store must not be used afterwards.
func (s *SQLite) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// sessionColumns are the sessions table's columns in the order
// record.insertArgs and record.scanDest use.
const sessionColumns = `tenant, id, name, image, state, reason, created_at, last_used_at,
	idle_ttl, max_lifetime, base_dir, env, memory_mb, cpus, pids, disk_mb, network, labels, pid, user`

// CreateSession stores a new session. It fails with ErrConflict when the
// tenant already has a session with s.ID or any tenant has one named
// s.Name, and with ErrInvalidArgument when s's tenant, id or name is empty,
// a time is outside the years 1678 to 2262, or Env or Labels holds a string
// that is not UTF-8.
func (s *SQLite) CreateSession(ctx context.Context, sess *session.Session) error {
	if err := validate(sess); err != nil {
		return err
	}
	r, err := encode(sess)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx,
		`INSERT INTO sessions (`+sessionColumns+`)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.insertArgs()...)
	if err != nil {
		if cerr := conflict(err, sess); cerr != nil {
			return cerr
		}
		return dbError(err, "create session %q in tenant %q", sess.ID, sess.Tenant)
	}
	return nil
}

// GetSession returns the tenant's session id, or ErrNotFound.
func (s *SQLite) GetSession(ctx context.Context, tenant, id string) (*session.Session, error) {
	var r record
	err := s.db.QueryRowContext(ctx,
		`SELECT `+sessionColumns+` FROM sessions WHERE tenant = ? AND id = ?`,
		tenant, id).Scan(r.scanDest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.New(errdefs.ErrNotFound, "session %q not found", id)
	}
	if err != nil {
		return nil, dbError(err, "get session %q in tenant %q", id, tenant)
	}
	return r.decode()
}

// ListSessions returns the tenant's sessions, or every tenant's for tenant
// "", ordered by creation time, then id, then tenant.
func (s *SQLite) ListSessions(ctx context.Context, tenant string) ([]*session.Session, error) {
	query := `SELECT ` + sessionColumns + ` FROM sessions ORDER BY created_at, id, tenant`
	var args []any
	if tenant != "" {
		query = `SELECT ` + sessionColumns + ` FROM sessions WHERE tenant = ? ORDER BY created_at, id`
		args = append(args, tenant)
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, dbError(err, "list sessions of tenant %q", tenant)
	}
	defer rows.Close()
	var out []*session.Session
	for rows.Next() {
		var r record
		if err := rows.Scan(r.scanDest()...); err != nil {
			return nil, dbError(err, "list sessions of tenant %q", tenant)
		}
		sess, err := r.decode()
		if err != nil {
			return nil, err
		}
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(err, "list sessions of tenant %q", tenant)
	}
	return out, nil
}

// UpdateSession replaces every field of the stored (s.Tenant, s.ID) but
// those two. It fails with ErrNotFound when there is no such session and
// with ErrConflict when s.Name belongs to another session. Keeping Name
// and CreatedAt unchanged is the caller's invariant; the store writes what
// it is given.
func (s *SQLite) UpdateSession(ctx context.Context, sess *session.Session) error {
	if err := validate(sess); err != nil {
		return err
	}
	r, err := encode(sess)
	if err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx,
		`UPDATE sessions SET name = ?, image = ?, state = ?, reason = ?,
		   created_at = ?, last_used_at = ?, idle_ttl = ?, max_lifetime = ?,
		   base_dir = ?, env = ?, memory_mb = ?, cpus = ?, pids = ?, disk_mb = ?,
		   network = ?, labels = ?, pid = ?, user = ?
		 WHERE tenant = ? AND id = ?`,
		r.updateArgs()...)
	if err != nil {
		if cerr := conflict(err, sess); cerr != nil {
			return cerr
		}
		return dbError(err, "update session %q in tenant %q", sess.ID, sess.Tenant)
	}
	return notFoundIfNone(res, sess.ID)
}

// DeleteSession removes the tenant's session id, or fails with ErrNotFound.
// A delete frees space and a client is told it is done, so on a full disk
// it spends the store's reserve rather than fail.
func (s *SQLite) DeleteSession(ctx context.Context, tenant, id string) error {
	const q = `DELETE FROM sessions WHERE tenant = ? AND id = ?`
	res, err := s.db.ExecContext(ctx, q, tenant, id)
	if err != nil && fullDisk(err) && s.res.release() {
		res, err = s.db.ExecContext(ctx, q, tenant, id)
	}
	if err == nil {
		s.res.fill()
	}
	if err != nil {
		return dbError(err, "delete session %q in tenant %q", id, tenant)
	}
	return notFoundIfNone(res, id)
}

// notFoundIfNone turns a statement that touched no row into ErrNotFound.
func notFoundIfNone(res sql.Result, id string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return dbError(err, "session %q: rows affected", id)
	}
	if n == 0 {
		return errdefs.New(errdefs.ErrNotFound, "session %q not found", id)
	}
	return nil
}

// validate rejects a session the store cannot key. Tenant "" is reserved:
// ListSessions reads it as every tenant.
func validate(sess *session.Session) error {
	if sess == nil {
		return errdefs.New(errdefs.ErrInvalidArgument, "nil session")
	}
	if sess.Tenant == "" || sess.ID == "" || sess.Name == "" {
		return errdefs.New(errdefs.ErrInvalidArgument,
			"session %q in tenant %q named %q: tenant, id and name must not be empty",
			sess.ID, sess.Tenant, sess.Name)
	}
	return nil
}

// conflict classifies a failed INSERT or UPDATE of sess that broke one of
// the sessions table's keys, or returns nil for any other error.
func conflict(err error, sess *session.Session) error {
	switch sqliteCode(err) {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return errdefs.New(errdefs.ErrConflict, "session %q already exists", sess.ID)
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		// The table's only UNIQUE constraint besides the primary key.
		return errdefs.New(errdefs.ErrConflict, "session name %q is already in use", sess.Name)
	}
	return nil
}

// sqliteCode returns the extended result code SQLite gave for err, or 0
// when err did not come from SQLite. The driver turns extended result codes
// on for every connection, so a constraint failure says which kind of
// constraint failed (SQLITE_CONSTRAINT_PRIMARYKEY, _UNIQUE…) without our
// reading its message.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// record is a Session in its column encoding.
type record struct {
	tenant, id, name      string
	image, state, reason  string
	createdAt, lastUsedAt sql.NullInt64 // Unix ns, NULL for the zero time
	idleTTL, maxLifetime  int64         // ns
	baseDir               string
	env                   string // JSON object
	memoryMB              int64
	cpus                  float64
	pids, diskMB          int64
	network               string
	labels                string // JSON object
	pid                   int64
	user                  string
}

// insertArgs are r's values in sessionColumns order.
func (r *record) insertArgs() []any {
	return []any{r.tenant, r.id, r.name, r.image, r.state, r.reason, r.createdAt, r.lastUsedAt,
		r.idleTTL, r.maxLifetime, r.baseDir, r.env, r.memoryMB, r.cpus, r.pids, r.diskMB,
		r.network, r.labels, r.pid, r.user}
}

// updateArgs are r's values in the order of UpdateSession's statement:
// every column but the key, then the key.
func (r *record) updateArgs() []any {
	return []any{r.name, r.image, r.state, r.reason, r.createdAt, r.lastUsedAt,
		r.idleTTL, r.maxLifetime, r.baseDir, r.env, r.memoryMB, r.cpus, r.pids, r.diskMB,
		r.network, r.labels, r.pid, r.user, r.tenant, r.id}
}

// scanDest points at r's fields in sessionColumns order.
func (r *record) scanDest() []any {
	return []any{&r.tenant, &r.id, &r.name, &r.image, &r.state, &r.reason, &r.createdAt, &r.lastUsedAt,
		&r.idleTTL, &r.maxLifetime, &r.baseDir, &r.env, &r.memoryMB, &r.cpus, &r.pids, &r.diskMB,
		&r.network, &r.labels, &r.pid, &r.user}
}

// encode converts sess to its column encoding.
func encode(sess *session.Session) (*record, error) {
	createdAt, err := encodeTime(sess.CreatedAt)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "session %q: CreatedAt: %w", sess.ID, err)
	}
	lastUsedAt, err := encodeTime(sess.LastUsedAt)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "session %q: LastUsedAt: %w", sess.ID, err)
	}
	env, err := encodeMap(sess.Env)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "session %q: Env: %w", sess.ID, err)
	}
	labels, err := encodeMap(sess.Labels)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "session %q: Labels: %w", sess.ID, err)
	}
	return &record{
		tenant:      sess.Tenant,
		id:          sess.ID,
		name:        sess.Name,
		image:       sess.Image,
		state:       string(sess.State),
		reason:      sess.Reason,
		createdAt:   createdAt,
		lastUsedAt:  lastUsedAt,
		idleTTL:     int64(sess.IdleTTL),
		maxLifetime: int64(sess.MaxLifetime),
		baseDir:     sess.BaseDir,
		env:         env,
		memoryMB:    sess.Limits.MemoryMB,
		cpus:        sess.Limits.CPUs,
		pids:        sess.Limits.Pids,
		diskMB:      sess.Limits.DiskMB,
		network:     sess.Network,
		labels:      labels,
		pid:         int64(sess.Pid),
		user:        sess.User,
	}, nil
}

// decode converts a row back to a Session.
func (r *record) decode() (*session.Session, error) {
	env, err := decodeMap(r.env)
	if err != nil {
		return nil, fmt.Errorf("session %q in tenant %q: decode env: %w", r.id, r.tenant, err)
	}
	labels, err := decodeMap(r.labels)
	if err != nil {
		return nil, fmt.Errorf("session %q in tenant %q: decode labels: %w", r.id, r.tenant, err)
	}
	return &session.Session{
		ID:          r.id,
		Tenant:      r.tenant,
		Name:        r.name,
		Image:       r.image,
		State:       session.State(r.state),
		Reason:      r.reason,
		CreatedAt:   decodeTime(r.createdAt),
		LastUsedAt:  decodeTime(r.lastUsedAt),
		IdleTTL:     time.Duration(r.idleTTL),
		MaxLifetime: time.Duration(r.maxLifetime),
		BaseDir:     r.baseDir,
		Env:         env,
		Limits: session.Limits{
			MemoryMB: r.memoryMB,
			CPUs:     r.cpus,
			Pids:     r.pids,
			DiskMB:   r.diskMB,
		},
		Network: r.network,
		Labels:  labels,
		Pid:     int(r.pid),
		User:    r.user,
	}, nil
}

// The instants int64 Unix nanoseconds can hold: 1677-09-21 to 2262-04-11.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// encodeTime stores t as Unix nanoseconds, exact and independent of t's
// location and monotonic reading. The zero time, which predates minTime,
// is NULL.
func encodeTime(t time.Time) (sql.NullInt64, error) {
	if t.IsZero() {
		return sql.NullInt64{}, nil
	}
	if t.Before(minTime) || t.After(maxTime) {
		return sql.NullInt64{}, fmt.Errorf("time %s is outside %s to %s", t, minTime.UTC(), maxTime.UTC())
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}, nil
}

// decodeTime is the inverse of encodeTime, in UTC.
func decodeTime(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// encodeMap stores m as a JSON object, "{}" when m is nil or empty. It
// refuses strings that are not UTF-8, which JSON would silently alter.
func encodeMap(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "{}", nil
	}
	for k, v := range m {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return "", fmt.Errorf("key %q or its value is not valid UTF-8", k)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// decodeMap is the inverse of encodeMap, returning nil for an empty object
// so that nil and empty maps read back the same way.
func decodeMap(s string) (map[string]string, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}
