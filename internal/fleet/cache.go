package fleet

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/fleet/registry"
)

// Cache is a node's copy of the registry's nodes, drain marks and session
// records, kept current by a watch. When the registry goes away the cache
// keeps what it had (routes to live owners keep working) and loads a fresh
// snapshot once the registry is back; a watch that fell behind a
// compaction does the same.
type Cache struct {
	reg registry.Registry
	log *slog.Logger

	mu       sync.RWMutex
	rev      int64                           // guarded by mu
	nodes    map[string]registry.Node        // guarded by mu
	draining map[string]bool                 // guarded by mu
	moving   map[string]bool                 // drain marks of DrainMove; guarded by mu
	sessions map[sessionKey]registry.Session // guarded by mu
	// byID indexes sessions by id: the tenants holding each id (LookupID).
	byID    map[string]map[string]bool    // guarded by mu
	objects map[objectKey]registry.Object // guarded by mu
	// onObject, if set, hears of every object that changed (kind and
	// name), after the cache holds the change: the key and tenant caches
	// of the daemon drop their entries.
	onObject atomic.Pointer[func(kind, name string)]
	synced   chan struct{} // closed at the first snapshot
	once     sync.Once
}

func newCache(reg registry.Registry, log *slog.Logger) *Cache {
	return &Cache{reg: reg, log: log, nodes: map[string]registry.Node{}, draining: map[string]bool{},
		moving: map[string]bool{}, sessions: map[sessionKey]registry.Session{}, byID: map[string]map[string]bool{}, objects: map[objectKey]registry.Object{}, synced: make(chan struct{})}
}

// Synced is closed once the cache holds a first snapshot.
func (c *Cache) Synced() <-chan struct{} { return c.synced }

func (c *Cache) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		snap, err := c.reg.Snapshot(ctx)
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		c.load(snap)
		wctx, cancel := context.WithCancel(ctx)
		for e := range c.reg.Watch(wctx, snap.Rev) {
			c.apply(e)
		}
		cancel()
	}
}

type objectKey struct{ kind, name string }

func (c *Cache) load(s registry.Snapshot) {
	objects := make(map[objectKey]registry.Object, len(s.Objects))
	for _, o := range s.Objects {
		objects[objectKey{o.Kind, o.Name}] = o
	}
	// A new snapshot follows a broken watch: every object that differs
	// from what the cache held changed meanwhile (a revocation the watch
	// missed included).
	var changed []objectKey
	c.mu.Lock()
	for k, o := range objects {
		if old, ok := c.objects[k]; !ok || old.Rev != o.Rev {
			changed = append(changed, k)
		}
	}
	for k := range c.objects {
		if _, ok := objects[k]; !ok {
			changed = append(changed, k)
		}
	}
	c.objects = objects
	c.rev = s.Rev
	c.nodes = map[string]registry.Node{}
	for _, n := range s.Nodes {
		c.nodes[n.Name] = n
	}
	c.draining = map[string]bool{}
	for _, d := range s.Draining {
		c.draining[d] = true
	}
	c.moving = map[string]bool{}
	for _, d := range s.Moving {
		c.moving[d] = true
	}
	c.sessions = map[sessionKey]registry.Session{}
	c.byID = map[string]map[string]bool{}
	for _, r := range s.Sessions {
		c.putSessionLocked(r)
	}
	c.mu.Unlock()
	c.once.Do(func() { close(c.synced) })
	for _, k := range changed {
		c.notify(k.kind, k.name)
	}
}

func (c *Cache) notify(kind, name string) {
	if f := c.onObject.Load(); f != nil {
		(*f)(kind, name)
	}
}

// putSessionLocked records a session and indexes its id.
//
// Preconditions: c.mu is held for writing.
func (c *Cache) putSessionLocked(r registry.Session) {
	c.sessions[sessionKey{r.Tenant, r.ID}] = r
	ts := c.byID[r.ID]
	if ts == nil {
		ts = map[string]bool{}
		c.byID[r.ID] = ts
	}
	ts[r.Tenant] = true
}

// OnObject sets the function told of every changed object.
func (c *Cache) OnObject(f func(kind, name string)) { c.onObject.Store(&f) }

