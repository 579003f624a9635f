// Package fleet makes a warren daemon one node of a fleet: it registers the
// node and its free capacity in the registry (package registry), records
// every session the node creates there before the sandbox starts (a
// session id is unique per tenant across the fleet, and the tenant's
// fleet-wide session quota is counted in the same step), keeps a
// watch-fed cache of nodes and sessions for routing, marks the sessions of
// a node gone for longer than the grace period lost (one elected node does
// it), fences this node's sessions the fleet declared lost when it
// returns, and moves its sessions to other nodes while it is marked so
// (drain --move: mover.go). docs/FLEET.md has the design.
//
// The package sees the registry only through its interface, and the node's
// own sessions only through session.Store and a delete function (the
// mover: through Local, the session manager's calls), so it works the
// same on any registry backend and needs no runtime.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/fleet/registry"
	"github.com/warrenhq/warren/internal/session"
)

// Config is one node's part in the fleet.
type Config struct {
	Registry registry.Registry
	// Name is the node's name (unique in the fleet), Addr the base URL
	// other nodes forward to.
	Name, Addr string
	// Capacity is how many sessions the node holds at most.
	Capacity int
	// TTL is the node's lease: how long after its last renewal the fleet
	// counts the node dead.
	TTL time.Duration
	// Grace is how long after a node's lease expired its sessions are
	// declared lost (their quota back, the node fenced if it returns).
	Grace time.Duration
	// Version is warren's version, shown in the node list.
	Version string
	// Count returns how many sessions the node holds now.
	Count func() int
	// Quota returns a tenant's fleet-wide quota (sessions, memory, CPUs;
	// zero fields: none).
	Quota func(ctx context.Context, tenant string) (registry.Quota, error)
	Log   *slog.Logger
}

// Node is this daemon's membership in the fleet.
type Node struct {
	cfg     Config
	reg     registry.Registry
	log     *slog.Logger
	member  registry.Membership
	cache   *Cache
	started time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// secret is the fleet's secret once fetched (forwarded requests are
	// signed with it).
	secret atomic.Pointer[[]byte]
	// reconciled is set once Reconcile compared the node's sessions with
	// the registry; creates wait for it, so that a session created during
	// the comparison is not mistaken for one the fleet gave away.
	reconciled atomic.Bool

	mu sync.Mutex
	// orphans are records whose local session is gone but whose removal
	// from the registry failed; the janitor retries. Guarded by mu.
	orphans map[sessionKey]bool
	// fencing are the sessions Reconcile is deleting because the fleet
	// gave them away: their records (Lost, or another node's) stay.
	// Guarded by mu.
	fencing map[sessionKey]bool
	// moving are the sessions the mover is deleting here to create them
	// on another node: their records (Moving) stay, for the create there
	// to take over. Guarded by mu.
	moving map[sessionKey]bool
	kick   chan struct{} // the free capacity changed
}

type sessionKey struct{ tenant, id string }

// Join registers the node and starts its background work: renewing its
// entry and free capacity, the routing cache's watch, the election for
// marking dead nodes' sessions lost, and the retry of registry removals
// that failed. It does not wait for the registry to answer: a node whose
// registry is down starts, serves what it has and joins once it is back.
func Join(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.TTL <= 0 || cfg.Grace < 0 {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "fleet: the node TTL must be positive and the grace not negative")
	}
	n := &Node{cfg: cfg, reg: cfg.Registry, log: cfg.Log.With("fleet_node", cfg.Name), started: time.Now().UTC(),
		orphans: map[sessionKey]bool{}, fencing: map[sessionKey]bool{}, moving: map[sessionKey]bool{}, kick: make(chan struct{}, 1)}
	n.ctx, n.cancel = context.WithCancel(context.WithoutCancel(ctx))
	m, err := n.reg.Join(n.ctx, n.entry(), cfg.TTL)
	if err != nil {
		n.cancel()
		return nil, err
	}
	n.member = m
	n.cache = newCache(n.reg, n.log)
	n.wg.Go(func() { n.cache.run(n.ctx) })
	n.wg.Go(n.refresh)
	n.wg.Go(n.reap)
	n.wg.Go(n.fetchSecret)
	return n, nil
}

// entry is the node's registry entry now.
func (n *Node) entry() registry.Node {
	used := 0
	if n.cfg.Count != nil {
		used = n.cfg.Count()
	}
	return registry.Node{Name: n.cfg.Name, Addr: n.cfg.Addr, Capacity: n.cfg.Capacity, Free: max(n.cfg.Capacity-used, 0),
		Version: n.cfg.Version, Started: n.started}
}

