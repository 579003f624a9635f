// Package etcdreg implements the fleet registry (package registry) on etcd:
// leases for node liveness, transactions for compare-and-swap of session
// records and tenants' usage, watches for the routing cache and
// concurrency.Election for the fleet's chores.
//
// Key layout, under a prefix (default /warren/fleet/):
//
//	nodes/NODE              JSON registry.Node, bound to the node's lease
//	drain/NODE              present while NODE is draining (no lease):
//	                        empty, or "move" when NODE moves its sessions
//	sessions/TENANT/ID      JSON registry.Session (no lease: a node's
//	                        restart finds its sessions' records)
//	owner/NODE/TENANT/ID    empty; the index of NODE's sessions, written
//	                        in the same transaction as the record
//	usage/TENANT            what the tenant's Live sessions hold (JSON:
//	                        sessions, memory_mb, milli_cpus), changed in
//	                        the same transaction as a record
//	objects/KIND/NAME       an object (API keys, tenants' settings): the
//	                        caller's bytes, no lease
//	election/ROLE/...       concurrency.Election's keys
//	secret                  the fleet's secret, base64; made once by
//	                        compare-and-swap
//
// Tenants and ids are path-escaped, so a "/" in one cannot reach another
// tenant's keys. Lost records and their index keys are bound to a lease of
// the lost retention (default 24 h), after which etcd drops them.
package etcdreg

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/fleet/registry"
)

// DefaultPrefix is where the registry's keys live unless told otherwise.
const DefaultPrefix = "/warren/fleet/"

// Config says how to reach etcd.
type Config struct {
	// Endpoints are etcd's client URLs (http://host:2379).
	Endpoints []string
	// TLS, if set, is used for every endpoint (client certificates
	// included).
	TLS *tls.Config
	// Username and Password authenticate to etcd if set.
	Username, Password string
	// Prefix is where the keys live (DefaultPrefix if empty); two fleets
	// can share one etcd under two prefixes.
	Prefix string
	// DialTimeout bounds each connection attempt (5 s if zero).
	DialTimeout time.Duration
	// ElectionTTL is how long a crashed leader keeps its role (5 s if
	// zero; whole seconds).
	ElectionTTL time.Duration
	// LostRetention is how long a Lost record stays (24 h if zero).
	LostRetention time.Duration
	// OpTimeout bounds a call whose context has no deadline (3 s if
	// zero): without a quorum etcd would hold it for long, and a
	// registry that cannot answer says so promptly instead.
	OpTimeout time.Duration
}

// Registry is the etcd implementation of registry.Registry.
type Registry struct {
	cli         *clientv3.Client
	tls         *tls.Config
	p           string
	electionTTL int
	lostTTL     int64
	opTimeout   time.Duration
}

// bound gives a call the registry's op timeout (or ctx's deadline, if
// sooner) and asks etcd to refuse it at once when the member it reaches has
// no leader: without a quorum a call answers unavailable promptly instead
// of waiting for etcd's own request timeout.
func (r *Registry) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(clientv3.WithRequireLeader(ctx), r.opTimeout)
}

var _ registry.Registry = (*Registry)(nil)

// New connects to etcd. It does not wait for etcd to answer: a registry
// made while etcd is down works once it is back.
func New(cfg Config) (*Registry, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "fleet: no etcd endpoints")
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		TLS:         cfg.TLS,
		Username:    cfg.Username,
		Password:    cfg.Password,
		DialTimeout: cfg.DialTimeout,
		// Probe idle connections, so a dead member is noticed and the
		// client moves to another before a call times out on it.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "fleet: etcd client: %w", err)
	}
	r := NewFromClient(cli, cfg)
	r.tls = cfg.TLS
	return r, nil
}

// TLSConfig is the TLS configuration the registry reaches etcd with (nil:
// cleartext), for other requests to the same endpoints (doctor's).
func (r *Registry) TLSConfig() *tls.Config { return r.tls }

// NewFromClient wraps a client the caller made; Close closes it.
func NewFromClient(cli *clientv3.Client, cfg Config) *Registry {
	r := &Registry{cli: cli, p: cfg.Prefix, electionTTL: int(cfg.ElectionTTL / time.Second), lostTTL: int64(cfg.LostRetention / time.Second)}
	if r.p == "" {
		r.p = DefaultPrefix
	}
	if !strings.HasSuffix(r.p, "/") {
		r.p += "/"
	}
	if r.electionTTL < 1 {
		r.electionTTL = 5
	}
	if r.opTimeout = cfg.OpTimeout; r.opTimeout <= 0 {
		r.opTimeout = 3 * time.Second
	}
	if r.lostTTL < 1 {
		r.lostTTL = 24 * 3600
	}
	return r
}

