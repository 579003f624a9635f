package fleet

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestFleetStaleRoute: a node whose routes are stale (cut off from etcd
// while a session went from n0 to n2) forwards to the old owner, which
// answers 421; the forwarder retries once after waiting for its watch and,
// with the route still stale, answers 503 saying so (retryable, never a
// wrong session). Once its watch is back the same request reaches the new
// owner. A node cut off from etcd stops on SIGTERM at once.
func TestFleetStaleRoute(t *testing.T) {
	testutil.RequiresRoot(t)
	cut, nodes, reg := newCuttableFleet(t, 3, 1)
	n0, n1, n2 := nodes[0], nodes[1], nodes[2]
	const id = "st1"
	owner := func() string {
		t.Helper()
		r, err := reg.GetSession(bg, daemon.BootstrapTenant, id)
		if err != nil {
			t.Fatal(err)
		}
		return r.Node
	}
	// place creates through via until the session lands on want (or, with
	// not, anywhere else).
	place := func(via *node, want string, not bool) {
		t.Helper()
		for i := 0; ; i++ {
			if _, err := via.c.CreateSession(bg, &api.CreateSessionRequest{ID: id}); err != nil {
				t.Fatal(err)
			}
			if o := owner(); (o == want) != not {
				return
			}
			if err := via.c.DeleteSession(bg, id); err != nil {
				t.Fatal(err)
			}
			if i > 20 {
				t.Fatalf("placement never put %s where wanted", id)
			}
		}
	}
	hostname := func(via *node) (string, error) {
		res, err := via.c.Exec(bg, id, &api.ExecRequest{Command: "hostname"})
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(res.Stdout), nil
	}
	place(n0, n0.name, false)
	t.Cleanup(func() { _ = n0.c.DeleteSession(bg, id) })
	eventually(t, 3*time.Second, "n1 reaches "+id+" on n0", func() bool { h, err := hostname(n1); return err == nil && h == id })

	cut.set(true) // n1's routes freeze
	// Once n1's entry is gone placement skips it (it could not record a
	// session now).
	eventually(t, ttl+2*time.Second, "n1 gone from the registry", func() bool {
		ns, err := reg.Nodes(bg)
		return err == nil && len(ns) == 2
	})
	if err := n0.c.DeleteSession(bg, id); err != nil {
		t.Fatal(err)
	}
	place(n2, n0.name, true)
	now := owner()
	// n1 still routes to n0, which no longer has it: 421, a retry, then
	// 503 with Retry-After.
	_, err := hostname(n1)
	if status(err) != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "route has not caught up") {
		t.Fatalf("exec through n1 with a stale route = %v, want 503 (the old owner answered 421 twice)", err)
	}
	cut.set(false)
	start := time.Now()
	eventually(t, 15*time.Second, "n1 reaches "+id+" on "+now, func() bool { h, err := hostname(n1); return err == nil && h == id })
	t.Logf("n1's route to %s on %s caught up %v after its etcd came back", id, now, time.Since(start).Round(time.Millisecond))
	// A node cut off from etcd stops at once on SIGTERM: nothing it
	// waits for at shutdown (its reaper's election among them) waits for
	// etcd.
	cut.set(true)
	time.Sleep(500 * time.Millisecond) // its etcd client notices
	start = time.Now()
	n1.stop(t)
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("n1, cut off from etcd, took %v to stop on SIGTERM", took)
	} else {
		t.Logf("n1, cut off from etcd, stopped %v after SIGTERM", took.Round(time.Millisecond))
	}
	cut.set(false)
}
