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
