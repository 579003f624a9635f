// Package registrytest is the conformance suite of the fleet registry:
// every implementation of registry.Registry runs Run against a store of its
// own, so routing and placement can rely on the same behaviour from each.
package registrytest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/fleet/registry"
)

// Run runs the suite. open returns a registry on a store that is empty
// under the registry's keys (each call may share the store with earlier
// ones if its keys do not overlap, e.g. under a fresh prefix).
func Run(t *testing.T, open func(t *testing.T) registry.Registry) {
	t.Run("Membership", func(t *testing.T) { testMembership(t, open(t)) })
	t.Run("Drain", func(t *testing.T) { testDrain(t, open(t)) })
	t.Run("SessionCAS", func(t *testing.T) { testSessionCAS(t, open(t)) })
	t.Run("LastQuotaSlot", func(t *testing.T) { testLastQuotaSlot(t, open(t)) })
	t.Run("MarkLost", func(t *testing.T) { testMarkLost(t, open(t)) })
	t.Run("Watch", func(t *testing.T) { testWatch(t, open(t)) })
	t.Run("Elect", func(t *testing.T) { testElect(t, open(t)) })
	t.Run("Secret", func(t *testing.T) { testSecret(t, open(t)) })
	t.Run("Objects", func(t *testing.T) { testObjects(t, open(t)) })
	t.Run("ResourceQuota", func(t *testing.T) { testResourceQuota(t, open(t)) })
	t.Run("Moving", func(t *testing.T) { testMoving(t, open(t)) })
}

// testMoving: a record marked Moving keeps its quota slot, refuses other
// creates of its id (retry) and is taken over by the create that continues
// the move, on another node or on its own; delete and MarkLost give its
// quota back.
func testMoving(t *testing.T, r registry.Registry) {
	ctx := context.Background()
	q := registry.Quota{MaxSessions: 1, MaxMemoryMB: 1024}
	usage := func(want registry.Usage) {
		t.Helper()
		if u, err := r.UsageOf(ctx, "mv"); err != nil || u != want {
			t.Fatalf("usage = %+v, %v; want %+v", u, err, want)
		}
	}
	state := func(id, node, st string) {
		t.Helper()
		if s, err := r.GetSession(ctx, "mv", id); err != nil || s.Node != node || s.State != st {
			t.Fatalf("record of %s = %+v, %v; want %s on %s", id, s, err, st, node)
		}
		if ss, err := r.NodeSessions(ctx, node); err != nil || len(ss) != 1 || ss[0].ID != id {
			t.Fatalf("NodeSessions(%s) = %+v, %v; want %s", node, ss, err, id)
		}
	}
	if err := r.CreateSession(ctx, registry.Session{Tenant: "mv", ID: "m1", Node: "a", MemoryMB: 512}, q); err != nil {
		t.Fatal(err)
	}
	if err := r.MarkMoving(ctx, "mv", "m1", "b", true); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Fatalf("MarkMoving by another node = %v, want conflict", err)
	}
	if err := r.MarkMoving(ctx, "mv", "nope", "a", true); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("MarkMoving of no record = %v, want not_found", err)
	}
	for range 2 { // a second mark changes nothing
		if err := r.MarkMoving(ctx, "mv", "m1", "a", true); err != nil {
			t.Fatal(err)
		}
	}
	state("m1", "a", registry.Moving)
	usage(registry.Usage{Sessions: 1, MemoryMB: 512})
	for _, c := range []struct {
		s    registry.Session
		want *errdefs.Class
	}{
		{registry.Session{Tenant: "mv", ID: "m1", Node: "b", MemoryMB: 512}, errdefs.ErrUnavailable},                        // not the move's create: retry
		{registry.Session{Tenant: "mv", ID: "m2", Node: "b"}, errdefs.ErrResourceExhausted},                                 // the slot is held
		{registry.Session{Tenant: "mv", ID: "m1", Node: "b", MovedFrom: "c"}, errdefs.ErrUnavailable},                       // not from there: as any create
		{registry.Session{Tenant: "mv", ID: "m1", Node: "b", MovedFrom: "a", MemoryMB: 2048}, errdefs.ErrResourceExhausted}, // grows past the quota
	} {
		if err := r.CreateSession(ctx, c.s, q); !errdefs.Is(err, c.want) {
			t.Fatalf("CreateSession(%+v) = %v, want %v", c.s, err, c.want)
		}
	}
	// The move's create takes the record and its slot over.
	if err := r.CreateSession(ctx, registry.Session{Tenant: "mv", ID: "m1", Node: "b", MovedFrom: "a", MemoryMB: 256}, q); err != nil {
		t.Fatal(err)
	}
	state("m1", "b", registry.Live)
	if ss, _ := r.NodeSessions(ctx, "a"); len(ss) != 0 {
		t.Fatalf("NodeSessions(a) after the move = %+v, want none", ss)
	}
	usage(registry.Usage{Sessions: 1, MemoryMB: 256})
	// Moving back to Live; a move that ends where it began.
	if err := r.MarkMoving(ctx, "mv", "m1", "b", true); err != nil {
		t.Fatal(err)
	}
	if err := r.MarkMoving(ctx, "mv", "m1", "b", false); err != nil {
		t.Fatal(err)
	}
	state("m1", "b", registry.Live)
	if err := r.MarkMoving(ctx, "mv", "m1", "b", true); err != nil {
		t.Fatal(err)
	}
	if err := r.CreateSession(ctx, registry.Session{Tenant: "mv", ID: "m1", Node: "b", MovedFrom: "b", MemoryMB: 256}, q); err != nil {
		t.Fatal(err)
	}
	state("m1", "b", registry.Live)
	usage(registry.Usage{Sessions: 1, MemoryMB: 256})
	// A Moving record's quota comes back with its delete, and with
	// MarkLost.
	if err := r.MarkMoving(ctx, "mv", "m1", "b", true); err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteSession(ctx, "mv", "m1", "b"); err != nil {
		t.Fatal(err)
	}
	usage(registry.Usage{})
	if err := r.CreateSession(ctx, registry.Session{Tenant: "mv", ID: "m3", Node: "dead", MemoryMB: 100}, q); err != nil {
		t.Fatal(err)
	}
	if err := r.MarkMoving(ctx, "mv", "m3", "dead", true); err != nil {
		t.Fatal(err)
	}
	if n, err := r.MarkLost(ctx, "dead"); err != nil || n != 1 {
		t.Fatalf("MarkLost of a moving session = %d, %v; want 1", n, err)
	}
	state("m3", "dead", registry.Lost)
	usage(registry.Usage{})
}

