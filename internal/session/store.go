package session

import (
	"context"
	"time"
)

// State is a session's place in its lifecycle.
type State string

// The states. Every state can be deleted.
const (
	StateCreating State = "creating"
	StateRunning  State = "running"
	StateDeleting State = "deleting"
	StateFailed   State = "failed"
	// StateLost: the fleet declared the session lost with its node (dead
	// past its grace). Only fleet-wide lists show it; no node holds it.
	StateLost State = "lost"
)

// Limits are a session's resource limits after defaults were applied.
type Limits struct {
	MemoryMB int64
	CPUs     float64
	Pids     int64
	DiskMB   int64
}

// Session is a session's durable record.
type Session struct {
	// ID is the client-visible id, unique within its tenant (immutable).
	ID string
	// Tenant owns the session (immutable).
	Tenant string
	// Name is the sandbox's unique name on this host: its state directory
	// and cgroup (immutable).
	Name       string
	Image      string
	State      State
	Reason     string // why the session failed
	CreatedAt  time.Time
	LastUsedAt time.Time
	// IdleTTL deletes the session after this long without use.
	IdleTTL time.Duration
	// MaxLifetime deletes the session this long after creation.
	MaxLifetime time.Duration
	// BaseDir is the cwd at creation; relative file paths resolve there.
	BaseDir string
	Env     map[string]string
	Limits  Limits
	Network string
	Labels  map[string]string
	// Pid is the host pid of the sandbox's PID 1 while it runs.
	Pid int
	// User is who the session's processes run as ("" is root).
	User string
}

// ExpiresAt is when the session is due for deletion.
func (s *Session) ExpiresAt() time.Time {
	idle := s.LastUsedAt.Add(s.IdleTTL)
	if s.MaxLifetime > 0 {
		if end := s.CreatedAt.Add(s.MaxLifetime); end.Before(idle) {
			return end
		}
	}
	return idle
}

// Store keeps session records. Implementations: store.SQLite. Every
// implementation runs the conformance suite in session/storetest.
//
// Errors are classified with errdefs: ErrConflict when creating a (tenant,
// id) that exists, ErrNotFound for a missing one.
type Store interface {
	CreateSession(ctx context.Context, s *Session) error
	GetSession(ctx context.Context, tenant, id string) (*Session, error)
	// ListSessions returns the tenant's sessions ordered by creation time
	// then id; tenant "" lists every tenant's.
	ListSessions(ctx context.Context, tenant string) ([]*Session, error)
	// UpdateSession replaces the record of (s.Tenant, s.ID).
	UpdateSession(ctx context.Context, s *Session) error
	DeleteSession(ctx context.Context, tenant, id string) error
	Close() error
}
