package auth

import (
	"testing"
	"time"
)

// TestKeyCache: a key in use is read from the store once per TTL, not per
// request; its revocation and its expiry still take effect at once.
func TestKeyCache(t *testing.T) {
	a, keys, clock := newAuth(t, Config{})
	exp := clock.Now().Add(time.Hour)
	plaintext, _ := mustCreateKey(t, a, "acme", false, &exp)
	auth := func() error {
		_, err := a.Authenticate(t.Context(), req(nil, bearer(plaintext)))
		return err
	}
	keys.mu.Lock()
	keys.gets = 0
	keys.mu.Unlock()
	for range 10 {
		if err := auth(); err != nil {
			t.Fatal(err)
		}
	}
	if keys.gets != 1 {
		t.Errorf("10 requests read the key %d times, want 1", keys.gets)
	}
	clock.Advance(keyCacheTTL)
	if err := auth(); err != nil || keys.gets != 2 {
		t.Errorf("after the TTL: %v, %d reads, want a second read", err, keys.gets)
	}

	// Expiry is checked on the cached record too.
	clock.Advance(time.Hour)
	if err := auth(); err == nil {
		t.Error("expired key accepted from the cache")
	}

	// Revoked while cached: refused at once, and its tokens with it.
	plaintext, k := mustCreateKey(t, a, "acme", false, nil)
	if err := auth(); err != nil {
		t.Fatal(err)
	}
	tok, _ := a.IssueToken(&Identity{Tenant: "acme", KeyID: k.ID, Method: MethodKey}, time.Minute)
	if _, err := a.Authenticate(t.Context(), req(nil, bearer(tok))); err != nil {
		t.Fatal(err)
	}
	if err := a.RevokeKey(t.Context(), "acme", k.ID); err != nil {
		t.Fatal(err)
	}
	if err := auth(); err == nil {
		t.Error("revoked key accepted from the cache")
	}
	if _, err := a.Authenticate(t.Context(), req(nil, bearer(tok))); err == nil {
		t.Error("token of a revoked key accepted from the cache")
	}

	// A revocation that lands while a request is reading the key must not
	// be undone by that request caching what it read before.
	plaintext, k = mustCreateKey(t, a, "acme", false, nil)
	keys.mu.Lock()
	keys.onGet = func() {
		if err := a.RevokeKey(t.Context(), "acme", k.ID); err != nil {
			t.Error(err)
		}
	}
	keys.mu.Unlock()
	if err := auth(); err != nil {
		t.Fatalf("the read before the revocation: %v", err)
	}
	if err := auth(); err == nil {
		t.Error("revocation during a read was undone by the cache")
	}
}