// Client returns the etcd client (for doctor and tests).
func (r *Registry) Client() *clientv3.Client { return r.cli }

// Close closes the connection.
func (r *Registry) Close() error { return r.cli.Close() }

func (r *Registry) nodeKey(n string) string  { return r.p + "nodes/" + url.PathEscape(n) }
func (r *Registry) drainKey(n string) string { return r.p + "drain/" + url.PathEscape(n) }
func (r *Registry) usageKey(t string) string { return r.p + "usage/" + url.PathEscape(t) }
func (r *Registry) objectKey(kind, name string) string {
	return r.p + "objects/" + url.PathEscape(kind) + "/" + url.PathEscape(name)
}
func (r *Registry) sessionKey(t, id string) string {
	return r.p + "sessions/" + url.PathEscape(t) + "/" + url.PathEscape(id)
}
func (r *Registry) ownerKey(n, t, id string) string {
	return r.p + "owner/" + url.PathEscape(n) + "/" + url.PathEscape(t) + "/" + url.PathEscape(id)
}

// unavailable classifies an error of etcd: whatever etcd or the
// connection to it says, the registry cannot answer now, and the call may
// be retried. A caller that went away stays canceled.
func unavailable(op string, err error) error {
	if errors.Is(err, context.Canceled) {
		return errdefs.New(errdefs.ErrCanceled, "fleet registry: %s: %w", op, err)
	}
	return errdefs.New(errdefs.ErrUnavailable, "fleet registry unavailable: %s: %w", op, err)
}

// Join registers n under a lease of ttl (whole seconds, at least 1) and
// keeps it there; see registry.Registry.
func (r *Registry) Join(ctx context.Context, n registry.Node, ttl time.Duration) (registry.Membership, error) {
	if n.Name == "" || strings.Contains(n.Name, "/") {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "fleet: node name %q: want a non-empty name without /", n.Name)
	}
	secs := int64(ttl / time.Second)
	if secs < 1 {
		secs = 1
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m := &membership{r: r, ttl: secs, node: n, cancel: cancel, done: make(chan struct{}), kick: make(chan struct{}, 1)}
	go m.run(ctx)
	return m, nil
}

// membership keeps a node's entry alive: grant a lease, put the entry,
// renew until the renewal fails, and start over.
type membership struct {
	r      *Registry
	ttl    int64
	cancel context.CancelFunc
	done   chan struct{}
	kick   chan struct{} // an Update wants the entry rewritten

	mu         sync.Mutex
	node       registry.Node    // what to write; guarded by mu
	lease      clientv3.LeaseID // the current lease, 0 if none; guarded by mu
	registered bool             // guarded by mu
}

func (m *membership) run(ctx context.Context) {
	defer close(m.done)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if err := m.once(ctx); err != nil && ctx.Err() == nil {
			// Back off, up to a third of the TTL, so a returning etcd
			// sees the node again well within one TTL.
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, time.Duration(m.ttl)*time.Second/3)
			continue
		}
		backoff = 100 * time.Millisecond
	}
}

// once registers the node under a fresh lease and renews it until that
// fails. The entry is marked registered only between a successful put and
// the renewal's end.
func (m *membership) once(ctx context.Context) error {
	gctx, cancel := context.WithTimeout(ctx, time.Duration(m.ttl)*time.Second)
	lease, err := m.r.cli.Grant(gctx, m.ttl)
	cancel()
	if err != nil {
		return err
	}
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	ch, err := m.r.cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.lease = lease.ID
	m.mu.Unlock()
	if err := m.put(ctx); err != nil {
		_, _ = m.r.cli.Revoke(context.WithoutCancel(ctx), lease.ID) // undo; else it expires with its TTL
		return err
	}
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				// The client gave up on the lease: it expired or we
				// were told to stop. Either way the entry is gone.
				m.setRegistered(false)
				return errors.New("lease lost")
			}
		case <-m.kick:
			if err := m.put(ctx); err != nil {
				// The lease may still be fine; the next renewal
				// tells. Try the write again on the next kick.
				continue
			}
		case <-ctx.Done():
			m.setRegistered(false)
			return ctx.Err()
		}
	}
}

func (m *membership) setRegistered(v bool) {
	m.mu.Lock()
	m.registered = v
	if !v {
		m.lease = 0
	}
	m.mu.Unlock()
}

// put writes the entry under the current lease.
func (m *membership) put(ctx context.Context) error {
	m.mu.Lock()
	n, lease := m.node, m.lease
	m.mu.Unlock()
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, time.Duration(m.ttl)*time.Second)
	defer cancel()
	if _, err := m.r.cli.Put(pctx, m.r.nodeKey(n.Name), string(b), clientv3.WithLease(lease)); err != nil {
		return err
	}
	m.mu.Lock()
	if m.lease == lease {
		m.registered = true
	}
	m.mu.Unlock()
	return nil
}