// fetchSecret gets the fleet's secret, retrying until the registry
// answers.
func (n *Node) fetchSecret() {
	for n.ctx.Err() == nil {
		s, err := n.reg.Secret(n.ctx)
		if err == nil {
			n.secret.Store(&s)
			return
		}
		select {
		case <-n.ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Secret is the fleet's secret, nil until the registry gave it.
func (n *Node) Secret() []byte {
	if s := n.secret.Load(); s != nil {
		return *s
	}
	return nil
}

// placeChoices is the K of best-of-K placement: two random candidates,
// the freer wins. Two choices spread load nearly as well as asking every
// node, and many forwarding nodes with slightly stale capacities do not all
// pick the same target.
const placeChoices = 2

// Place picks the node a new session should go to: of placeChoices random
// live, non-draining nodes with free capacity, leaving out the nodes in
// exclude (they refused this create already), the one with the most. false
// when the cache knows no such node (the caller then creates here, and this
// node's own checks answer).
func (n *Node) Place(exclude ...string) (registry.Node, bool) {
	var cands []registry.Node
	for _, nd := range n.cache.Nodes() {
		if !nd.Draining && nd.Free > 0 && !slices.Contains(exclude, nd.Name) {
			cands = append(cands, nd)
		}
	}
	if len(cands) == 0 {
		return registry.Node{}, false
	}
	best := cands[rand.IntN(len(cands))]
	for range placeChoices - 1 {
		if c := cands[rand.IntN(len(cands))]; c.Free > best.Free {
			best = c
		}
	}
	return best, true
}

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// MilliCPUs is cpus in thousandths, as the registry counts them (sums of
// floats would drift).
func MilliCPUs(cpus float64) int64 { return int64(math.Round(cpus * 1000)) }

// Context ends when the node leaves the fleet.
func (n *Node) Context() context.Context { return n.ctx }

// Registered reports whether the node's entry is in the registry now.
func (n *Node) Registered() bool { return n.member.Registered() }

// Cache is the node's routing cache.
func (n *Node) Cache() *Cache { return n.cache }

// Registry is the registry the node uses.
func (n *Node) Registry() registry.Registry { return n.reg }

// Changed tells the node its free capacity changed; the entry is
// rewritten soon (also every TTL/3 regardless).
func (n *Node) Changed() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// refresh rewrites the node's entry when its capacity changed (at most
// every 200 ms) and retries registry removals that failed.
func (n *Node) refresh() {
	tick := time.NewTicker(max(n.cfg.TTL/3, 200*time.Millisecond))
	defer tick.Stop()
	last := n.entry()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.kick:
			time.Sleep(200 * time.Millisecond) // coalesce a burst of creates
		case <-tick.C:
			n.retryOrphans()
		}
		// A failed update is tried again at the next tick: last moves
		// only once the registry has the entry.
		if e := n.entry(); e != last && n.member.Update(n.ctx, e) == nil {
			last = e
		}
	}
}

// Close leaves the fleet: the node's entry goes at once (its sessions'
// records stay, for the next start to re-adopt).
func (n *Node) Close() error {
	n.cancel()
	n.wg.Wait()
	return n.member.Close()
}

// Store wraps the node's own session store: a create is recorded in the
// registry first (refused while the node is not registered or is
// draining, or when the id is taken anywhere in the fleet, or the tenant
// is at its fleet-wide quota), a delete removes the record after the local
// one. Everything else is the local store's.
func (n *Node) Store(local session.Store) session.Store {
	return &store{Store: local, n: n}
}

type store struct {
	session.Store
	n *Node
}

func (s *store) CreateSession(ctx context.Context, rec *session.Session) error {
	n := s.n
	if !n.reconciled.Load() {
		return session.NodeRefused(ctx, errdefs.WithRetryAfter(errdefs.ErrUnavailable, time.Second, "this node has not yet compared its sessions with the fleet's registry; it takes new sessions once it has"))
	}
	if !n.member.Registered() {
		return session.NodeRefused(ctx, errdefs.WithRetryAfter(errdefs.ErrUnavailable, time.Second, "this node is not registered in the fleet (its registry is unreachable); it takes no new sessions until it is"))
	}
	if n.cache.Draining(n.cfg.Name) && ctx.Value(moveBackKey{}) == nil { // the mover's re-create of a session it could not move
		return session.NodeRefused(ctx, errdefs.WithRetryAfter(errdefs.ErrUnavailable, time.Second, "this node is draining; it takes no new sessions"))
	}
	var q registry.Quota
	if n.cfg.Quota != nil {
		var err error
		if q, err = n.cfg.Quota(ctx, rec.Tenant); err != nil {
			return err
		}
	}
	if err := n.reg.CreateSession(ctx, registry.Session{Tenant: rec.Tenant, ID: rec.ID, Node: n.cfg.Name, Created: rec.CreatedAt,
		MemoryMB: rec.Limits.MemoryMB, MilliCPUs: MilliCPUs(rec.Limits.CPUs), MovedFrom: n.movedFrom(ctx)}, q); err != nil {
		return err
	}
	if err := s.Store.CreateSession(ctx, rec); err != nil {
		n.forget(context.WithoutCancel(ctx), rec.Tenant, rec.ID)
		return err
	}
	n.Changed()
	return nil
}

func (s *store) DeleteSession(ctx context.Context, tenant, id string) error {
	if err := s.Store.DeleteSession(ctx, tenant, id); err != nil {
		return err
	}
	s.n.mu.Lock()
	fenced := s.n.fencing[sessionKey{tenant, id}] || s.n.moving[sessionKey{tenant, id}]
	s.n.mu.Unlock()
	if !fenced {
		s.n.forget(context.WithoutCancel(ctx), tenant, id)
	}
	s.n.Changed()
	return nil
}

// forget removes a session's record; if the registry cannot answer now,
// the janitor retries until it can (the tenant's quota comes back then).
func (n *Node) forget(ctx context.Context, tenant, id string) {
	err := n.reg.DeleteSession(ctx, tenant, id, n.cfg.Name)
	if err == nil || errdefs.Is(err, errdefs.ErrConflict) {
		return
	}
	n.log.Warn("could not remove a session's fleet record; retrying in the background", "tenant", tenant, "session_id", id, "error", err)
	n.mu.Lock()
	n.orphans[sessionKey{tenant, id}] = true
	n.mu.Unlock()
}

func (n *Node) retryOrphans() {
	n.mu.Lock()
	keys := make([]sessionKey, 0, len(n.orphans))
	for k := range n.orphans {
		keys = append(keys, k)
	}
	n.mu.Unlock()
	for _, k := range keys {
		err := n.reg.DeleteSession(n.ctx, k.tenant, k.id, n.cfg.Name)
		if err != nil && !errdefs.Is(err, errdefs.ErrConflict) {
			return // still unreachable; next tick
		}
		n.mu.Lock()
		delete(n.orphans, k)
		n.mu.Unlock()
	}
}

// Pending is how many registry removals wait for the registry.
func (n *Node) Pending() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.orphans)
}

