package etcdreg_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/fleet/etcdmember"
	"github.com/warrenhq/warren/internal/fleet/etcdreg"
	"github.com/warrenhq/warren/internal/fleet/registry"
	"github.com/warrenhq/warren/internal/fleet/registrytest"
)

// cluster is one 3-member etcd shared by the tests that do not stop
// members (sharedCluster); each test gets its own prefix.
var (
	clusterOnce sync.Once
	cluster     *etcdmember.Cluster
	clusterErr  error
	clusterDir  string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "etcdreg")
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

var prefixes atomic.Int32

func open(t *testing.T, c *etcdmember.Cluster) *etcdreg.Registry {
	t.Helper()
	r, err := etcdreg.New(etcdreg.Config{Endpoints: c.Endpoints(), Prefix: fmt.Sprintf("/test%d/", prefixes.Add(1)), ElectionTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestConformance(t *testing.T) {
	registrytest.Run(t, func(t *testing.T) registry.Registry { return open(t, sharedCluster(t)) })
}

// TestNodeDies: a node that stops renewing (its process gone: the client
// closed without revoking) leaves Nodes within its TTL plus a second.
func TestNodeDies(t *testing.T) {
	obs := open(t, sharedCluster(t))
	cfg := etcdreg.Config{Endpoints: cluster.Endpoints(), Prefix: obsPrefix(obs)}
	dying, err := etcdreg.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := dying.Join(context.Background(), registry.Node{Name: "d"}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	registrytest.Eventually(t, 5*time.Second, "registered", m.Registered)
	// Closing the client stops the renewals without revoking the lease,
	// as a kill -9 would.
	dying.Close()
	died := time.Now()
	registrytest.Eventually(t, 4*time.Second, "node d gone", func() bool {
		nodes, err := obs.Nodes(context.Background())
		return err == nil && len(nodes) == 0
	})
	if d := time.Since(died); d > 3*time.Second {
		t.Fatalf("node gone after %v, want within TTL + 1 s", d)
	}
	m.Close()
}

func obsPrefix(r *etcdreg.Registry) string { return r.Prefix() }

// TestLeaderLoss: killing etcd's leader, creates work again within 2 s.
func TestLeaderLoss(t *testing.T) {
	c := ownCluster(t)
	r := open(t, c)
	ctx := context.Background()
	if err := r.CreateSession(ctx, registry.Session{Tenant: "t", ID: "before", Node: "a"}, registry.Quota{}); err != nil {
		t.Fatal(err)
	}
	leader := c.Leader()
	if leader < 0 {
		t.Fatal("no leader")
	}
	c.Stop(leader)
	stopped := time.Now()
	for i := 0; ; i++ {
		err := r.CreateSession(ctx, registry.Session{Tenant: "t", ID: fmt.Sprint("after", i), Node: "a"}, registry.Quota{})
		if err == nil {
			break
		}
		if !errdefs.Is(err, errdefs.ErrUnavailable) {
			t.Fatalf("create during the election = %v, want unavailable", err)
		}
		if time.Since(stopped) > 2*time.Second {
			t.Fatalf("creates still fail %v after the leader died: %v", time.Since(stopped), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("creates resumed %v after the leader died", time.Since(stopped))
}

// TestQuorumLoss: with two of three members gone, calls answer unavailable
// promptly, the membership notices it is no longer registered, and all of
// it comes back with the members.
func TestQuorumLoss(t *testing.T) {
	c := ownCluster(t)
	r := open(t, c)
	ctx := context.Background()
	m, err := r.Join(ctx, registry.Node{Name: "n"}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	registrytest.Eventually(t, 5*time.Second, "registered", m.Registered)
	c.Stop(1)
	c.Stop(2)
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	err = r.CreateSession(cctx, registry.Session{Tenant: "t", ID: "x", Node: "n"}, registry.Quota{})
	cancel()
	if !errdefs.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("create without quorum = %v, want unavailable", err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("create without quorum took %v", d)
	}
	registrytest.Eventually(t, 5*time.Second, "membership notices the lost lease", func() bool { return !m.Registered() })
	for _, i := range []int{1, 2} {
		if err := c.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	registrytest.Eventually(t, 10*time.Second, "registered again", m.Registered)
	if err := r.CreateSession(ctx, registry.Session{Tenant: "t", ID: "x", Node: "n"}, registry.Quota{}); err != nil {
		t.Fatalf("create after recovery: %v", err)
	}
	if nodes, err := r.Nodes(ctx); err != nil || len(nodes) != 1 {
		t.Fatalf("Nodes after recovery = %v, %v", nodes, err)
	}
}

// ownCluster starts a cluster for a test that stops members.
func ownCluster(t *testing.T) *etcdmember.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := etcdmember.StartCluster(ctx, t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestWatchCompacted: a watch from a revision etcd compacted away ends
// (its channel closes) instead of missing changes silently; the routing
// cache then loads a new snapshot.
func TestWatchCompacted(t *testing.T) {
	r := open(t, sharedCluster(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := r.CreateSession(ctx, registry.Session{Tenant: "t", ID: fmt.Sprint("c", i), Node: "a"}, registry.Quota{}); err != nil {
			t.Fatal(err)
		}
	}
	now, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Client().Compact(ctx, now.Rev); err != nil {
		t.Fatal(err)
	}
	n := 0
	for range r.Watch(ctx, snap.Rev) {
		n++
	}
	if ctx.Err() != nil {
		t.Fatal("the watch from a compacted revision did not end")
	}
	if n != 0 {
		t.Fatalf("the watch from a compacted revision sent %d events", n)
	}
}