func (m *membership) Update(ctx context.Context, n registry.Node) error {
	m.mu.Lock()
	n.Name = m.node.Name
	m.node = n
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
	return nil
}

func (m *membership) Registered() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.registered
}

// Close stops renewing and revokes the lease, which removes the entry at
// once rather than after the TTL.
func (m *membership) Close() error {
	m.mu.Lock()
	lease := m.lease
	m.mu.Unlock()
	m.cancel()
	<-m.done
	if lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := m.r.cli.Revoke(ctx, lease); err != nil {
			return unavailable("revoke the node's lease", err)
		}
	}
	return nil
}

// Nodes returns the live nodes with their drain marks.
func (r *Registry) Nodes(ctx context.Context) ([]registry.Node, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	resp, err := r.cli.Txn(ctx).Then(
		clientv3.OpGet(r.p+"nodes/", clientv3.WithPrefix()),
		clientv3.OpGet(r.p+"drain/", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, unavailable("list nodes", err)
	}
	nodes, _, _, err := r.decodeNodes(resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs)
	return nodes, err
}

// drainMove is the value of a drain mark set by DrainMove.
const drainMove = "move"

func (r *Registry) decodeNodes(nodeKVs, drainKVs []*mvccKV) (nodes []registry.Node, draining, moving []string, err error) {
	marks := map[string]string{}
	for _, kv := range drainKVs {
		name, _ := url.PathUnescape(strings.TrimPrefix(string(kv.Key), r.p+"drain/"))
		marks[name] = string(kv.Value)
		draining = append(draining, name)
		if string(kv.Value) == drainMove {
			moving = append(moving, name)
		}
	}
	nodes = make([]registry.Node, 0, len(nodeKVs))
	for _, kv := range nodeKVs {
		var n registry.Node
		if err := json.Unmarshal(kv.Value, &n); err != nil {
			return nil, nil, nil, fmt.Errorf("fleet registry: node record %s: %w", kv.Key, err)
		}
		mark, ok := marks[n.Name]
		n.Draining, n.Moving = ok, mark == drainMove
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	sort.Strings(draining)
	sort.Strings(moving)
	return nodes, draining, moving, nil
}

// Drain sets or removes a node's drain mark.
func (r *Registry) Drain(ctx context.Context, node string, draining bool) error {
	return r.mark(ctx, node, draining, "")
}

// DrainMove sets a node's drain mark to "move".
func (r *Registry) DrainMove(ctx context.Context, node string) error {
	return r.mark(ctx, node, true, drainMove)
}

func (r *Registry) mark(ctx context.Context, node string, draining bool, value string) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	var err error
	if draining {
		_, err = r.cli.Put(ctx, r.drainKey(node), value)
	} else {
		_, err = r.cli.Delete(ctx, r.drainKey(node))
	}
	if err != nil {
		return unavailable("drain", err)
	}
	return nil
}

// maxRounds bounds the compare-and-swap retries of one call. Every failed
// round means another call succeeded, so only a storm of writes to one
// tenant reaches it.
const maxRounds = 64

// CreateSession records s and counts it, in one transaction guarded by the
// record's absence and the usage key's revision.
func (r *Registry) CreateSession(ctx context.Context, s registry.Session, q registry.Quota) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	s.State = registry.Live
	if s.Created.IsZero() {
		s.Created = time.Now().UTC()
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	sk, uk := r.sessionKey(s.Tenant, s.ID), r.usageKey(s.Tenant)
	for range maxRounds {
		resp, err := r.cli.Txn(ctx).Then(clientv3.OpGet(uk), clientv3.OpGet(sk)).Commit()
		if err != nil {
			return unavailable("create session", err)
		}
		used, rev, err := usageOf(resp.Responses[0].GetResponseRange().Kvs)
		if err != nil {
			return err
		}
		var cmp clientv3.Cmp
		var ops []clientv3.Op
		if existing := resp.Responses[1].GetResponseRange().Kvs; len(existing) > 0 {
			old, ok := r.movingFrom(s, existing[0].Value)
			if !ok {
				return r.existsErr(s, existing[0].Value)
			}
			// A move's hand-over: the slot stays counted; only what
			// the session grows by must fit.
			grown := registry.Session{Tenant: s.Tenant, MemoryMB: max(s.MemoryMB-old.MemoryMB, 0), MilliCPUs: max(s.MilliCPUs-old.MilliCPUs, 0)}
			if err := overQuota(grown, used, registry.Quota{MaxMemoryMB: q.MaxMemoryMB, MaxMilliCPUs: q.MaxMilliCPUs}); err != nil {
				return err
			}
			cmp = clientv3.Compare(clientv3.ModRevision(sk), "=", existing[0].ModRevision)
			ops = []clientv3.Op{clientv3.OpPut(uk, used.plus(old, -1).add(s, 1))}
			if old.Node != s.Node { // etcd refuses two operations on one key in a transaction
				ops = append(ops, clientv3.OpDelete(r.ownerKey(old.Node, s.Tenant, s.ID)))
			}
		} else {
			if err := overQuota(s, used, q); err != nil {
				return err
			}
			cmp = clientv3.Compare(clientv3.Version(sk), "=", 0)
			ops = []clientv3.Op{clientv3.OpPut(uk, used.add(s, 1))}
		}
		ops = append(ops, clientv3.OpPut(sk, string(b)), clientv3.OpPut(r.ownerKey(s.Node, s.Tenant, s.ID), ""))
		tx, err := r.cli.Txn(ctx).If(
			cmp,
			clientv3.Compare(clientv3.ModRevision(uk), "=", rev),
		).Then(ops...).Commit()
		if err != nil {
			return unavailable("create session", err)
		}
		if tx.Succeeded {
			return nil
		}
	}
	return errdefs.New(errdefs.ErrUnavailable, "fleet registry: too many concurrent changes to tenant %s; try again", s.Tenant)
}

// movingFrom returns the existing record raw if s continues its move
// (s.MovedFrom names its node, where it is Moving).
func (r *Registry) movingFrom(s registry.Session, raw []byte) (registry.Session, bool) {
	var old registry.Session
	if s.MovedFrom == "" || json.Unmarshal(raw, &old) != nil {
		return old, false
	}
	return old, old.State == registry.Moving && old.Node == s.MovedFrom
}

// MarkMoving turns node's record of (tenant, id) from Live to Moving, or
// back.
func (r *Registry) MarkMoving(ctx context.Context, tenant, id, node string, moving bool) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	from, to := registry.Live, registry.Moving
	if !moving {
		from, to = to, from
	}
	sk := r.sessionKey(tenant, id)
	for range maxRounds {
		resp, err := r.cli.Get(ctx, sk)
		if err != nil {
			return unavailable("mark a session moving", err)
		}
		if len(resp.Kvs) == 0 {
			return errdefs.New(errdefs.ErrNotFound, "session %s not found in the fleet", id)
		}
		var cur registry.Session
		if err := json.Unmarshal(resp.Kvs[0].Value, &cur); err != nil {
			return fmt.Errorf("fleet registry: session record %s/%s: %w", tenant, id, err)
		}
		switch {
		case cur.Node == node && cur.State == to:
			return nil
		case cur.Node != node || cur.State != from:
			return errdefs.New(errdefs.ErrConflict, "session %s is %s on node %s, not %s on %s", id, cur.State, cur.Node, from, node)
		}
		cur.State = to
		b, _ := json.Marshal(cur)
		tx, err := r.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(sk), "=", resp.Kvs[0].ModRevision)).
			Then(clientv3.OpPut(sk, string(b))).Commit()
		if err != nil {
			return unavailable("mark a session moving", err)
		}
		if tx.Succeeded {
			return nil
		}
	}
	return errdefs.New(errdefs.ErrUnavailable, "fleet registry: too many concurrent changes to session %s; try again", id)
}

