package fleet_test

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/fleet/registrytest"
	"github.com/warrenhq/warren/internal/store"
)

// TestAuthStore: a node brings its local keys and tenants into the fleet
// once; keys and settings written through one node are read on another at
// once; a change reaches the other node's caches through the watch; a
// tenant deleted in the fleet does not come back from a node's old local
// record at its next start.
func TestAuthStore(t *testing.T) {
	f := newFleet(t, 0)
	a, b := f.start("a", nil, nil), f.start("b", nil, nil)
	defer a.stop()
	defer b.stop()
	local, err := store.Open(filepath.Join(t.TempDir(), "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	plain, k, hash, err := auth.GenerateKey("t1", "old", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := local.CreateKey(bg, k, hash); err != nil {
		t.Fatal(err)
	}
	if err := local.PutTenant(bg, &auth.Tenant{Name: "t1", Quota: auth.Quota{MaxSessions: 7}, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "fleet-imported")
	as, bs := a.fn.AuthStore(local), b.fn.AuthStore(nil)
	// Before the import, a's own key works on a (its local store), not
	// yet on b.
	if got, _, err := as.GetKey(bg, k.ID); err != nil || got.ID != k.ID {
		t.Fatalf("a's own key on a before the import = %v, %v", got, err)
	}
	if _, _, err := bs.GetKey(bg, k.ID); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a's key on b before the import = %v, want not_found", err)
	}
	if err := as.Import(bg, marker); err != nil {
		t.Fatal(err)
	}
	got, gotHash, err := bs.GetKey(bg, k.ID)
	if err != nil || got.Tenant != "t1" || !got.Admin || string(gotHash) != string(auth.HashSecret(plain[len(plain)-auth.KeySecretLen:])) {
		t.Fatalf("a's key on b after the import = %+v, %v", got, err)
	}
	if tn, err := bs.GetTenant(bg, "t1"); err != nil || tn.Quota.MaxSessions != 7 {
		t.Fatalf("a's tenant on b = %+v, %v", tn, err)
	}
	// b hears of a revocation made through a.
	var mu sync.Mutex
	heard := map[string]bool{}
	b.fn.OnAuthChange(func(id string) { mu.Lock(); heard["key "+id] = true; mu.Unlock() },
		func(name string) { mu.Lock(); heard["tenant "+name] = true; mu.Unlock() })
	if err := as.RevokeKey(bg, k.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	registrytest.Eventually(t, 3*time.Second, "b hears of the revocation", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return heard["key "+k.ID]
	})
	if got, _, err := bs.GetKey(bg, k.ID); err != nil || got.RevokedAt == nil {
		t.Fatalf("the key on b after its revocation on a = %+v, %v", got, err)
	}
	keys, err := bs.ListKeys(bg, "t1")
	if err != nil || len(keys) != 1 {
		t.Fatalf("t1's keys on b = %v, %v", keys, err)
	}
	// A tenant deleted through b stays deleted when a imports again (its
	// next start): the marker says this fleet has a's records.
	if err := bs.DeleteTenant(bg, "t1"); err != nil {
		t.Fatal(err)
	}
	registrytest.Eventually(t, 3*time.Second, "b hears of the delete", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return heard["tenant t1"]
	})
	if err := a.fn.AuthStore(local).Import(bg, marker); err != nil {
		t.Fatal(err)
	}
	if _, err := bs.GetTenant(bg, "t1"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("t1 after a's second import = %v, want not_found", err)
	}
	if err := bs.DeleteTenant(bg, "t1"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("delete of a missing tenant = %v, want not_found", err)
	}
	if err := bs.PutTenant(bg, &auth.Tenant{Name: "Bad Name"}); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("put of an invalid tenant = %v, want invalid_argument", err)
	}
}

// TestLookupID: a session known only by its id (an E2B access token names
// no tenant) is found through the id index: a record of the asking node
// first, another node's otherwise; a delete takes it out of the index.
func TestLookupID(t *testing.T) {
	f := newFleet(t, 0)
	a, b, c := f.start("a", nil, nil), f.start("b", nil, nil), f.start("c", nil, nil)
	defer a.stop()
	defer b.stop()
	defer c.stop()
	if err := a.create("t1", "x"); err != nil {
		t.Fatal(err)
	}
	if err := b.create("t2", "x"); err != nil {
		t.Fatal(err)
	}
	registrytest.Eventually(t, 3*time.Second, "every cache has both records", func() bool {
		for _, n := range []*node{a, b, c} {
			_, ok1 := n.fn.Cache().Lookup("t1", "x")
			_, ok2 := n.fn.Cache().Lookup("t2", "x")
			if !ok1 || !ok2 {
				return false
			}
		}
		return true
	})
	for _, n := range []*node{a, b} {
		if r, ok := n.fn.Cache().LookupID("x", n.name); !ok || r.Session.Node != n.name {
			t.Fatalf("LookupID(x) on %s = %+v, %v; want its own record", n.name, r, ok)
		}
	}
	if r, ok := c.fn.Cache().LookupID("x", "c"); !ok || !r.Alive || (r.Session.Node != "a" && r.Session.Node != "b") {
		t.Fatalf("LookupID(x) on c = %+v, %v", r, ok)
	}
	if _, ok := c.fn.Cache().LookupID("y", "c"); ok {
		t.Fatal("LookupID of an unknown id found one")
	}
	if err := a.m.Delete(bg, "t1", "x"); err != nil {
		t.Fatal(err)
	}
	registrytest.Eventually(t, 3*time.Second, "c routes x to b alone", func() bool {
		r, ok := c.fn.Cache().LookupID("x", "c")
		_, gone := c.fn.Cache().Lookup("t1", "x")
		return ok && r.Session.Node == "b" && !gone
	})
}