// testResourceQuota: memory and CPUs are counted with the session record
// and refused past the quota, given back by a delete and by MarkLost.
func testResourceQuota(t *testing.T, r registry.Registry) {
	ctx := context.Background()
	q := registry.Quota{MaxMemoryMB: 1024, MaxMilliCPUs: 1500}
	mk := func(id, node string, mem, mcpu int64) error {
		return r.CreateSession(ctx, registry.Session{Tenant: "rq", ID: id, Node: node, MemoryMB: mem, MilliCPUs: mcpu}, q)
	}
	if err := mk("a", "n1", 512, 500); err != nil {
		t.Fatal(err)
	}
	if err := mk("b", "n2", 512, 500); err != nil {
		t.Fatal(err)
	}
	if err := mk("c", "n3", 1, 0); !errdefs.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("a session past max_memory_mb = %v, want resource_exhausted", err)
	}
	u, err := r.UsageOf(ctx, "rq")
	if err != nil || u != (registry.Usage{Sessions: 2, MemoryMB: 1024, MilliCPUs: 1000}) {
		t.Fatalf("usage = %+v, %v", u, err)
	}
	if err := r.DeleteSession(ctx, "rq", "b", "n2"); err != nil {
		t.Fatal(err)
	}
	if err := mk("c", "n3", 256, 1001); !errdefs.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("a session past max_cpus = %v, want resource_exhausted", err)
	}
	if err := mk("c", "n3", 256, 1000); err != nil {
		t.Fatalf("a session at max_cpus: %v", err)
	}
	// n3 has no entry (never joined): its session is lost and gives its
	// share back.
	if n, err := r.MarkLost(ctx, "n3"); err != nil || n != 1 {
		t.Fatalf("MarkLost(n3) = %d, %v", n, err)
	}
	if u, err := r.UsageOf(ctx, "rq"); err != nil || u != (registry.Usage{Sessions: 1, MemoryMB: 512, MilliCPUs: 500}) {
		t.Fatalf("usage after MarkLost = %+v, %v", u, err)
	}
}

