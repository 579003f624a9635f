// Package registry is what a fleet of warren nodes shares: which nodes are
// alive and what they can take, which node owns each session, how many
// sessions each tenant holds fleet-wide, a watch of all that for the
// routing cache, and an election for the fleet's one-at-a-time chores.
//
// The interface is the fleet's only contact with its coordination store.
// package etcdreg implements it on etcd; a Kubernetes (Leases and custom
// resources) or PostgreSQL (rows, advisory locks, LISTEN/NOTIFY) backend
// would implement the same methods, and registrytest is the conformance
// suite each implementation runs. Routing, placement and failure handling
// (package fleet) see only this interface.
//
// Errors are classified with errdefs: ErrConflict for a session id its
// tenant already holds anywhere in the fleet, ErrResourceExhausted for a
// tenant at its fleet-wide quota, ErrNotFound for a missing record, and
// ErrUnavailable whenever the store cannot answer (no quorum, no
// connection): every ErrUnavailable is safe to retry.
package registry

import (
	"context"
	"time"
)

// Node is a warren daemon's entry in the fleet. It lives only while its
// node is alive: a node that stops renewing it (dies, or is cut off from
// the store) disappears from Nodes after the node TTL.
type Node struct {
	// Name identifies the node in the fleet (immutable).
	Name string `json:"name"`
	// Addr is the base URL other nodes forward requests to, such as
	// http://10.0.0.7:7433.
	Addr string `json:"addr"`
	// Capacity is how many sessions the node holds at most, Free how many
	// more it would take now.
	Capacity int `json:"capacity"`
	Free     int `json:"free"`
	// Draining is set by Drain or DrainMove: placement skips the node.
	// Moving is set by DrainMove: the node moves its sessions to other
	// nodes. Neither is part of what the node writes; the registry fills
	// them in.
	Draining bool `json:"-"`
	Moving   bool `json:"-"`
	// Version is the node's warren version.
	Version string `json:"version,omitempty"`
	// Started is when the node's daemon started; a changed Started under
	// the same name is a restart.
	Started time.Time `json:"started"`
}

// The states of a session record.
const (
	// Live: the owner node holds the session (or is presumed to, while
	// its node entry is absent and the grace period runs).
	Live = "live"
	// Lost: the owner was gone for longer than the grace period; the
	// fleet gave the session's quota back and the owner kills the session
	// if it ever returns (fencing).
	Lost = "lost"
	// Moving: the owner node is moving the session to another node
	// (drain --move). It counts against the quota like Live; routers
	// answer unavailable (retry) for it, and a create that continues the
	// move (Session.MovedFrom) takes the record over.
	Moving = "moving"
)

// Session is the fleet's record of one session: who owns it. The session's
// own state stays with the owner node.
type Session struct {
	// Tenant and ID name the session, fleet-wide (immutable).
	Tenant string `json:"tenant"`
	ID     string `json:"id"`
	// Node owns the session (immutable: sessions do not move).
	Node string `json:"node"`
	// State is Live or Lost.
	State   string    `json:"state"`
	Created time.Time `json:"created"`
	// Lost is when the fleet declared the session lost (State Lost).
	LostAt time.Time `json:"lost_at,omitzero"`
	// MemoryMB and MilliCPUs are the session's limits, counted against
	// its tenant's fleet-wide quota while it is Live (or Moving).
	MemoryMB  int64 `json:"memory_mb,omitempty"`
	MilliCPUs int64 `json:"milli_cpus,omitempty"`
	// MovedFrom, in a CreateSession only (not stored), continues a move:
	// the record, Moving on that node, is taken over instead of refused.
	MovedFrom string `json:"-"`
}

// Held reports whether the record holds its tenant's quota: Live or
// Moving.
func (s Session) Held() bool { return s.State == Live || s.State == Moving }

// Quota bounds a tenant's Live sessions across the fleet; a zero field is
// no bound.
type Quota struct {
	MaxSessions  int
	MaxMemoryMB  int64
	MaxMilliCPUs int64
}

// Usage is what a tenant's Live sessions hold across the fleet.
type Usage struct {
	Sessions  int   `json:"sessions"`
	MemoryMB  int64 `json:"memory_mb,omitempty"`
	MilliCPUs int64 `json:"milli_cpus,omitempty"`
}