func (r *Registry) existsErr(s registry.Session, raw []byte) error {
	var old registry.Session
	if err := json.Unmarshal(raw, &old); err != nil {
		return fmt.Errorf("fleet registry: session record %s/%s: %w", s.Tenant, s.ID, err)
	}
	switch old.State {
	case registry.Lost:
		return errdefs.New(errdefs.ErrConflict, "session %s was lost with node %s; delete it before reusing the id", s.ID, old.Node)
	case registry.Moving:
		return errdefs.WithRetryAfter(errdefs.ErrUnavailable, time.Second, "session %s is moving from node %s to another node; try again in a moment", s.ID, old.Node)
	}
	return errdefs.New(errdefs.ErrConflict, "session %s exists on node %s", s.ID, old.Node)
}

// mvccKV is etcd's key-value type.
type mvccKV = mvccpb.KeyValue

// usage is a tenant's usage/TENANT value: JSON registry.Usage (a plain
// decimal, the session count alone, from before memory and CPUs were
// counted, is read too).
type usage registry.Usage

// add returns the value after s came (sign 1) or went (-1), never below 0.
func (u usage) add(s registry.Session, sign int) string {
	b, _ := json.Marshal(registry.Usage(u.plus(s, sign)))
	return string(b)
}

// plus is the usage after s came (sign 1) or went (-1), never below 0.
func (u usage) plus(s registry.Session, sign int) usage {
	u.Sessions = max(u.Sessions+sign, 0)
	u.MemoryMB = max(u.MemoryMB+int64(sign)*s.MemoryMB, 0)
	u.MilliCPUs = max(u.MilliCPUs+int64(sign)*s.MilliCPUs, 0)
	return u
}