// testObjects: create-only and compare-on-revision writes, reads, the
// snapshot and the watch of objects, names that need escaping.
func testObjects(t *testing.T, r registry.Registry) {
	ctx := context.Background()
	snap, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := r.Watch(ctx, snap.Rev)
	o := registry.Object{Kind: "keys", Name: "a/b", Value: []byte("one")}
	rev, err := r.PutObject(ctx, o, 0)
	if err != nil || rev <= snap.Rev {
		t.Fatalf("create = %d, %v", rev, err)
	}
	if _, err := r.PutObject(ctx, o, 0); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Fatalf("create again = %v, want conflict", err)
	}
	got, err := r.GetObject(ctx, "keys", "a/b")
	if err != nil || string(got.Value) != "one" || got.Rev != rev || got.Kind != "keys" || got.Name != "a/b" {
		t.Fatalf("get = %+v, %v", got, err)
	}
	if _, err := r.GetObject(ctx, "keys", "a"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("get of a missing object = %v, want not found", err)
	}
	o.Value = []byte("two")
	if _, err := r.PutObject(ctx, o, rev-1); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Fatalf("put at a stale revision = %v, want conflict", err)
	}
	rev2, err := r.PutObject(ctx, o, rev)
	if err != nil {
		t.Fatal(err)
	}
	snap, err = r.Snapshot(ctx)
	if err != nil || len(snap.Objects) != 1 || string(snap.Objects[0].Value) != "two" || snap.Objects[0].Rev != rev2 {
		t.Fatalf("snapshot objects = %+v, %v", snap.Objects, err)
	}
	if err := r.DeleteObject(ctx, "keys", "a/b"); err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteObject(ctx, "keys", "a/b"); err != nil {
		t.Fatalf("delete of a missing object = %v", err)
	}
	var seen []string
	for len(seen) < 3 {
		select {
		case e := <-ch:
			if e.Object == nil || e.Object.Kind != "keys" || e.Object.Name != "a/b" {
				t.Fatalf("event %+v", e)
			}
			seen = append(seen, fmt.Sprintf("%s:%v", e.Object.Value, e.Deleted))
		case <-time.After(5 * time.Second):
			t.Fatalf("watch brought %v", seen)
		}
	}
	if want := "[one:false two:false :true]"; fmt.Sprint(seen) != want {
		t.Fatalf("watch = %v, want %s", seen, want)
	}
}

// Eventually polls cond every 20 ms until it holds or d passed.
func Eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func join(t *testing.T, r registry.Registry, name string, ttl time.Duration) registry.Membership {
	t.Helper()
	m, err := r.Join(context.Background(), registry.Node{Name: name, Addr: "http://" + name, Capacity: 10, Free: 10, Started: time.Now()}, ttl)
	if err != nil {
		t.Fatalf("Join(%s): %v", name, err)
	}
	t.Cleanup(func() { m.Close() })
	Eventually(t, 5*time.Second, name+" registered", m.Registered)
	return m
}