// Registry is the fleet's shared state. Implementations are safe for
// concurrent use.
type Registry interface {
	// Join registers the node and keeps its entry alive until the
	// membership is closed. It returns once the first registration
	// succeeded; after that a lost entry (the store unreachable longer
	// than the TTL) is registered again by the membership itself,
	// however long it takes.
	Join(ctx context.Context, n Node, ttl time.Duration) (Membership, error)
	// Nodes returns the live nodes, ordered by name.
	Nodes(ctx context.Context) ([]Node, error)
	// Drain marks a node draining (placement skips it) or, with false,
	// takes the mark off. The mark outlives the node's entry. A node
	// marked moving by DrainMove is only draining afterwards.
	Drain(ctx context.Context, node string, draining bool) error
	// DrainMove marks a node draining and moving: placement skips it and
	// the node itself moves its sessions to other nodes (fleet.Node's
	// mover). Drain(node, false) takes the mark off.
	DrainMove(ctx context.Context, node string) error

	// CreateSession records a new Live session of s.Node, and in the same
	// atomic step counts it (one session, its memory and CPUs) against its
	// tenant's fleet-wide usage, if that stays within q. Of concurrent
	// creates of one (tenant, id), or for a tenant's last slot, exactly
	// one succeeds. With s.MovedFrom set, a record Moving on that node is
	// taken over (it becomes s, Live on s.Node, its quota slot handed on:
	// only a growth of memory or CPUs is checked against q).
	CreateSession(ctx context.Context, s Session, q Quota) error
	// MarkMoving marks node's Live record of (tenant, id) Moving, or, with
	// false, Moving back to Live. A record of another node, or in another
	// state, is a conflict; a missing one not_found.
	MarkMoving(ctx context.Context, tenant, id, node string, moving bool) error
	// GetSession returns the record of (tenant, id).
	GetSession(ctx context.Context, tenant, id string) (Session, error)
	// DeleteSession removes the record of (tenant, id) owned by node and
	// gives back its quota if it was Live or Moving. A record of another node is a
	// conflict; a missing one is not an error.
	DeleteSession(ctx context.Context, tenant, id, node string) error
	// NodeSessions returns the records owned by node.
	NodeSessions(ctx context.Context, node string) ([]Session, error)
	// MarkLost marks node's Live (and Moving) sessions Lost and gives back their quota,
	// unless the node is alive again (then it does nothing and returns 0).
	// It returns how many it marked.
	MarkLost(ctx context.Context, node string) (int, error)
	// Usage returns how many Live sessions the tenant holds fleet-wide.
	Usage(ctx context.Context, tenant string) (int, error)
	// UsageOf returns all the tenant's Live sessions hold fleet-wide.
	UsageOf(ctx context.Context, tenant string) (Usage, error)

	// Snapshot returns every node and session record with the revision
	// they were read at; Watch continues from there.
	Snapshot(ctx context.Context) (Snapshot, error)
	// Watch sends every change after revision rev until ctx ends. The
	// channel closes when ctx ends or the watch broke (the revision was
	// compacted, or the store went away for long): the caller takes a new
	// Snapshot and watches again.
	Watch(ctx context.Context, rev int64) <-chan Event

	// Elect blocks until this caller (id) leads role, or ctx ends.
	Elect(ctx context.Context, role, id string) (Leadership, error)

	// PutObject writes an object. rev says what must be there: 0 that it
	// does not exist yet (ErrConflict otherwise), a positive revision that
	// it is unchanged since it was read at it (ErrConflict otherwise), -1
	// nothing. It returns the revision of the write.
	PutObject(ctx context.Context, o Object, rev int64) (int64, error)
	// GetObject returns the object kind/name with the revision it was
	// last written at (ErrNotFound if absent).
	GetObject(ctx context.Context, kind, name string) (Object, error)
	// DeleteObject removes an object; a missing one is not an error.
	DeleteObject(ctx context.Context, kind, name string) error

	// Secret returns the fleet's shared secret (32 random bytes), made by
	// the first node that asks: nodes sign the requests they forward to
	// each other with it.
	Secret(ctx context.Context) ([]byte, error)

	// Ping checks that the store answers, with its clock's offset from
	// ours where the store can tell (0 otherwise).
	Ping(ctx context.Context) (PingResult, error)
	// Close releases the connection.
	Close() error
}

// PingResult is what Ping learned.
type PingResult struct {
	// Endpoints answered out of Total.
	Endpoints, Total int
	// Leader is the store's leader's name, if it has one.
	Leader string
	// RTT is the round trip of the slowest answer.
	RTT time.Duration
}

// Membership is a node's registration.
type Membership interface {
	// Update rewrites the node's entry (its free capacity changed).
	Update(ctx context.Context, n Node) error
	// Registered reports whether the node's entry is known to be in the
	// store now. A node that is not registered takes no new sessions:
	// the fleet may already count it dead.
	Registered() bool
	// Close removes the node's entry and stops renewing it.
	Close() error
}

// Leadership is a won election.
type Leadership interface {
	// Done is closed when the leadership was lost (the store did not hear
	// from us in time) or resigned.
	Done() <-chan struct{}
	// Resign gives the leadership up.
	Resign(ctx context.Context) error
}

// Snapshot is the registry's content at one revision.
type Snapshot struct {
	Rev      int64
	Nodes    []Node // with Draining filled in
	Sessions []Session
	// Draining names the nodes marked draining, alive or not; Moving
	// those of them marked by DrainMove.
	Draining []string
	Moving   []string
	// Objects are every object (API keys, tenants' settings).
	Objects []Object
}

// Object is a small fleet-wide record the registry keeps for the nodes
// without interpreting it: an API key (kind "keys", named by its id) or a
// tenant's settings (kind "tenants"). Value is the caller's encoding.
type Object struct {
	Kind, Name string
	Value      []byte
	// Rev is the revision the object was last written at (filled in by
	// the registry; PutObject ignores it).
	Rev int64
}

// Event is one change. Exactly one of Node, Session, Object and Drain is
// set; Deleted says it went (only Name, Tenant and ID, or Kind and Name are
// then filled in; a deleted Drain is a drain mark taken off).
type Event struct {
	Rev     int64
	Node    *Node
	Session *Session
	Object  *Object
	// Drain names a node whose drain mark was set or taken off; Move
	// says the mark set is DrainMove's.
	Drain   string
	Move    bool
	Deleted bool
}