func (c *Cache) apply(e registry.Event) {
	if e.Object != nil {
		c.putObject(*e.Object, e.Deleted)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rev = e.Rev
	switch {
	case e.Node != nil && e.Deleted:
		delete(c.nodes, e.Node.Name)
	case e.Node != nil:
		c.nodes[e.Node.Name] = *e.Node
	case e.Drain != "":
		c.draining[e.Drain] = !e.Deleted
		c.moving[e.Drain] = e.Move
	case e.Session != nil && e.Deleted:
		delete(c.sessions, sessionKey{e.Session.Tenant, e.Session.ID})
		if ts := c.byID[e.Session.ID]; ts != nil {
			delete(ts, e.Session.Tenant)
			if len(ts) == 0 {
				delete(c.byID, e.Session.ID)
			}
		}
	case e.Session != nil:
		c.putSessionLocked(*e.Session)
	}
}

// Nodes returns the live nodes by name, with their drain marks.
func (c *Cache) Nodes() []registry.Node {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]registry.Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		n.Draining, n.Moving = c.draining[n.Name], c.moving[n.Name]
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Draining reports whether node is marked draining.
func (c *Cache) Draining(node string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.draining[node]
}

// Moving reports whether node is marked to move its sessions away
// (registry.Registry.DrainMove).
func (c *Cache) Moving(node string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.moving[node]
}

// Route is where a session lives, as far as the cache knows.
type Route struct {
	Session registry.Session
	// Node is the owner's entry; Alive is false when the owner has none
	// (dead, or cut off from the registry, within or past its grace).
	Node  registry.Node
	Alive bool
}

// Lookup returns the route of (tenant, id); false if the cache has no
// record of it.
func (c *Cache) Lookup(tenant, id string) (Route, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.sessions[sessionKey{tenant, id}]
	if !ok {
		return Route{}, false
	}
	n, alive := c.nodes[s.Node]
	return Route{Session: s, Node: n, Alive: alive}, true
}

// putObject records an object's change (from the watch, or from this
// node's own write before the watch brings it) and tells onObject. A change
// older than what the cache holds is ignored.
func (c *Cache) putObject(o registry.Object, deleted bool) {
	k := objectKey{o.Kind, o.Name}
	c.mu.Lock()
	old, had := c.objects[k]
	if had && old.Rev > o.Rev {
		c.mu.Unlock()
		return
	}
	if deleted {
		delete(c.objects, k)
	} else {
		c.objects[k] = o
	}
	c.rev = max(c.rev, o.Rev)
	c.mu.Unlock()
	c.notify(o.Kind, o.Name)
}

// Object returns the cached object kind/name.
func (c *Cache) Object(kind, name string) (registry.Object, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	o, ok := c.objects[objectKey{kind, name}]
	return o, ok
}

// Objects returns the cached objects of kind, by name.
func (c *Cache) Objects(kind string) []registry.Object {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []registry.Object
	for k, o := range c.objects {
		if k.kind == kind {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupID returns the route of a session known only by its id (an E2B
// sandbox reached with its access token, whose tenant the edge cannot
// tell). Ids are per tenant, so several tenants may hold one: a record of
// this node wins (it serves the request and checks the token), then a
// record on a live node; false if the cache has no record of id.
func (c *Cache) LookupID(id, here string) (Route, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var best Route
	found := false
	for tenant := range c.byID[id] {
		s := c.sessions[sessionKey{tenant, id}]
		n, alive := c.nodes[s.Node]
		r := Route{Session: s, Node: n, Alive: alive}
		switch {
		case s.Node == here:
			return r, true
		case !found, alive && !best.Alive:
			best, found = r, true
		}
	}
	return best, found
}

// Sessions calls yield with each Live session record the cache holds,
// until it returns false (E2B's signed file URLs name no sandbox: the
// router finds it by its token, e2b.FleetFiles). yield runs under the
// cache's read lock: it must not call the cache.
func (c *Cache) Sessions(yield func(registry.Session) bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, s := range c.sessions {
		if s.State == registry.Live && !yield(s) {
			return
		}
	}
}

// Rev is the registry revision the cache reflects.
func (c *Cache) Rev() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rev
}

// Holders returns the nodes owning live sessions of tenant ("": every
// tenant's) and the records of its sessions declared lost, for a
// fleet-wide list of sessions.
func (c *Cache) Holders(tenant string) (nodes map[string]bool, lost []registry.Session) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	nodes = map[string]bool{}
	for k, s := range c.sessions {
		if tenant != "" && k.tenant != tenant {
			continue
		}
		if s.State == registry.Lost {
			lost = append(lost, s)
		} else {
			nodes[s.Node] = true
		}
	}
	return nodes, lost
}
