package fleet_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/fleet"
	"github.com/warrenhq/warren/internal/fleet/etcdmember"
	"github.com/warrenhq/warren/internal/fleet/etcdreg"
	"github.com/warrenhq/warren/internal/fleet/registry"
	"github.com/warrenhq/warren/internal/fleet/registrytest"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/session/sessiontest"
)

var (
	clusterOnce sync.Once
	cluster     *etcdmember.Cluster
	clusterErr  error
	clusterDir  string
	prefixes    atomic.Int32
	bg          = context.Background()
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fleet")
	if err != nil {
		panic(err)
	}
	clusterDir = dir
	code := m.Run()
	if cluster != nil {
		cluster.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// sharedCluster starts, on first use, the 3-member etcd the tests share.
// Not in TestMain before m.Run: m.Run swaps os.Stderr under -json (Go's
// fix for go.dev/issue/33419), and etcd's loggers, starting in goroutines
// of their own, read it at the same time (a data race -race reports).
func sharedCluster(t testing.TB) *etcdmember.Cluster {
	t.Helper()
	clusterOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cluster, clusterErr = etcdmember.StartCluster(ctx, clusterDir, 3)
	})
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	return cluster
}

// node is one daemon's worth: a manager over fakes, its store wrapped by
// the fleet, on its own registry client (so that closing the client plays
// the process dying).
type node struct {
	name  string
	reg   *etcdreg.Registry
	fn    *fleet.Node
	m     *session.Manager
	local *sessiontest.Store
	rt    *sessiontest.Runtime
}

type fleetT struct {
	t      *testing.T
	prefix string
	quota  int
}

func newFleet(t *testing.T, quota int) *fleetT {
	return &fleetT{t: t, prefix: fmt.Sprintf("/fleettest%d/", prefixes.Add(1)), quota: quota}
}