// Reconcile compares the node's own sessions with the registry's records
// of them, once the registry answers: a local session whose record is
// Lost, missing or another node's is deleted (the fleet gave its id and
// quota away: fencing), and a Live record of this node with no local
// session is removed. kill deletes a local session. It retries until the
// registry answers or ctx ends.
func (n *Node) Reconcile(ctx context.Context, local session.Store, kill func(ctx context.Context, tenant, id string) error) error {
	for {
		err := n.reconcile(ctx, local, kill)
		if err == nil {
			if !n.reconciled.Swap(true) {
				n.wg.Go(func() { n.fenceLoop(local, kill) })
			}
			return nil
		}
		if !errdefs.Is(err, errdefs.ErrUnavailable) {
			return err
		}
		n.log.Warn("fleet registry unavailable; reconciling sessions once it answers", "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (n *Node) reconcile(ctx context.Context, local session.Store, kill func(ctx context.Context, tenant, id string) error) error {
	records, err := n.reg.NodeSessions(ctx, n.cfg.Name)
	if err != nil {
		return err
	}
	mine := map[sessionKey]registry.Session{}
	for _, r := range records {
		mine[sessionKey{r.Tenant, r.ID}] = r
	}
	sessions, err := local.ListSessions(ctx, "")
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range sessions {
		k := sessionKey{s.Tenant, s.ID}
		r, ok := mine[k]
		delete(mine, k)
		if ok && r.State == registry.Moving {
			// A move cut short by a restart: the session stays here.
			if err := n.reg.MarkMoving(ctx, s.Tenant, s.ID, n.cfg.Name, false); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if ok && r.State == registry.Live {
			continue
		}
		why := "the fleet has no record of it"
		if ok {
			why = "the fleet declared it lost at " + r.LostAt.Format(time.RFC3339)
		}
		n.log.Warn("deleting a session the fleet gave away (fencing)", "tenant", s.Tenant, "session_id", s.ID, "reason", why)
		n.mu.Lock()
		n.fencing[k] = true
		n.mu.Unlock()
		err := kill(ctx, s.Tenant, s.ID)
		n.mu.Lock()
		delete(n.fencing, k)
		n.mu.Unlock()
		if err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			errs = append(errs, fmt.Errorf("fence session %s/%s: %w", s.Tenant, s.ID, err))
		}
	}
	for k, r := range mine {
		if !r.Held() {
			continue // a lost record stays for clients to be told
		}
		n.log.Info("removing the fleet record of a session this node no longer has", "tenant", k.tenant, "session_id", k.id)
		if err := n.reg.DeleteSession(ctx, k.tenant, k.id, n.cfg.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fenceLoop keeps fencing while the node runs: a node that was cut off
// from the registry for longer than the grace, and is back without a
// restart, finds its sessions' records Lost in its cache (reloaded on
// return) and deletes those sessions, as Reconcile does at start. A local
// session the cache has no record of yet is left alone: it may be a create
// whose record the watch has not brought yet.
func (n *Node) fenceLoop(local session.Store, kill func(ctx context.Context, tenant, id string) error) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
		}
		if !n.member.Registered() {
			continue // the cache may be stale; wait until we see the registry
		}
		sessions, err := local.ListSessions(n.ctx, "")
		if err != nil {
			continue
		}
		for _, s := range sessions {
			r, ok := n.cache.Lookup(s.Tenant, s.ID)
			if !ok || (r.Session.Held() && r.Session.Node == n.cfg.Name) {
				continue
			}
			k := sessionKey{s.Tenant, s.ID}
			n.log.Warn("deleting a session the fleet gave away while this node was cut off (fencing)", "tenant", s.Tenant, "session_id", s.ID,
				"state", r.Session.State, "owner", r.Session.Node)
			n.mu.Lock()
			n.fencing[k] = true
			n.mu.Unlock()
			if err := kill(n.ctx, s.Tenant, s.ID); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
				n.log.Error("fence a session", "tenant", s.Tenant, "session_id", s.ID, "error", err)
			}
			n.mu.Lock()
			delete(n.fencing, k)
			n.mu.Unlock()
		}
	}
}

// reap campaigns for the reaper role and, while it leads, marks the
// sessions of nodes absent for longer than the grace period lost.
func (n *Node) reap() {
	for n.ctx.Err() == nil {
		lead, err := n.reg.Elect(n.ctx, "reaper", n.cfg.Name)
		if err != nil {
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		n.log.Info("this node marks dead nodes' sessions lost now (reaper)")
		n.reapWhileLeading(lead)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(n.ctx), time.Second)
		_ = lead.Resign(rctx) // a resignation that fails ends with the lease's TTL
		cancel()
	}
}

func (n *Node) reapWhileLeading(lead registry.Leadership) {
	// absent: since when each owner of sessions was seen without an
	// entry. A new leader starts counting afresh, so the grace is at
	// least the configured one, at most twice it across a change of
	// leader.
	absent := map[string]time.Time{}
	tick := time.NewTicker(max(min(n.cfg.Grace/4, time.Second), 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-lead.Done():
			return
		case <-tick.C:
		}
		snap, err := n.reg.Snapshot(n.ctx)
		if err != nil {
			continue
		}
		live := map[string]bool{}
		for _, nd := range snap.Nodes {
			live[nd.Name] = true
		}
		owners := map[string]bool{}
		for _, s := range snap.Sessions {
			if s.Held() && !live[s.Node] {
				owners[s.Node] = true
			}
		}
		now := time.Now()
		for o := range absent {
			if !owners[o] {
				delete(absent, o)
			}
		}
		for o := range owners {
			since, ok := absent[o]
			if !ok {
				absent[o] = now
				continue
			}
			if now.Sub(since) < n.cfg.Grace {
				continue
			}
			marked, err := n.reg.MarkLost(n.ctx, o)
			if err != nil {
				n.log.Warn("could not mark a dead node's sessions lost", "node", o, "error", err)
				continue
			}
			if marked > 0 {
				n.log.Warn("marked a dead node's sessions lost", "node", o, "sessions", marked, "absent_for", now.Sub(since).Round(time.Millisecond))
			}
		}
	}
}