// overQuota checks that s fits in its tenant's quota after used.
func overQuota(s registry.Session, used usage, q registry.Quota) error {
	over := func(what, format string, args ...any) error {
		return errdefs.New(errdefs.ErrResourceExhausted, "tenant %s is over its %s quota: "+format, append([]any{s.Tenant, what}, args...)...)
	}
	switch {
	case q.MaxSessions > 0 && used.Sessions >= q.MaxSessions:
		return over("max_sessions", "it holds %d of %d sessions in the fleet", used.Sessions, q.MaxSessions)
	case q.MaxMemoryMB > 0 && used.MemoryMB+s.MemoryMB > q.MaxMemoryMB:
		return over("max_memory_mb", "its sessions in the fleet would hold %d MiB of memory limits, more than %d", used.MemoryMB+s.MemoryMB, q.MaxMemoryMB)
	case q.MaxMilliCPUs > 0 && used.MilliCPUs+s.MilliCPUs > q.MaxMilliCPUs:
		return over("max_cpus", "its sessions in the fleet would hold %g CPUs, more than %g",
			float64(used.MilliCPUs+s.MilliCPUs)/1000, float64(q.MaxMilliCPUs)/1000)
	}
	return nil
}

// usageOf reads a usage key: the usage and its modification revision
// (zero, 0 when absent, which a Compare of ModRevision matches).
func usageOf(kvs []*mvccKV) (usage, int64, error) {
	if len(kvs) == 0 {
		return usage{}, 0, nil
	}
	var u usage
	v := kvs[0].Value
	if n, err := strconv.Atoi(string(v)); err == nil {
		u.Sessions = n
	} else if err := json.Unmarshal(v, &u); err != nil {
		return usage{}, 0, fmt.Errorf("fleet registry: usage record %s: %w", kvs[0].Key, err)
	}
	return u, kvs[0].ModRevision, nil
}

// GetSession returns a session's record.
func (r *Registry) GetSession(ctx context.Context, tenant, id string) (registry.Session, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	resp, err := r.cli.Get(ctx, r.sessionKey(tenant, id))
	if err != nil {
		return registry.Session{}, unavailable("get session", err)
	}
	if len(resp.Kvs) == 0 {
		return registry.Session{}, errdefs.New(errdefs.ErrNotFound, "session %s not found in the fleet", id)
	}
	var s registry.Session
	if err := json.Unmarshal(resp.Kvs[0].Value, &s); err != nil {
		return registry.Session{}, fmt.Errorf("fleet registry: session record %s/%s: %w", tenant, id, err)
	}
	return s, nil
}

// DeleteSession removes a record and gives its quota back if it was Live.
func (r *Registry) DeleteSession(ctx context.Context, tenant, id, node string) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	sk, uk := r.sessionKey(tenant, id), r.usageKey(tenant)
	for range maxRounds {
		resp, err := r.cli.Txn(ctx).Then(clientv3.OpGet(uk), clientv3.OpGet(sk)).Commit()
		if err != nil {
			return unavailable("delete session", err)
		}
		kvs := resp.Responses[1].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return nil
		}
		var s registry.Session
		if err := json.Unmarshal(kvs[0].Value, &s); err != nil {
			return fmt.Errorf("fleet registry: session record %s/%s: %w", tenant, id, err)
		}
		if s.Node != node {
			return errdefs.New(errdefs.ErrConflict, "session %s belongs to node %s, not %s", id, s.Node, node)
		}
		used, rev, err := usageOf(resp.Responses[0].GetResponseRange().Kvs)
		if err != nil {
			return err
		}
		ops := []clientv3.Op{clientv3.OpDelete(sk), clientv3.OpDelete(r.ownerKey(node, tenant, id))}
		if s.Held() {
			ops = append(ops, clientv3.OpPut(uk, used.add(s, -1)))
		}
		tx, err := r.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(sk), "=", kvs[0].ModRevision),
			clientv3.Compare(clientv3.ModRevision(uk), "=", rev),
		).Then(ops...).Commit()
		if err != nil {
			return unavailable("delete session", err)
		}
		if tx.Succeeded {
			return nil
		}
	}
	return errdefs.New(errdefs.ErrUnavailable, "fleet registry: too many concurrent changes to tenant %s; try again", tenant)
}

