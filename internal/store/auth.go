package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/errdefs"
)

var (
	_ auth.KeyStore    = (*SQLite)(nil)
	_ auth.TenantStore = (*SQLite)(nil)
)

// keyColumns are the api_keys table's columns in the order keyRecord's
// methods use.
const keyColumns = `id, tenant, name, admin, hash, created_at, expires_at, revoked_at`

// CreateKey stores a new API key with the SHA-256 of its secret. It fails
// with ErrConflict when the id exists, and with ErrInvalidArgument when
// the id or tenant is malformed, the hash is not 32 bytes long, or a time
// is outside the years 1678 to 2262 or points at the zero time.
func (s *SQLite) CreateKey(ctx context.Context, k *auth.Key, hash []byte) error {
	if k == nil {
		return errdefs.New(errdefs.ErrInvalidArgument, "nil API key")
	}
	if !auth.ValidKeyID(k.ID) || !auth.ValidTenant(k.Tenant) {
		return errdefs.New(errdefs.ErrInvalidArgument, "API key %q of tenant %q: malformed id or tenant", k.ID, k.Tenant)
	}
	if len(hash) != sha256.Size {
		return errdefs.New(errdefs.ErrInvalidArgument, "API key %q: hash of %d bytes, want %d", k.ID, len(hash), sha256.Size)
	}
	createdAt, err := encodeTime(k.CreatedAt)
	if err != nil {
		return errdefs.New(errdefs.ErrInvalidArgument, "API key %q: CreatedAt: %w", k.ID, err)
	}
	expiresAt, err := encodeTimePtr(k.ExpiresAt)
	if err != nil {
		return errdefs.New(errdefs.ErrInvalidArgument, "API key %q: ExpiresAt: %w", k.ID, err)
	}
	revokedAt, err := encodeTimePtr(k.RevokedAt)
	if err != nil {
		return errdefs.New(errdefs.ErrInvalidArgument, "API key %q: RevokedAt: %w", k.ID, err)
	}
	_, err = s.db.ExecContext(ctx,
		`INSERT INTO api_keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.Tenant, k.Name, k.Admin, hash, createdAt, expiresAt, revokedAt)
	if sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY {
		return errdefs.New(errdefs.ErrConflict, "API key %q already exists", k.ID)
	}
	if err != nil {
		return dbError(err, "create API key %q", k.ID)
	}
	return nil
}

// GetKey returns the API key id and its hash, or ErrNotFound.
func (s *SQLite) GetKey(ctx context.Context, id string) (*auth.Key, []byte, error) {
	var r keyRecord
	err := s.db.QueryRowContext(ctx,
		`SELECT `+keyColumns+` FROM api_keys WHERE id = ?`, id).Scan(r.scanDest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, errdefs.New(errdefs.ErrNotFound, "API key %q not found", id)
	}
	if err != nil {
		return nil, nil, dbError(err, "get API key %q", id)
	}
	return r.decode(), r.hash, nil
}

// ListKeys returns the tenant's API keys, or every tenant's for tenant "",
// ordered by creation time then id.
func (s *SQLite) ListKeys(ctx context.Context, tenant string) ([]*auth.Key, error) {
	query := `SELECT ` + keyColumns + ` FROM api_keys ORDER BY created_at, id`
	var args []any
	if tenant != "" {
		query = `SELECT ` + keyColumns + ` FROM api_keys WHERE tenant = ? ORDER BY created_at, id`
		args = append(args, tenant)
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, dbError(err, "list API keys of tenant %q", tenant)
	}
	defer rows.Close()
	var out []*auth.Key
	for rows.Next() {
		var r keyRecord
		if err := rows.Scan(r.scanDest()...); err != nil {
			return nil, dbError(err, "list API keys of tenant %q", tenant)
		}
		out = append(out, r.decode())
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(err, "list API keys of tenant %q", tenant)
	}
	return out, nil
}

// RevokeKey marks the API key id revoked at at, or fails with ErrNotFound.
// A key already revoked keeps its first revocation time.
func (s *SQLite) RevokeKey(ctx context.Context, id string, at time.Time) error {
	if at.IsZero() {
		return errdefs.New(errdefs.ErrInvalidArgument, "revoke API key %q: zero time", id)
	}
	revokedAt, err := encodeTime(at)
	if err != nil {
		return errdefs.New(errdefs.ErrInvalidArgument, "revoke API key %q: %w", id, err)
	}
	res, err := s.db.ExecContext(ctx,
		`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, revokedAt, id)
	if err != nil {
		return dbError(err, "revoke API key %q", id)
	}
	return rowsOrNotFound(res, "API key", id)
}

