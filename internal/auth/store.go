package auth

import (
	"context"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/network/rules"
)

// KeyStore keeps API keys: their public record and the SHA-256 of their
// secret, never the secret. Implementations: store.SQLite.
//
// Errors are classified with errdefs: ErrConflict when creating an id that
// exists, ErrNotFound for a missing id.
type KeyStore interface {
	// CreateKey stores a new key with the SHA-256 of its secret.
	CreateKey(ctx context.Context, k *Key, hash []byte) error
	// GetKey returns the key id and the hash stored with it.
	GetKey(ctx context.Context, id string) (*Key, []byte, error)
	// ListKeys returns the tenant's keys, or every tenant's for tenant "",
	// ordered by creation time then id. Revoked and expired keys are
	// included.
	ListKeys(ctx context.Context, tenant string) ([]*Key, error)
	// RevokeKey marks the key revoked at the given time. Revoking a revoked
	// key keeps its first revocation time.
	RevokeKey(ctx context.Context, id string, at time.Time) error
	// CountKeys returns how many keys exist, revoked and expired included.
	CountKeys(ctx context.Context) (int, error)
}

// Tenant is one tenant's settings. A tenant needs no record to exist: one
// without a record, or a zero field in its record, gets the daemon's
// defaults. Deleting a tenant's record deletes only its settings, not its
// keys or sessions.
type Tenant struct {
	// Name is the tenant's name, a ValidTenant (immutable).
	Name      string
	Quota     Quota
	Policy    Policy
	UpdatedAt time.Time
}

// Quota bounds what one tenant may use. A zero field means the daemon's
// default; fields are never negative.
type Quota struct {
	// MaxSessions is how many sessions the tenant may have at once.
	MaxSessions int
	// MaxMemoryMB and MaxCPUs cap the sum of the limits of the tenant's
	// sessions.
	MaxMemoryMB int64
	MaxCPUs     float64
	// MaxLifetime caps a session's lifetime.
	MaxLifetime time.Duration
	// MaxExecTimeout caps one command's timeout.
	MaxExecTimeout time.Duration
	// MaxWorkspaces and MaxSnapshots cap how many workspaces and snapshots
	// the tenant keeps: each is size-limited on its own, the count bounds
	// the disk one tenant can hold.
	MaxWorkspaces, MaxSnapshots int
}

// Policy says which programs a tenant's sessions may run, by base name
// (argv[0] without its directory). Deny wins over Allow; an empty Allow
// allows every program Deny does not name.
type Policy struct {
	Allow, Deny []string
	// PublicPorts lets the tenant's sessions serve ports without
	// authentication; nil leaves the daemon's default
	// (tenant_defaults.allow_public_ports).
	PublicPorts *bool
	// NetworkMaxMode and NetworkAllow hold the tenant's sessions to a
	// network ceiling (rules.Ceiling): the widest mode ("" : open) and,
	// when not empty, the maximum allow-list.
	NetworkMaxMode string
	NetworkAllow   []string
}

// Allows reports whether the policy lets program run. program is a base
// name, as in Allow and Deny.
func (p Policy) Allows(program string) bool {
	for _, d := range p.Deny {
		if d == program {
			return false
		}
	}
	if len(p.Allow) == 0 {
		return true
	}
	for _, a := range p.Allow {
		if a == program {
			return true
		}
	}
	return false
}

// Validate checks t can be stored: a valid name, no negative or infinite
// quota, and policy entries that are program base names.
func (t *Tenant) Validate() error {
	if t == nil {
		return errdefs.New(errdefs.ErrInvalidArgument, "nil tenant")
	}
	if !ValidTenant(t.Name) {
		return errdefs.New(errdefs.ErrInvalidArgument, "tenant name %q: %s", t.Name, tenantRule)
	}
	q := t.Quota
	if q.MaxSessions < 0 || q.MaxMemoryMB < 0 || q.MaxLifetime < 0 || q.MaxExecTimeout < 0 || q.MaxWorkspaces < 0 || q.MaxSnapshots < 0 ||
		q.MaxCPUs < 0 || math.IsNaN(q.MaxCPUs) || math.IsInf(q.MaxCPUs, 0) {
		return errdefs.New(errdefs.ErrInvalidArgument, "tenant %q: quota fields must be finite and not negative", t.Name)
	}
	if _, err := rules.ParseCeiling(t.Policy.NetworkMaxMode, t.Policy.NetworkAllow); err != nil {
		return errdefs.New(errdefs.ErrInvalidArgument, "tenant %q: policy.network: %s", t.Name, err)
	}
	for _, list := range [][]string{t.Policy.Allow, t.Policy.Deny} {
		for _, p := range list {
			if !validProgram(p) {
				return errdefs.New(errdefs.ErrInvalidArgument,
					"tenant %q: policy entry %q is not a program name (UTF-8, non-empty, no '/' or NUL, not . or ..)", t.Name, p)
			}
		}
	}
	return nil
}

func validProgram(p string) bool {
	return p != "" && p != "." && p != ".." && len(p) <= 255 && utf8.ValidString(p) && !strings.ContainsAny(p, "/\x00")
}

// TenantStore keeps tenants' settings. Implementations: store.SQLite.
//
// Errors are classified with errdefs: ErrNotFound for a missing tenant,
// ErrInvalidArgument for a tenant that fails Validate.
type TenantStore interface {
	// GetTenant returns the named tenant's record.
	GetTenant(ctx context.Context, name string) (*Tenant, error)
	// PutTenant creates or replaces t's record.
	PutTenant(ctx context.Context, t *Tenant) error
	// ListTenants returns every tenant record, ordered by name.
	ListTenants(ctx context.Context) ([]*Tenant, error)
	// DeleteTenant removes the named tenant's record.
	DeleteTenant(ctx context.Context, name string) error
}