// NodeSessions returns node's records, through its owner index.
func (r *Registry) NodeSessions(ctx context.Context, node string) ([]registry.Session, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	resp, err := r.cli.Get(ctx, r.p+"owner/"+url.PathEscape(node)+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, unavailable("list a node's sessions", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	ops := make([]clientv3.Op, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		t, id, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), r.p+"owner/"+url.PathEscape(node)+"/"), "/")
		if !ok {
			continue
		}
		ops = append(ops, clientv3.OpGet(r.p+"sessions/"+t+"/"+id))
	}
	var out []registry.Session
	// etcd caps the operations of one transaction (128 by default).
	for len(ops) > 0 {
		n := min(len(ops), 100)
		tx, err := r.cli.Txn(ctx).Then(ops[:n]...).Commit()
		if err != nil {
			return nil, unavailable("list a node's sessions", err)
		}
		for _, rr := range tx.Responses {
			for _, kv := range rr.GetResponseRange().Kvs {
				var s registry.Session
				if err := json.Unmarshal(kv.Value, &s); err != nil {
					return nil, fmt.Errorf("fleet registry: session record %s: %w", kv.Key, err)
				}
				out = append(out, s)
			}
		}
		ops = ops[n:]
	}
	return out, nil
}

// MarkLost marks node's Live and Moving sessions Lost, one transaction per session,
// each guarded by the node's entry still being absent, so a node that
// comes back in the middle keeps the rest.
func (r *Registry) MarkLost(ctx context.Context, node string) (int, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	sessions, err := r.NodeSessions(ctx, node)
	if err != nil {
		return 0, err
	}
	var lease clientv3.LeaseID
	marked := 0
	for _, s := range sessions {
		if !s.Held() || s.Node != node {
			continue
		}
		if lease == 0 {
			l, err := r.cli.Grant(ctx, r.lostTTL)
			if err != nil {
				return marked, unavailable("mark sessions lost", err)
			}
			lease = l.ID
		}
		ok, err := r.markLost(ctx, s, lease)
		if err != nil {
			return marked, err
		}
		if !ok {
			// The node is back: it keeps its sessions.
			return marked, nil
		}
		marked++
	}
	return marked, nil
}

// markLost marks one record lost; false: the node is alive again.
func (r *Registry) markLost(ctx context.Context, s registry.Session, lease clientv3.LeaseID) (bool, error) {
	sk, uk, nk := r.sessionKey(s.Tenant, s.ID), r.usageKey(s.Tenant), r.nodeKey(s.Node)
	for range maxRounds {
		resp, err := r.cli.Txn(ctx).Then(clientv3.OpGet(uk), clientv3.OpGet(sk), clientv3.OpGet(nk, clientv3.WithCountOnly())).Commit()
		if err != nil {
			return false, unavailable("mark sessions lost", err)
		}
		if resp.Responses[2].GetResponseRange().Count > 0 {
			return false, nil
		}
		kvs := resp.Responses[1].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return true, nil // deleted meanwhile
		}
		var cur registry.Session
		if err := json.Unmarshal(kvs[0].Value, &cur); err != nil {
			return false, fmt.Errorf("fleet registry: session record %s/%s: %w", s.Tenant, s.ID, err)
		}
		if !cur.Held() {
			return true, nil
		}
		used, rev, err := usageOf(resp.Responses[0].GetResponseRange().Kvs)
		if err != nil {
			return false, err
		}
		cur.State, cur.LostAt = registry.Lost, time.Now().UTC()
		b, _ := json.Marshal(cur)
		tx, err := r.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.Version(nk), "=", 0),
			clientv3.Compare(clientv3.ModRevision(sk), "=", kvs[0].ModRevision),
			clientv3.Compare(clientv3.ModRevision(uk), "=", rev),
		).Then(
			clientv3.OpPut(sk, string(b), clientv3.WithLease(lease)),
			clientv3.OpPut(r.ownerKey(s.Node, s.Tenant, s.ID), "", clientv3.WithLease(lease)),
			clientv3.OpPut(uk, used.add(cur, -1)),
		).Commit()
		if err != nil {
			return false, unavailable("mark sessions lost", err)
		}
		if tx.Succeeded {
			return true, nil
		}
	}
	return false, errdefs.New(errdefs.ErrUnavailable, "fleet registry: too many concurrent changes to tenant %s; try again", s.Tenant)
}

// Usage returns the tenant's Live sessions.
func (r *Registry) Usage(ctx context.Context, tenant string) (int, error) {
	u, err := r.UsageOf(ctx, tenant)
	return u.Sessions, err
}

// UsageOf returns what the tenant's Live sessions hold.
func (r *Registry) UsageOf(ctx context.Context, tenant string) (registry.Usage, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	resp, err := r.cli.Get(ctx, r.usageKey(tenant))
	if err != nil {
		return registry.Usage{}, unavailable("read usage", err)
	}
	u, _, err := usageOf(resp.Kvs)
	return registry.Usage(u), err
}