// CountKeys returns how many API keys exist, revoked and expired included.
func (s *SQLite) CountKeys(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM api_keys`).Scan(&n); err != nil {
		return 0, dbError(err, "count API keys")
	}
	return n, nil
}

// keyRecord is an auth.Key and its hash in their column encoding.
type keyRecord struct {
	id, tenant, name                string
	admin                           bool
	hash                            []byte
	createdAt, expiresAt, revokedAt sql.NullInt64 // Unix ns
}

// scanDest points at r's fields in keyColumns order.
func (r *keyRecord) scanDest() []any {
	return []any{&r.id, &r.tenant, &r.name, &r.admin, &r.hash, &r.createdAt, &r.expiresAt, &r.revokedAt}
}

func (r *keyRecord) decode() *auth.Key {
	return &auth.Key{
		ID:        r.id,
		Tenant:    r.tenant,
		Name:      r.name,
		Admin:     r.admin,
		CreatedAt: decodeTime(r.createdAt),
		ExpiresAt: decodeTimePtr(r.expiresAt),
		RevokedAt: decodeTimePtr(r.revokedAt),
	}
}

// encodeTimePtr stores nil as NULL. A pointer to the zero time would read
// back as nil, so it is refused.
func encodeTimePtr(t *time.Time) (sql.NullInt64, error) {
	if t == nil {
		return sql.NullInt64{}, nil
	}
	if t.IsZero() {
		return sql.NullInt64{}, errors.New("points at the zero time; use nil")
	}
	return encodeTime(*t)
}

// decodeTimePtr is the inverse of encodeTimePtr, in UTC.
func decodeTimePtr(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := decodeTime(n)
	return &t
}

// rowsOrNotFound turns a statement that touched no row into ErrNotFound
// for the thing (what) named id.
func rowsOrNotFound(res sql.Result, what, id string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return dbError(err, "%s %q: rows affected", what, id)
	}
	if n == 0 {
		return errdefs.New(errdefs.ErrNotFound, "%s %q not found", what, id)
	}
	return nil
}

// GetTenant returns the named tenant's settings, or ErrNotFound.
func (s *SQLite) GetTenant(ctx context.Context, name string) (*auth.Tenant, error) {
	var r tenantRecord
	err := s.db.QueryRowContext(ctx,
		`SELECT name, quota, policy, updated_at FROM tenants WHERE name = ?`, name).Scan(r.scanDest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errdefs.New(errdefs.ErrNotFound, "tenant %q not found", name)
	}
	if err != nil {
		return nil, dbError(err, "get tenant %q", name)
	}
	return r.decode()
}

// PutTenant creates or replaces t's settings, UpdatedAt included as given.
// It fails with ErrInvalidArgument when t fails Validate or UpdatedAt is
// outside the years 1678 to 2262.
func (s *SQLite) PutTenant(ctx context.Context, t *auth.Tenant) error {
	if err := t.Validate(); err != nil {
		return err
	}
	r, err := encodeTenant(t)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx,
		`INSERT INTO tenants (name, quota, policy, updated_at) VALUES (?, ?, ?, ?)
		 ON CONFLICT (name) DO UPDATE SET
		   quota = excluded.quota, policy = excluded.policy, updated_at = excluded.updated_at`,
		r.name, r.quota, r.policy, r.updatedAt)
	if err != nil {
		return dbError(err, "put tenant %q", t.Name)
	}
	return nil
}

// ListTenants returns every tenant's settings, ordered by name.
func (s *SQLite) ListTenants(ctx context.Context) ([]*auth.Tenant, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, quota, policy, updated_at FROM tenants ORDER BY name`)
	if err != nil {
		return nil, dbError(err, "list tenants")
	}
	defer rows.Close()
	var out []*auth.Tenant
	for rows.Next() {
		var r tenantRecord
		if err := rows.Scan(r.scanDest()...); err != nil {
			return nil, dbError(err, "list tenants")
		}
		t, err := r.decode()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(err, "list tenants")
	}
	return out, nil
}