func nodeNames(t *testing.T, r registry.Registry) []string {
	t.Helper()
	nodes, err := r.Nodes(context.Background())
	if err != nil {
		t.Fatalf("Nodes: %v", err)
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	return names
}

func testMembership(t *testing.T, r registry.Registry) {
	ctx := context.Background()
	a := join(t, r, "a", 2*time.Second)
	join(t, r, "b", 2*time.Second)
	if got := fmt.Sprint(nodeNames(t, r)); got != "[a b]" {
		t.Fatalf("Nodes = %s, want [a b]", got)
	}
	if err := a.Update(ctx, registry.Node{Addr: "http://a2", Capacity: 10, Free: 3}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	Eventually(t, 3*time.Second, "update visible", func() bool {
		nodes, _ := r.Nodes(ctx)
		return len(nodes) > 0 && nodes[0].Free == 3 && nodes[0].Addr == "http://a2" && nodes[0].Name == "a"
	})
	// Renewal keeps the entry past its TTL.
	time.Sleep(3 * time.Second)
	if got := fmt.Sprint(nodeNames(t, r)); got != "[a b]" {
		t.Fatalf("after 1.5 TTL: Nodes = %s, want [a b]", got)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := fmt.Sprint(nodeNames(t, r)); got != "[b]" {
		t.Fatalf("after Close: Nodes = %s, want [b] (a closed membership leaves at once)", got)
	}
	if _, err := r.Join(ctx, registry.Node{Name: "x/y"}, time.Second); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("Join(x/y) = %v, want invalid_argument", err)
	}
}

func testDrain(t *testing.T, r registry.Registry) {
	ctx, cancel := context.WithCancel(context.Background()) // ends the watch
	defer cancel()
	join(t, r, "a", 2*time.Second)
	if err := r.Drain(ctx, "a", true); err != nil {
		t.Fatal(err)
	}
	nodes, err := r.Nodes(ctx)
	if err != nil || len(nodes) != 1 || !nodes[0].Draining {
		t.Fatalf("Nodes = %+v, %v; want a draining", nodes, err)
	}
	snap, err := r.Snapshot(ctx)
	if err != nil || fmt.Sprint(snap.Draining) != "[a]" {
		t.Fatalf("Snapshot.Draining = %v, %v; want [a]", snap.Draining, err)
	}
	if nodes[0].Moving || len(snap.Moving) != 0 {
		t.Fatalf("Drain(true) marked a moving: %+v, %v", nodes[0], snap.Moving)
	}
	// DrainMove: draining and moving, in Nodes, Snapshot and Watch; a
	// mark of a node without an entry counts too.
	ch := r.Watch(ctx, snap.Rev)
	for _, n := range []string{"a", "gone"} {
		if err := r.DrainMove(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	nodes, err = r.Nodes(ctx)
	if err != nil || len(nodes) != 1 || !nodes[0].Draining || !nodes[0].Moving {
		t.Fatalf("Nodes after DrainMove = %+v, %v; want a draining and moving", nodes, err)
	}
	snap, err = r.Snapshot(ctx)
	if err != nil || fmt.Sprint(snap.Draining, snap.Moving) != "[a gone] [a gone]" {
		t.Fatalf("Snapshot after DrainMove: Draining %v, Moving %v, %v; want [a gone] both", snap.Draining, snap.Moving, err)
	}
	// Drain(true) over a move mark leaves it draining only.
	if err := r.Drain(ctx, "gone", true); err != nil {
		t.Fatal(err)
	}
	if snap, err = r.Snapshot(ctx); err != nil || fmt.Sprint(snap.Draining, snap.Moving) != "[a gone] [a]" {
		t.Fatalf("Snapshot after Drain(gone): Draining %v, Moving %v, %v; want [a gone] [a]", snap.Draining, snap.Moving, err)
	}
	for _, n := range []string{"a", "gone"} {
		if err := r.Drain(ctx, n, false); err != nil {
			t.Fatal(err)
		}
	}
	if nodes, _ := r.Nodes(ctx); nodes[0].Draining || nodes[0].Moving {
		t.Fatalf("still draining after Drain(false): %+v", nodes[0])
	}
	want := []string{"a move", "gone move", "gone", "-a", "-gone"}
	var got []string
	timeout := time.After(5 * time.Second)
	for len(got) < len(want) {
		select {
		case e := <-ch:
			switch {
			case e.Drain == "":
			case e.Deleted:
				got = append(got, "-"+e.Drain)
			case e.Move:
				got = append(got, e.Drain+" move")
			default:
				got = append(got, e.Drain)
			}
		case <-timeout:
			t.Fatalf("drain events %v, want %v", got, want)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("drain events %v, want %v", got, want)
	}
}

func testSessionCAS(t *testing.T, r registry.Registry) {
	ctx := context.Background()
	s := registry.Session{Tenant: "t1", ID: "s1", Node: "a"}
	if err := r.CreateSession(ctx, s, registry.Quota{}); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	// The same id of the same tenant, from any node, is a conflict.
	for _, node := range []string{"a", "b"} {
		if err := r.CreateSession(ctx, registry.Session{Tenant: "t1", ID: "s1", Node: node}, registry.Quota{}); !errdefs.Is(err, errdefs.ErrConflict) {
			t.Fatalf("CreateSession(t1/s1 again on %s) = %v, want conflict", node, err)
		}
	}
	// Another tenant may use the id; a tenant with a slash stays apart.
	for _, tenant := range []string{"t2", "t1/s1", "t1%2Fs1"} {
		if err := r.CreateSession(ctx, registry.Session{Tenant: tenant, ID: "s1", Node: "b"}, registry.Quota{}); err != nil {
			t.Fatalf("CreateSession(%s/s1): %v", tenant, err)
		}
	}
	got, err := r.GetSession(ctx, "t1", "s1")
	if err != nil || got.Node != "a" || got.State != registry.Live || got.Created.IsZero() {
		t.Fatalf("GetSession = %+v, %v; want live on a", got, err)
	}
	if _, err := r.GetSession(ctx, "t1", "nope"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("GetSession(nope) = %v, want not_found", err)
	}
	if n, err := r.Usage(ctx, "t1"); err != nil || n != 1 {
		t.Fatalf("Usage(t1) = %d, %v; want 1", n, err)
	}
	if err := r.DeleteSession(ctx, "t1", "s1", "b"); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Fatalf("DeleteSession by the wrong node = %v, want conflict", err)
	}
	if err := r.DeleteSession(ctx, "t1", "s1", "a"); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	if err := r.DeleteSession(ctx, "t1", "s1", "a"); err != nil {
		t.Fatalf("DeleteSession again: %v, want nil", err)
	}
	if n, _ := r.Usage(ctx, "t1"); n != 0 {
		t.Fatalf("Usage(t1) after delete = %d, want 0", n)
	}
	list, err := r.NodeSessions(ctx, "b")
	if err != nil || len(list) != 3 {
		t.Fatalf("NodeSessions(b) = %+v, %v; want 3", list, err)
	}
	if list, _ := r.NodeSessions(ctx, "a"); len(list) != 0 {
		t.Fatalf("NodeSessions(a) = %+v, want none", list)
	}
}

// testLastQuotaSlot: 16 concurrent creates for a tenant's last slot, from
// "several nodes": exactly one wins, the rest are resource_exhausted.
func testLastQuotaSlot(t *testing.T, r registry.Registry) {
	ctx := context.Background()
	for i := range 4 {
		if err := r.CreateSession(ctx, registry.Session{Tenant: "q", ID: fmt.Sprint("pre", i), Node: "a"}, registry.Quota{MaxSessions: 5}); err != nil {
			t.Fatal(err)
		}
	}
	var wins, exhausted atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			err := r.CreateSession(ctx, registry.Session{Tenant: "q", ID: fmt.Sprint("race", i), Node: fmt.Sprint("n", i%3)}, registry.Quota{MaxSessions: 5})
			switch {
			case err == nil:
				wins.Add(1)
			case errdefs.Is(err, errdefs.ErrResourceExhausted):
				exhausted.Add(1)
			default:
				t.Errorf("CreateSession(race%d) = %v", i, err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 || exhausted.Load() != 15 {
		t.Fatalf("wins %d, exhausted %d; want 1 and 15", wins.Load(), exhausted.Load())
	}
	if n, _ := r.Usage(ctx, "q"); n != 5 {
		t.Fatalf("Usage = %d, want 5", n)
	}
	// 16 concurrent creates of one id: one wins, the others conflict.
	wins.Store(0)
	for i := range 16 {
		wg.Go(func() {
			err := r.CreateSession(ctx, registry.Session{Tenant: "q2", ID: "same", Node: fmt.Sprint("n", i%3)}, registry.Quota{})
			if err == nil {
				wins.Add(1)
			} else if !errdefs.Is(err, errdefs.ErrConflict) {
				t.Errorf("CreateSession(same) = %v", err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d creates of one id won, want 1", wins.Load())
	}
	if n, _ := r.Usage(ctx, "q2"); n != 1 {
		t.Fatalf("Usage(q2) = %d, want 1", n)
	}
}

func testMarkLost(t *testing.T, r registry.Registry) {
	ctx := context.Background()
	alive := join(t, r, "alive", 2*time.Second)
	_ = alive
	for _, s := range []registry.Session{{Tenant: "t", ID: "d1", Node: "dead"}, {Tenant: "t", ID: "d2", Node: "dead"}, {Tenant: "t", ID: "a1", Node: "alive"}} {
		if err := r.CreateSession(ctx, s, registry.Quota{}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := r.MarkLost(ctx, "alive"); err != nil || n != 0 {
		t.Fatalf("MarkLost(alive) = %d, %v; want 0 (a live node keeps its sessions)", n, err)
	}
	n, err := r.MarkLost(ctx, "dead")
	if err != nil || n != 2 {
		t.Fatalf("MarkLost(dead) = %d, %v; want 2", n, err)
	}
	s, err := r.GetSession(ctx, "t", "d1")
	if err != nil || s.State != registry.Lost || s.LostAt.IsZero() {
		t.Fatalf("GetSession(d1) = %+v, %v; want lost", s, err)
	}
	if u, _ := r.Usage(ctx, "t"); u != 1 {
		t.Fatalf("Usage after MarkLost = %d, want 1 (the lost sessions' quota back)", u)
	}
	if n, _ := r.MarkLost(ctx, "dead"); n != 0 {
		t.Fatalf("MarkLost again = %d, want 0", n)
	}
	// The id stays taken until the lost record is deleted; deleting it
	// gives no quota back twice.
	if err := r.CreateSession(ctx, registry.Session{Tenant: "t", ID: "d1", Node: "alive"}, registry.Quota{}); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Fatalf("CreateSession(lost id) = %v, want conflict", err)
	}
	if err := r.DeleteSession(ctx, "t", "d1", "dead"); err != nil {
		t.Fatal(err)
	}
	if u, _ := r.Usage(ctx, "t"); u != 1 {
		t.Fatalf("Usage after deleting a lost record = %d, want 1", u)
	}
}

func testWatch(t *testing.T, r registry.Registry) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snap, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := r.Watch(ctx, snap.Rev)
	m := join(t, r, "w", 2*time.Second)
	if err := r.CreateSession(ctx, registry.Session{Tenant: "t", ID: "w1", Node: "w"}, registry.Quota{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Drain(ctx, "w", true); err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteSession(ctx, "t", "w1", "w"); err != nil {
		t.Fatal(err)
	}
	m.Close()
	want := []string{"node w", "session t/w1 w live", "drain w", "-session t/w1", "-node w"}
	var got []string
	timeout := time.After(5 * time.Second)
	for len(got) < len(want) {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed after %v", got)
			}
			if e.Rev <= snap.Rev {
				t.Errorf("event at rev %d, not after the snapshot's %d", e.Rev, snap.Rev)
			}
			pre := ""
			if e.Deleted {
				pre = "-"
			}
			switch {
			case e.Node != nil:
				got = append(got, pre+"node "+e.Node.Name)
			case e.Session != nil && e.Deleted:
				got = append(got, pre+"session "+e.Session.Tenant+"/"+e.Session.ID)
			case e.Session != nil:
				got = append(got, "session "+e.Session.Tenant+"/"+e.Session.ID+" "+e.Session.Node+" "+e.Session.State)
			case e.Drain != "":
				got = append(got, pre+"drain "+e.Drain)
			}
		case <-timeout:
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

func testElect(t *testing.T, r registry.Registry) {
	ctx := context.Background()
	l1, err := r.Elect(ctx, "reaper", "one")
	if err != nil {
		t.Fatal(err)
	}
	won := make(chan registry.Leadership, 1)
	go func() {
		l2, err := r.Elect(ctx, "reaper", "two")
		if err != nil {
			t.Error(err)
			close(won)
			return
		}
		won <- l2
	}()
	select {
	case <-won:
		t.Fatal("a second leader while the first leads")
	case <-time.After(300 * time.Millisecond):
	}
	if err := l1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l2 := <-won:
		if l2 == nil {
			t.FailNow()
		}
		l2.Resign(ctx)
	case <-time.After(5 * time.Second):
		t.Fatal("the second candidate did not lead after the first resigned")
	}
	// A campaign that gives up returns with its context.
	l3, err := r.Elect(ctx, "other", "x")
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Resign(ctx)
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := r.Elect(cctx, "other", "y"); err == nil {
		t.Fatal("Elect while another leads returned without error after its context ended")
	}
}

// testSecret: concurrent first asks agree on one secret of 32 bytes.
func testSecret(t *testing.T, r registry.Registry) {
	var wg sync.WaitGroup
	got := make([][]byte, 8)
	for i := range got {
		wg.Go(func() {
			s, err := r.Secret(context.Background())
			if err != nil {
				t.Errorf("Secret: %v", err)
			}
			got[i] = s
		})
	}
	wg.Wait()
	for _, s := range got {
		if len(s) != 32 || string(s) != string(got[0]) {
			t.Fatalf("secrets %x, want one of 32 bytes", got)
		}
	}
}