// Snapshot reads nodes, drain marks and sessions at one revision.
func (r *Registry) Snapshot(ctx context.Context) (registry.Snapshot, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	resp, err := r.cli.Txn(ctx).Then(
		clientv3.OpGet(r.p+"nodes/", clientv3.WithPrefix()),
		clientv3.OpGet(r.p+"drain/", clientv3.WithPrefix()),
		clientv3.OpGet(r.p+"sessions/", clientv3.WithPrefix()),
		clientv3.OpGet(r.p+"objects/", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return registry.Snapshot{}, unavailable("snapshot", err)
	}
	snap := registry.Snapshot{Rev: resp.Header.Revision}
	if snap.Nodes, snap.Draining, snap.Moving, err = r.decodeNodes(resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs); err != nil {
		return registry.Snapshot{}, err
	}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		var s registry.Session
		if err := json.Unmarshal(kv.Value, &s); err != nil {
			return registry.Snapshot{}, fmt.Errorf("fleet registry: session record %s: %w", kv.Key, err)
		}
		snap.Sessions = append(snap.Sessions, s)
	}
	for _, kv := range resp.Responses[3].GetResponseRange().Kvs {
		if o, ok := r.object(kv); ok {
			snap.Objects = append(snap.Objects, o)
		}
	}
	return snap, nil
}