// DeleteTenant removes the named tenant's settings, or fails with
// ErrNotFound. Its API keys stay.
func (s *SQLite) DeleteTenant(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM tenants WHERE name = ?`, name)
	if err != nil {
		return dbError(err, "delete tenant %q", name)
	}
	return rowsOrNotFound(res, "tenant", name)
}

// tenantRecord is an auth.Tenant in its column encoding.
type tenantRecord struct {
	name          string
	quota, policy string // JSON objects: quotaJSON, policyJSON
	updatedAt     sql.NullInt64
}

func (r *tenantRecord) scanDest() []any {
	return []any{&r.name, &r.quota, &r.policy, &r.updatedAt}
}

// quotaJSON is the stored form of auth.Quota. It is the store's own, so
// that renaming auth's fields cannot change what is on disk. Durations are
// nanoseconds; zero fields are left out, so an all-zero quota is "{}".
type quotaJSON struct {
	MaxSessions    int     `json:"max_sessions,omitempty"`
	MaxMemoryMB    int64   `json:"max_memory_mb,omitempty"`
	MaxCPUs        float64 `json:"max_cpus,omitempty"`
	MaxLifetime    int64   `json:"max_lifetime_ns,omitempty"`
	MaxExecTimeout int64   `json:"max_exec_timeout_ns,omitempty"`
	MaxWorkspaces  int     `json:"max_workspaces,omitempty"`
	MaxSnapshots   int     `json:"max_snapshots,omitempty"`
}

// policyJSON is the stored form of auth.Policy. Empty lists are left out
// and read back as nil.
type policyJSON struct {
	Allow       []string `json:"allow,omitempty"`
	Deny        []string `json:"deny,omitempty"`
	PublicPorts *bool    `json:"public_ports,omitempty"`
	// The network ceiling.
	NetworkMaxMode string   `json:"network_max_mode,omitempty"`
	NetworkAllow   []string `json:"network_allow,omitempty"`
}

// encodeTenant converts a validated t to its column encoding.
func encodeTenant(t *auth.Tenant) (*tenantRecord, error) {
	updatedAt, err := encodeTime(t.UpdatedAt)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "tenant %q: UpdatedAt: %w", t.Name, err)
	}
	quota, err := json.Marshal(quotaJSON{
		MaxSessions:    t.Quota.MaxSessions,
		MaxMemoryMB:    t.Quota.MaxMemoryMB,
		MaxCPUs:        t.Quota.MaxCPUs,
		MaxLifetime:    int64(t.Quota.MaxLifetime),
		MaxExecTimeout: int64(t.Quota.MaxExecTimeout),
		MaxWorkspaces:  t.Quota.MaxWorkspaces,
		MaxSnapshots:   t.Quota.MaxSnapshots,
	})
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "tenant %q: quota: %w", t.Name, err)
	}
	policy, err := json.Marshal(policyJSON{Allow: t.Policy.Allow, Deny: t.Policy.Deny, PublicPorts: t.Policy.PublicPorts,
		NetworkMaxMode: t.Policy.NetworkMaxMode, NetworkAllow: t.Policy.NetworkAllow})
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "tenant %q: policy: %w", t.Name, err)
	}
	return &tenantRecord{name: t.Name, quota: string(quota), policy: string(policy), updatedAt: updatedAt}, nil
}

func (r *tenantRecord) decode() (*auth.Tenant, error) {
	var q quotaJSON
	if err := json.Unmarshal([]byte(r.quota), &q); err != nil {
		return nil, fmt.Errorf("tenant %q: decode quota: %w", r.name, err)
	}
	var p policyJSON
	if err := json.Unmarshal([]byte(r.policy), &p); err != nil {
		return nil, fmt.Errorf("tenant %q: decode policy: %w", r.name, err)
	}
	return &auth.Tenant{
		Name: r.name,
		Quota: auth.Quota{
			MaxSessions:    q.MaxSessions,
			MaxMemoryMB:    q.MaxMemoryMB,
			MaxCPUs:        q.MaxCPUs,
			MaxLifetime:    time.Duration(q.MaxLifetime),
			MaxExecTimeout: time.Duration(q.MaxExecTimeout),
			MaxWorkspaces:  q.MaxWorkspaces,
			MaxSnapshots:   q.MaxSnapshots,
		},
		Policy:    auth.Policy{Allow: p.Allow, Deny: p.Deny, PublicPorts: p.PublicPorts, NetworkMaxMode: p.NetworkMaxMode, NetworkAllow: p.NetworkAllow},
		UpdatedAt: decodeTime(r.updatedAt),
	}, nil
}