func (f *fleetT) registry() *etcdreg.Registry {
	r, err := etcdreg.New(etcdreg.Config{Endpoints: sharedCluster(f.t).Endpoints(), Prefix: f.prefix, ElectionTTL: time.Second})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// start starts a node; local, rt: a restarted node's (nil: fresh).
func (f *fleetT) start(name string, local *sessiontest.Store, rt *sessiontest.Runtime) *node {
	t := f.t
	t.Helper()
	if local == nil {
		local, rt = sessiontest.NewStore(), sessiontest.NewRuntime(t.TempDir())
	}
	n := &node{name: name, reg: f.registry(), local: local, rt: rt}
	var err error
	n.fn, err = fleet.Join(bg, fleet.Config{Registry: n.reg, Name: name, Addr: "http://" + name, Capacity: 10,
		TTL: time.Second, Grace: time.Second, Count: func() int { return count(n.local) },
		Quota: func(context.Context, string) (registry.Quota, error) {
			return registry.Quota{MaxSessions: f.quota}, nil
		},
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	registrytest.Eventually(t, 5*time.Second, name+" registered", n.fn.Registered)
	n.m = session.NewManager(session.Config{MinFreeDiskMB: -1}, session.Deps{Store: n.fn.Store(local), Runtime: rt,
		Images: sessiontest.NewImages(), Log: slog.New(slog.DiscardHandler)})
	if err := n.m.Recover(bg); err != nil {
		t.Fatal(err)
	}
	if err := n.fn.Reconcile(bg, local, n.m.Delete); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	t.Cleanup(n.stop)
	return n
}

// stop stops the node as a daemon that keeps its sessions would.
func (n *node) stop() {
	if n.m != nil {
		n.m.Detach(bg)
		n.fn.Close()
		n.reg.Close()
		n.m = nil
	}
}

// die plays kill -9: the registry connection goes without a goodbye (the
// lease expires on its own), the sandboxes and local records stay.
func (n *node) die(t *testing.T) {
	n.reg.Close()
	// The fleet's goroutines notice the closed client on their own
	// time (up to a TTL); the test does not wait for them but does not
	// leave them behind either.
	done := make(chan struct{})
	go func() { n.fn.Close(); close(done) }()
	t.Cleanup(func() { <-done })
	n.m.Detach(bg)
	n.m = nil
}

func (n *node) create(tenant, id string) error {
	_, _, err := n.m.Create(bg, tenant, &session.CreateRequest{ID: id})
	return err
}

func TestCreateIsFleetWide(t *testing.T) {
	f := newFleet(t, 3)
	a, b := f.start("a", nil, nil), f.start("b", nil, nil)
	if err := a.create("t", "s1"); err != nil {
		t.Fatalf("create on a: %v", err)
	}
	if err := b.create("t", "s1"); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Fatalf("create of the same id on b = %v, want conflict", err)
	}
	if err := b.create("other", "s1"); err != nil {
		t.Fatalf("another tenant's s1 on b: %v", err)
	}
	if err := b.create("t", "s2"); err != nil {
		t.Fatal(err)
	}
	if err := a.create("t", "s3"); err != nil {
		t.Fatal(err)
	}
	// The quota (3) is the tenant's across the fleet.
	if err := b.create("t", "s4"); !errdefs.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("a 4th session of t = %v, want resource_exhausted", err)
	}
	if got := count(b.local); got != 2 {
		t.Fatalf("b holds %d sessions locally, want 2 (a refused create leaves nothing)", got)
	}
	if err := a.m.Delete(bg, "t", "s1"); err != nil {
		t.Fatal(err)
	}
	if err := b.create("t", "s4"); err != nil {
		t.Fatalf("create after a delete freed a slot: %v", err)
	}
	// Both caches route every session to its owner.
	registrytest.Eventually(t, 3*time.Second, "routes converge", func() bool {
		r, ok := a.fn.Cache().Lookup("t", "s4")
		_, gone := a.fn.Cache().Lookup("t", "s1")
		return ok && r.Session.Node == "b" && r.Alive && r.Node.Addr == "http://b" && !gone
	})
	registrytest.Eventually(t, 3*time.Second, "free capacity published", func() bool {
		for _, n := range b.fn.Cache().Nodes() {
			if n.Name == "b" {
				return n.Free == 7
			}
		}
		return false
	})
}

// TestLastSlotRace: 12 creates for a tenant's last slot, spread over three
// nodes: exactly one wins, and only it has a sandbox.
func TestLastSlotRace(t *testing.T) {
	f := newFleet(t, 1)
	nodes := []*node{f.start("a", nil, nil), f.start("b", nil, nil), f.start("c", nil, nil)}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			err := nodes[i%3].create("t", fmt.Sprint("s", i))
			if err == nil {
				wins.Add(1)
			} else if !errdefs.Is(err, errdefs.ErrResourceExhausted) {
				t.Errorf("create %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	local := 0
	for _, n := range nodes {
		local += count(n.local)
	}
	if wins.Load() != 1 || local != 1 {
		t.Fatalf("%d creates won, %d sessions exist; want 1 and 1", wins.Load(), local)
	}
}

// TestNodeLostAndFenced: a node dies; after its TTL its sessions' routes
// say not alive, after the grace they are lost and their quota is back; a
// restart after that deletes them (fencing).
func TestNodeLostAndFenced(t *testing.T) {
	f := newFleet(t, 2)
	a, b := f.start("a", nil, nil), f.start("b", nil, nil)
	for _, id := range []string{"s1", "s2"} {
		if err := a.create("t", id); err != nil {
			t.Fatal(err)
		}
	}
	local, rt := a.local, a.rt
	died := time.Now()
	a.die(t)
	registrytest.Eventually(t, 3*time.Second, "b sees a dead", func() bool {
		r, ok := b.fn.Cache().Lookup("t", "s1")
		return ok && !r.Alive
	})
	t.Logf("route marked dead after %v (TTL 1 s)", time.Since(died).Round(time.Millisecond))
	if d := time.Since(died); d > 2*time.Second {
		t.Fatalf("dead after %v, want within TTL + 1 s", d)
	}
	registrytest.Eventually(t, 6*time.Second, "sessions lost", func() bool {
		r, ok := b.fn.Cache().Lookup("t", "s2")
		return ok && r.Session.State == registry.Lost
	})
	t.Logf("sessions lost after %v (TTL 1 s + grace 1 s)", time.Since(died).Round(time.Millisecond))
	if err := b.create("t", "s3"); err != nil {
		t.Fatalf("create with the lost sessions' quota: %v", err)
	}
	if err := b.create("t", "s1"); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Fatalf("reusing a lost id = %v, want conflict (the id stays told as lost)", err)
	}
	// a comes back with its sandboxes: it kills what the fleet gave away.
	a2 := f.start("a", local, rt)
	if got := count(local); got != 0 {
		t.Fatalf("a kept %d sessions after returning past its grace, want none (fenced)", got)
	}
	if len(a2.m.List(bg, "")) != 0 {
		t.Fatal("a's manager still lists sessions")
	}
	// Fencing keeps the lost record: clients are still told "lost".
	if r, err := a2.reg.GetSession(bg, "t", "s2"); err != nil || r.State != registry.Lost {
		t.Fatalf("record of s2 after fencing = %+v, %v; want lost", r, err)
	}
}

// TestNodeReturnsWithinGrace: a node that returns before its grace ends
// keeps its sessions.
func TestNodeReturnsWithinGrace(t *testing.T) {
	f := newFleet(t, 0)
	a := f.start("a", nil, nil)
	if err := a.create("t", "s1"); err != nil {
		t.Fatal(err)
	}
	f.start("b", nil, nil) // the reaper
	local, rt := a.local, a.rt
	a.die(t)
	a2 := f.start("a", local, rt)
	if got := count(local); got != 1 {
		t.Fatalf("a holds %d sessions after a quick return, want its session", got)
	}
	if _, err := a2.m.Get(bg, "t", "s1"); err != nil {
		t.Fatalf("Get after return: %v", err)
	}
	r, err := a2.reg.GetSession(bg, "t", "s1")
	if err != nil || r.State != registry.Live || r.Node != "a" {
		t.Fatalf("record = %+v, %v; want live on a", r, err)
	}
}

// TestUnregisteredNodeRefusesCreates: a node cut off from the registry
// takes no sessions but keeps what it has.
func TestUnregisteredNodeRefusesCreates(t *testing.T) {
	f := newFleet(t, 0)
	a := f.start("a", nil, nil)
	if err := a.create("t", "s1"); err != nil {
		t.Fatal(err)
	}
	a.reg.Close() // cut off
	registrytest.Eventually(t, 3*time.Second, "a unregistered", func() bool { return !a.fn.Registered() })
	if err := a.create("t", "s2"); !errdefs.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("create while cut off = %v, want unavailable", err)
	}
	if _, err := a.m.Get(bg, "t", "s1"); err != nil {
		t.Fatalf("existing session while cut off: %v", err)
	}
	// A delete while cut off goes through locally; the record's removal
	// waits for the registry.
	if err := a.m.Delete(bg, "t", "s1"); err != nil {
		t.Fatal(err)
	}
	if a.fn.Pending() != 1 {
		t.Fatalf("Pending = %d, want 1", a.fn.Pending())
	}
}

// count returns how many session records a node's local store holds.
func count(s *sessiontest.Store) int {
	all, err := s.ListSessions(bg, "")
	if err != nil {
		panic(err)
	}
	return len(all)
}