// Watch streams changes to nodes, drain marks and sessions after rev. It
// asks for a leader, so a member cut off from its quorum ends the watch
// rather than leave it silently stale.
func (r *Registry) Watch(ctx context.Context, rev int64) <-chan registry.Event {
	out := make(chan registry.Event, 64)
	wch := r.cli.Watch(clientv3.WithRequireLeader(ctx), r.p, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	go func() {
		defer close(out)
		for resp := range wch {
			if resp.Err() != nil || resp.Canceled {
				return
			}
			for _, ev := range resp.Events {
				e, ok := r.event(ev)
				if !ok {
					continue
				}
				select {
				case out <- e:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

func (r *Registry) event(ev *clientv3.Event) (registry.Event, bool) {
	key := strings.TrimPrefix(string(ev.Kv.Key), r.p)
	kind, rest, _ := strings.Cut(key, "/")
	e := registry.Event{Rev: ev.Kv.ModRevision, Deleted: ev.Type == clientv3.EventTypeDelete}
	switch kind {
	case "nodes":
		name, _ := url.PathUnescape(rest)
		n := registry.Node{Name: name}
		if !e.Deleted && json.Unmarshal(ev.Kv.Value, &n) != nil {
			return e, false
		}
		e.Node = &n
	case "drain":
		e.Drain, _ = url.PathUnescape(rest)
		e.Move = !e.Deleted && string(ev.Kv.Value) == drainMove
	case "sessions":
		t, id, _ := strings.Cut(rest, "/")
		s := registry.Session{}
		s.Tenant, _ = url.PathUnescape(t)
		s.ID, _ = url.PathUnescape(id)
		if !e.Deleted && json.Unmarshal(ev.Kv.Value, &s) != nil {
			return e, false
		}
		e.Session = &s
	case "objects":
		o, ok := r.object(ev.Kv)
		if !ok {
			return e, false
		}
		e.Object = &o
	default:
		return e, false
	}
	return e, true
}

// object decodes an objects/KIND/NAME key and its value.
func (r *Registry) object(kv *mvccKV) (registry.Object, bool) {
	rest, ok := strings.CutPrefix(string(kv.Key), r.p+"objects/")
	if !ok {
		return registry.Object{}, false
	}
	k, n, ok := strings.Cut(rest, "/")
	if !ok {
		return registry.Object{}, false
	}
	kind, err1 := url.PathUnescape(k)
	name, err2 := url.PathUnescape(n)
	if err1 != nil || err2 != nil {
		return registry.Object{}, false
	}
	return registry.Object{Kind: kind, Name: name, Value: kv.Value, Rev: kv.ModRevision}, true
}

// PutObject writes an object, compared with rev (registry.Registry).
func (r *Registry) PutObject(ctx context.Context, o registry.Object, rev int64) (int64, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	key := r.objectKey(o.Kind, o.Name)
	tx := r.cli.Txn(ctx)
	switch {
	case rev == 0:
		tx = tx.If(clientv3.Compare(clientv3.Version(key), "=", 0))
	case rev > 0:
		tx = tx.If(clientv3.Compare(clientv3.ModRevision(key), "=", rev))
	}
	resp, err := tx.Then(clientv3.OpPut(key, string(o.Value))).Commit()
	if err != nil {
		return 0, unavailable("write "+o.Kind, err)
	}
	if !resp.Succeeded {
		if rev == 0 {
			return 0, errdefs.New(errdefs.ErrConflict, "%s %q exists in the fleet", o.Kind, o.Name)
		}
		return 0, errdefs.New(errdefs.ErrConflict, "%s %q changed meanwhile", o.Kind, o.Name)
	}
	return resp.Header.Revision, nil
}

// GetObject reads an object.
func (r *Registry) GetObject(ctx context.Context, kind, name string) (registry.Object, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	resp, err := r.cli.Get(ctx, r.objectKey(kind, name))
	if err != nil {
		return registry.Object{}, unavailable("read "+kind, err)
	}
	if len(resp.Kvs) == 0 {
		return registry.Object{}, errdefs.New(errdefs.ErrNotFound, "%s %q not found", kind, name)
	}
	o, ok := r.object(resp.Kvs[0])
	if !ok {
		return registry.Object{}, fmt.Errorf("fleet registry: bad object key %s", resp.Kvs[0].Key)
	}
	return o, nil
}

// DeleteObject removes an object.
func (r *Registry) DeleteObject(ctx context.Context, kind, name string) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	if _, err := r.cli.Delete(ctx, r.objectKey(kind, name)); err != nil {
		return unavailable("delete "+kind, err)
	}
	return nil
}

// Elect campaigns for role under a session of the election TTL.
//
// It returns when ctx ends even while etcd cannot be reached: the etcd
// client's campaign, cancelled, resigns with the client's own context,
// which waits for etcd for as long as the client lives, and the session's
// lease grant waits likewise. Both run in a goroutine of their own that
// ends when etcd answers or the client closes (Close), so that a node cut
// off from etcd still stops at once (its reaper's wait for the election
// held its shutdown until etcd came back).
func (r *Registry) Elect(ctx context.Context, role, id string) (registry.Leadership, error) {
	type result struct {
		l   *leadership
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := concurrency.NewSession(r.cli, concurrency.WithTTL(r.electionTTL), concurrency.WithContext(context.WithoutCancel(ctx)))
		if err != nil {
			done <- result{err: unavailable("elect", err)}
			return
		}
		e := concurrency.NewElection(s, r.p+"election/"+url.PathEscape(role))
		if err := e.Campaign(ctx, id); err != nil {
			s.Close()
			done <- result{err: unavailable("elect", err)}
			return
		}
		done <- result{l: &leadership{s: s, e: e}}
	}()
	select {
	case res := <-done:
		if res.err != nil {
			return nil, res.err
		}
		return res.l, nil
	case <-ctx.Done():
		// The campaign may still win before it sees ctx end: give that
		// leadership up when it does.
		go func() {
			if res := <-done; res.l != nil {
				_ = res.l.Resign(context.Background()) // it was never used; the session's lease ends it anyway
			}
		}()
		return nil, unavailable("elect", ctx.Err())
	}
}

type leadership struct {
	s *concurrency.Session
	e *concurrency.Election
}

func (l *leadership) Done() <-chan struct{} { return l.s.Done() }

func (l *leadership) Resign(ctx context.Context) error {
	err := l.e.Resign(ctx)
	l.s.Close()
	if err != nil {
		return unavailable("resign", err)
	}
	return nil
}

// Ping asks every endpoint for its status.
func (r *Registry) Ping(ctx context.Context) (registry.PingResult, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	eps := r.cli.Endpoints()
	res := registry.PingResult{Total: len(eps)}
	var leader uint64
	var lastErr error
	for _, ep := range eps {
		start := time.Now()
		st, err := r.cli.Status(ctx, ep)
		if err != nil {
			lastErr = err
			continue
		}
		res.Endpoints++
		res.RTT = max(res.RTT, time.Since(start))
		if st.Leader != 0 {
			leader = st.Leader
		}
	}
	if res.Endpoints == 0 {
		return res, unavailable("ping", lastErr)
	}
	if leader != 0 {
		if ml, err := r.cli.MemberList(ctx); err == nil {
			for _, m := range ml.Members {
				if m.ID == leader {
					res.Leader = m.Name
				}
			}
		}
	}
	return res, nil
}

// Prefix is where the registry's keys live.
func (r *Registry) Prefix() string { return r.p }

// Secret returns the fleet's secret, making it if no node has yet.
func (r *Registry) Secret(ctx context.Context) ([]byte, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	key := r.p + "secret"
	raw := make([]byte, 32)
	rand.Read(raw)
	fresh := base64.StdEncoding.EncodeToString(raw)
	tx, err := r.cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(key), "=", 0)).
		Then(clientv3.OpPut(key, fresh)).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return nil, unavailable("fleet secret", err)
	}
	v := fresh
	if !tx.Succeeded {
		kvs := tx.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return nil, errdefs.New(errdefs.ErrUnavailable, "fleet secret: deleted while read; try again")
		}
		v = string(kvs[0].Value)
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b) < 32 {
		return nil, fmt.Errorf("fleet registry: the secret at %s is not 32 bytes of base64", key)
	}
	return b, nil
}
