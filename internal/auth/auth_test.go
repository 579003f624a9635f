package auth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/errdefs"
)

// fakeKeys is an in-memory KeyStore for testing the Authenticator above
// storage; store.SQLite is tested against the real thing in its package.
type fakeKeys struct {
	mu      sync.Mutex
	keys    map[string]*Key
	hashes  map[string][]byte
	order   []string // ids by creation
	failGet error    // if set, GetKey fails with it
	// conflicts makes the next CreateKey calls fail with ErrConflict.
	conflicts int
	gets      int    // GetKey calls
	onGet     func() // if set, runs in GetKey after the key was read
}

var _ KeyStore = (*fakeKeys)(nil)

func newFakeKeys() *fakeKeys {
	return &fakeKeys{keys: map[string]*Key{}, hashes: map[string][]byte{}}
}

func copyKey(k *Key) *Key {
	c := *k
	if k.ExpiresAt != nil {
		e := *k.ExpiresAt
		c.ExpiresAt = &e
	}
	if k.RevokedAt != nil {
		r := *k.RevokedAt
		c.RevokedAt = &r
	}
	return &c
}

func (f *fakeKeys) CreateKey(_ context.Context, k *Key, hash []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conflicts > 0 {
		f.conflicts--
		return errdefs.New(errdefs.ErrConflict, "API key %q already exists", k.ID)
	}
	if _, ok := f.keys[k.ID]; ok {
		return errdefs.New(errdefs.ErrConflict, "API key %q already exists", k.ID)
	}
	f.keys[k.ID], f.hashes[k.ID] = copyKey(k), slices.Clone(hash)
	f.order = append(f.order, k.ID)
	return nil
}

func (f *fakeKeys) GetKey(_ context.Context, id string) (*Key, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failGet != nil {
		return nil, nil, f.failGet
	}
	f.gets++
	k, ok := f.keys[id]
	if !ok {
		return nil, nil, errdefs.New(errdefs.ErrNotFound, "API key %q not found", id)
	}
	k, h := copyKey(k), slices.Clone(f.hashes[id])
	if f.onGet != nil {
		hook := f.onGet
		f.onGet = nil
		f.mu.Unlock()
		hook()
		f.mu.Lock()
	}
	return k, h, nil
}

func (f *fakeKeys) ListKeys(_ context.Context, tenant string) ([]*Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*Key
	for _, id := range f.order {
		if k := f.keys[id]; tenant == "" || k.Tenant == tenant {
			out = append(out, copyKey(k))
		}
	}
	return out, nil
}

func (f *fakeKeys) RevokeKey(_ context.Context, id string, at time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k, ok := f.keys[id]
	if !ok {
		return errdefs.New(errdefs.ErrNotFound, "API key %q not found", id)
	}
	if k.RevokedAt == nil {
		k.RevokedAt = &at
	}
	return nil
}

func (f *fakeKeys) CountKeys(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.keys), nil
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newAuth returns an Authenticator over a fresh fake store and clock,
// with cfg's other fields.
func newAuth(t *testing.T, cfg Config) (*Authenticator, *fakeKeys, *fakeClock) {
	t.Helper()
	keys, clock := newFakeKeys(), newClock()
	cfg.Keys, cfg.Now = keys, clock.Now
	a, err := New(cfg)
	if err != nil {
		t.Fatalf("New() = %v, want nil", err)
	}
	return a, keys, clock
}

func mustCreateKey(t *testing.T, a *Authenticator, tenant string, admin bool, expires *time.Time) (string, *Key) {
	t.Helper()
	plaintext, k, err := a.CreateKey(t.Context(), tenant, "test", admin, expires)
	if err != nil {
		t.Fatalf("CreateKey(%q) = %v, want nil", tenant, err)
	}
	return plaintext, k
}

// req builds a request with the given header lines ("Name: value") and
// query.
func req(query url.Values, headers ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v1/sessions?"+query.Encode(), nil)
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ": ")
		r.Header.Add(name, value)
	}
	return r
}

func bearer(cred string) string { return "Authorization: Bearer " + cred }

// wantUnauthenticated checks err is a credential failure whose message
// contains msg.
func wantUnauthenticated(t *testing.T, call string, err error, msg string) {
	t.Helper()
	if !errdefs.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("%s = %v, want %v", call, err, errdefs.ErrUnauthenticated)
		return
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("%s = %q, want a message containing %q", call, err, msg)
	}
}

func TestKeyRoundTrip(t *testing.T) {
	a, _, _ := newAuth(t, Config{})
	plaintext, k := mustCreateKey(t, a, "acme", true, nil)
	want := &Identity{Tenant: "acme", KeyID: k.ID, Admin: true, Method: MethodKey}
	for _, h := range []string{bearer(plaintext), "Authorization: bearer " + plaintext, "X-API-Key: " + plaintext} {
		got, err := a.Authenticate(t.Context(), req(nil, h))
		if err != nil {
			t.Fatalf("Authenticate(%s) = %v, want nil", h[:strings.Index(h, ":")], err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Authenticate(%s) mismatch (-want +got):\n%s", h[:strings.Index(h, ":")], diff)
		}
	}

	other, _ := mustCreateKey(t, a, "globex", false, nil)
	got, err := a.Authenticate(t.Context(), req(nil, bearer(other)))
	if err != nil || got.Tenant != "globex" || got.Admin {
		t.Errorf("Authenticate(globex key) = %+v, %v, want tenant globex, not admin", got, err)
	}
}

func TestKeyFailures(t *testing.T) {
	a, keys, clock := newAuth(t, Config{})
	good, k := mustCreateKey(t, a, "acme", false, nil)
	id, secret, _ := ParseKey(good)

	expires := clock.Now().Add(time.Hour)
	expiring, _ := mustCreateKey(t, a, "acme", false, &expires)
	revoked, rk := mustCreateKey(t, a, "acme", false, nil)
	if err := a.RevokeKey(t.Context(), "acme", rk.ID); err != nil {
		t.Fatalf("RevokeKey(%q) = %v, want nil", rk.ID, err)
	}
	clock.Advance(2 * time.Hour)

	wrongSecret := KeyPrefix + id + "_" + strings.Repeat("a", KeySecretLen)
	if wrongSecret == good {
		t.Fatal("test key happens to have the all-a secret")
	}
	unknownID := KeyPrefix + "zzzzzzzzzzzz_" + secret

	tests := []struct {
		name, cred, msg string
	}{
		{"wrong secret", wrongSecret, "invalid API key"},
		{"unknown id", unknownID, "invalid API key"},
		{"malformed", "wrn_nope", "malformed API key"},
		{"expired", expiring, "expired at 2026-08-01T13:00:00Z"},
		{"revoked", revoked, "was revoked at 2026-08-01T12:00:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.Authenticate(t.Context(), req(nil, bearer(tc.cred)))
			if got != nil {
				t.Errorf("Authenticate(%s) identity = %+v, want nil", tc.name, got)
			}
			wantUnauthenticated(t, "Authenticate("+tc.name+")", err, tc.msg)
		})
	}

	// Unknown and wrong must read exactly the same.
	_, errWrong := a.Authenticate(t.Context(), req(nil, bearer(wrongSecret)))
	_, errUnknown := a.Authenticate(t.Context(), req(nil, bearer(unknownID)))
	if errWrong.Error() != errUnknown.Error() {
		t.Errorf("wrong secret says %q, unknown id says %q, want the same message", errWrong, errUnknown)
	}
	if strings.Contains(errWrong.Error(), id) {
		t.Errorf("wrong secret error %q names the key id", errWrong)
	}

	// A revoked or expired key is only called so to whoever knows its
	// secret; with a wrong secret it is just invalid.
	rid, _, _ := ParseKey(revoked)
	_, err := a.Authenticate(t.Context(), req(nil, bearer(KeyPrefix+rid+"_"+strings.Repeat("b", KeySecretLen))))
	wantUnauthenticated(t, "Authenticate(revoked key, wrong secret)", err, "invalid API key")

	// The good key still works, and the store holds only its hash.
	if _, err := a.Authenticate(t.Context(), req(nil, bearer(good))); err != nil {
		t.Errorf("Authenticate(good key) = %v, want nil", err)
	}
	_, hash, _ := keys.GetKey(t.Context(), k.ID)
	if diff := cmp.Diff(HashSecret(secret), hash); diff != "" {
		t.Errorf("stored hash is not HashSecret(secret) (-want +got):\n%s", diff)
	}
}

func TestUnknownKeyIDComparesDummyHash(t *testing.T) {
	a, _, _ := newAuth(t, Config{})
	var dummies int
	a.testHookDummy = func() { dummies++ }
	good, _ := mustCreateKey(t, a, "acme", false, nil)
	id, secret, _ := ParseKey(good)

	if _, err := a.Authenticate(t.Context(), req(nil, bearer(good))); err != nil || dummies != 0 {
		t.Errorf("Authenticate(good key) = %v with %d dummy comparisons, want nil, 0", err, dummies)
	}
	if _, err := a.Authenticate(t.Context(), req(nil, bearer(KeyPrefix+id+"_"+strings.Repeat("c", KeySecretLen)))); err == nil || dummies != 0 {
		t.Errorf("Authenticate(wrong secret) = %v with %d dummy comparisons, want an error, 0", err, dummies)
	}
	for i := range 3 {
		if _, err := a.Authenticate(t.Context(), req(nil, bearer(KeyPrefix+"yyyyyyyyyyyy_"+secret))); err == nil || dummies != i+1 {
			t.Errorf("Authenticate(unknown id) = %v with %d dummy comparisons, want an error, %d", err, dummies, i+1)
		}
	}
}

func TestKeyStoreFailureKeepsItsClass(t *testing.T) {
	a, keys, _ := newAuth(t, Config{})
	good, _ := mustCreateKey(t, a, "acme", false, nil)
	keys.failGet = errdefs.New(errdefs.ErrUnavailable, "database is locked")
	_, err := a.Authenticate(t.Context(), req(nil, bearer(good)))
	if !errdefs.Is(err, errdefs.ErrUnavailable) || errdefs.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("Authenticate() with a failing store = %v, want %v and not %v", err, errdefs.ErrUnavailable, errdefs.ErrUnauthenticated)
	}
	keys.failGet = errors.New("disk on fire")
	_, err = a.Authenticate(t.Context(), req(nil, bearer(good)))
	if got := errdefs.ClassOf(err); got != errdefs.ErrInternal {
		t.Errorf("Authenticate() with an unclassified store error = %v (class %v), want %v", err, got, errdefs.ErrInternal)
	}
}

func TestCredentialSources(t *testing.T) {
	a, _, _ := newAuth(t, Config{})
	keyA, ka := mustCreateKey(t, a, "acme", false, nil)
	keyB, kb := mustCreateKey(t, a, "globex", false, nil)
	tokB, _ := a.IssueToken(&Identity{Tenant: "globex", KeyID: kb.ID}, time.Minute)
	q := func(tok string) url.Values { return url.Values{"token": {tok}} }

	tests := []struct {
		name    string
		query   url.Values
		headers []string
		wantKey string // the key id authenticated, or "" for an error
		msg     string // the error message's part, when wantKey is ""
	}{
		{"Authorization wins over X-API-Key", nil, []string{bearer(keyA), "X-API-Key: " + keyB}, ka.ID, ""},
		{"Authorization wins over the query", q(tokB), []string{bearer(keyA)}, ka.ID, ""},
		{"X-API-Key wins over the query", q(tokB), []string{"X-API-Key: " + keyA}, ka.ID, ""},
		{"query token alone", q(tokB), nil, kb.ID, ""},
		{"bad Authorization does not fall through", nil, []string{bearer("wrn_bad"), "X-API-Key: " + keyB}, "", "malformed API key"},
		{"another scheme with X-API-Key", nil, []string{"Authorization: Basic dXNlcjpwYXNz", "X-API-Key: " + keyB}, kb.ID, ""},
		{"another scheme alone", nil, []string{"Authorization: Basic dXNlcjpwYXNz"}, "", "unsupported Authorization scheme"},
		{"no credentials", nil, nil, "", "missing credentials"},
		{"empty bearer", nil, []string{"Authorization: Bearer "}, "", "empty bearer credential"},
		{"bearer of something else without JWT", nil, []string{bearer("eyJhbGciOi.x.y")}, "", "want an API key (wrn_…) or a token (wrt_…)"},
		{"two Authorization headers", nil, []string{bearer(keyA), bearer(keyA)}, "", "more than one"},
		{"two X-API-Key headers", nil, []string{"X-API-Key: " + keyA, "X-API-Key: " + keyA}, "", "more than one"},
		{"two token parameters", url.Values{"token": {tokB, tokB}}, nil, "", "more than one"},
		{"token in X-API-Key", nil, []string{"X-API-Key: " + tokB}, "", "malformed API key in X-API-Key"},
		{"key in the query", q(keyA), nil, "", "API keys are not accepted in URLs"},
		{"key in the query with a good header", q(keyA), []string{"X-API-Key: " + keyB}, "", "API keys are not accepted in URLs"},
		{"JWT in the query", q("eyJhbGciOi.x.y"), nil, "", "want a wrt_… token"},
		{"huge bearer", nil, []string{bearer(strings.Repeat("x", maxCredentialLen+1))}, "", "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.Authenticate(t.Context(), req(tc.query, tc.headers...))
			if tc.wantKey == "" {
				wantUnauthenticated(t, "Authenticate()", err, tc.msg)
				return
			}
			if err != nil || got.KeyID != tc.wantKey {
				t.Errorf("Authenticate() = %+v, %v, want key %s", got, err, tc.wantKey)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	a, _, clock := newAuth(t, Config{})
	_, k := mustCreateKey(t, a, "acme", true, nil)
	id := &Identity{Tenant: "acme", KeyID: k.ID, Admin: true, Method: MethodKey}
	tok, expires := a.IssueToken(id, 5*time.Minute)
	if !strings.HasPrefix(tok, TokenPrefix) {
		t.Errorf("IssueToken() = %q, want the %s prefix", tok, TokenPrefix)
	}
	if want := clock.Now().Add(5 * time.Minute); !expires.Equal(want) {
		t.Errorf("IssueToken() expires = %s, want %s", expires, want)
	}
	if url.QueryEscape(tok) != tok {
		t.Errorf("IssueToken() = %q, which needs escaping in a URL", tok)
	}
	want := &Identity{Tenant: "acme", KeyID: k.ID, Admin: true, Method: MethodToken}
	for name, r := range map[string]*http.Request{
		"bearer": req(nil, bearer(tok)),
		"query":  req(url.Values{"token": {tok}}),
	} {
		got, err := a.Authenticate(t.Context(), r)
		if err != nil {
			t.Fatalf("Authenticate(token in %s) = %v, want nil", name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Authenticate(token in %s) mismatch (-want +got):\n%s", name, diff)
		}
	}

	// Tampering with either half breaks the signature or the format.
	signed, mac, _ := strings.Cut(tok, ".")
	flip := func(s string, i int) string {
		c := byte('A')
		if s[i] == 'A' {
			c = 'B'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	other, err := New(Config{Keys: newFakeKeys(), Now: clock.Now})
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	otherTok, _ := other.IssueToken(id, time.Minute)
	forged, _ := other.IssueToken(&Identity{Tenant: "globex", Admin: true}, time.Minute)
	tests := []struct {
		name, tok, msg string
	}{
		{"payload changed", flip(signed, len(TokenPrefix)+3) + "." + mac, "invalid token"},
		{"mac changed", signed + "." + flip(mac, 5), "invalid token"},
		{"mac cut", signed + "." + mac[:10], "malformed token"},
		{"no mac", signed, "malformed token"},
		{"other daemon's secret", otherTok, "invalid token"},
		{"forged admin for another tenant", forged, "invalid token"},
		{"prefix only", TokenPrefix, "malformed token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.Authenticate(t.Context(), req(url.Values{"token": {tc.tok}}))
			wantUnauthenticated(t, "Authenticate("+tc.name+")", err, tc.msg)
		})
	}

	clock.Advance(5*time.Minute - time.Second)
	if _, err := a.Authenticate(t.Context(), req(nil, bearer(tok))); err != nil {
		t.Errorf("Authenticate(token a second before expiry) = %v, want nil", err)
	}
	clock.Advance(time.Second)
	_, err = a.Authenticate(t.Context(), req(nil, bearer(tok)))
	wantUnauthenticated(t, "Authenticate(expired token)", err, "token expired")
}

func TestTokenTTL(t *testing.T) {
	a, _, clock := newAuth(t, Config{})
	for _, ttl := range []time.Duration{0, -time.Second, time.Hour, MaxTokenTTL} {
		_, expires := a.IssueToken(&Identity{Tenant: "acme"}, ttl)
		if want := clock.Now().Add(MaxTokenTTL); !expires.Equal(want) {
			t.Errorf("IssueToken(ttl %s) expires = %s, want %s", ttl, expires, want)
		}
	}
	// Expiry is in whole seconds, never later than asked.
	clock.Advance(500 * time.Millisecond)
	_, expires := a.IssueToken(&Identity{Tenant: "acme"}, time.Minute)
	if want := time.Date(2026, 8, 1, 12, 1, 0, 0, time.UTC); !expires.Equal(want) {
		t.Errorf("IssueToken(1m) at +500ms expires = %s, want %s", expires, want)
	}
}

func TestTokenDiesWithItsKey(t *testing.T) {
	a, keys, clock := newAuth(t, Config{})
	expires := clock.Now().Add(2 * time.Minute)
	_, k := mustCreateKey(t, a, "acme", false, &expires)
	id := &Identity{Tenant: "acme", KeyID: k.ID, Method: MethodKey}

	tok, _ := a.IssueToken(id, 5*time.Minute)
	clock.Advance(3 * time.Minute) // the key expired, the token has not
	_, err := a.Authenticate(t.Context(), req(nil, bearer(tok)))
	wantUnauthenticated(t, "Authenticate(token of an expired key)", err, "token: key "+k.ID+" expired")

	_, k2 := mustCreateKey(t, a, "acme", false, nil)
	tok2, _ := a.IssueToken(&Identity{Tenant: "acme", KeyID: k2.ID, Admin: true}, time.Minute)
	got, err := a.Authenticate(t.Context(), req(nil, bearer(tok2)))
	if err != nil || got.Admin {
		t.Errorf("Authenticate(admin token of a non-admin key) = %+v, %v, want not admin", got, err)
	}
	if err := a.RevokeKey(t.Context(), "", k2.ID); err != nil {
		t.Fatalf("RevokeKey() = %v", err)
	}
	_, err = a.Authenticate(t.Context(), req(nil, bearer(tok2)))
	wantUnauthenticated(t, "Authenticate(token of a revoked key)", err, "was revoked")

	tok3, _ := a.IssueToken(&Identity{Tenant: "acme", KeyID: "zzzzzzzzzzzz"}, time.Minute)
	_, err = a.Authenticate(t.Context(), req(nil, bearer(tok3)))
	wantUnauthenticated(t, "Authenticate(token of a missing key)", err, "no longer exists")

	// A fresh token of a key not read yet, so the store must answer.
	_, k3 := mustCreateKey(t, a, "acme", false, nil)
	tok4, _ := a.IssueToken(&Identity{Tenant: "acme", KeyID: k3.ID}, time.Minute)
	keys.failGet = errdefs.New(errdefs.ErrUnavailable, "database is locked")
	_, err = a.Authenticate(t.Context(), req(nil, bearer(tok4)))
	if !errdefs.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Authenticate(token) with a failing store = %v, want %v", err, errdefs.ErrUnavailable)
	}
}

func TestTokenForJWTIdentity(t *testing.T) {
	a, _, _ := newAuth(t, Config{})
	want := &Identity{Tenant: "acme", Subject: "alice@example.com", Admin: true, Method: MethodToken}
	tok, _ := a.IssueToken(&Identity{Tenant: "acme", Subject: "alice@example.com", Admin: true, Method: MethodJWT}, time.Minute)
	got, err := a.Authenticate(t.Context(), req(url.Values{"token": {tok}}))
	if err != nil {
		t.Fatalf("Authenticate() = %v, want nil", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Authenticate() mismatch (-want +got):\n%s", diff)
	}
}

func TestTokenSecretConfigured(t *testing.T) {
	secret := []byte(strings.Repeat("s", 32))
	clock := newClock()
	a1, err := New(Config{Keys: newFakeKeys(), TokenSecret: secret, Now: clock.Now})
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	a2, err := New(Config{Keys: newFakeKeys(), TokenSecret: secret, Now: clock.Now})
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	secret[0] = 'x' // New copied it
	tok, _ := a1.IssueToken(&Identity{Tenant: "acme"}, time.Minute)
	if _, err := a2.Authenticate(t.Context(), req(nil, bearer(tok))); err != nil {
		t.Errorf("Authenticate() on a daemon with the same secret = %v, want nil", err)
	}
}

func TestKeyManagement(t *testing.T) {
	a, keys, clock := newAuth(t, Config{})
	_, k1 := mustCreateKey(t, a, "acme", false, nil)
	_, k2 := mustCreateKey(t, a, "globex", false, nil)
	_, k3 := mustCreateKey(t, a, "acme", true, nil)

	got, err := a.ListKeys(t.Context(), "acme")
	if err != nil {
		t.Fatalf("ListKeys(acme) = %v", err)
	}
	if diff := cmp.Diff([]*Key{k1, k3}, got); diff != "" {
		t.Errorf("ListKeys(acme) mismatch (-want +got):\n%s", diff)
	}
	all, err := a.ListKeys(t.Context(), "")
	if err != nil || len(all) != 3 {
		t.Errorf("ListKeys(\"\") = %d keys, %v, want 3", len(all), err)
	}

	// A tenant cannot revoke another's key, and cannot tell it exists.
	err = a.RevokeKey(t.Context(), "acme", k2.ID)
	if !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("RevokeKey(acme, globex's key) = %v, want %v", err, errdefs.ErrNotFound)
	}
	if err := a.RevokeKey(t.Context(), "acme", "zzzzzzzzzzzz"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("RevokeKey(acme, missing) = %v, want %v", err, errdefs.ErrNotFound)
	}
	if err := a.RevokeKey(t.Context(), "globex", k2.ID); err != nil {
		t.Errorf("RevokeKey(globex, its key) = %v, want nil", err)
	}
	first := clock.Now()
	clock.Advance(time.Minute)
	if err := a.RevokeKey(t.Context(), "", k2.ID); err != nil {
		t.Errorf("RevokeKey(again) = %v, want nil", err)
	}
	k, _, _ := keys.GetKey(t.Context(), k2.ID)
	if k.RevokedAt == nil || !k.RevokedAt.Equal(first) {
		t.Errorf("RevokedAt after revoking twice = %v, want the first time %s", k.RevokedAt, first)
	}

	// Validation happens before anything is stored.
	past := clock.Now().Add(-time.Second)
	if _, _, err := a.CreateKey(t.Context(), "acme", "", false, &past); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("CreateKey(expired) = %v, want %v", err, errdefs.ErrInvalidArgument)
	}
	if _, _, err := a.CreateKey(t.Context(), "Not A Tenant", "", false, nil); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("CreateKey(bad tenant) = %v, want %v", err, errdefs.ErrInvalidArgument)
	}
	if n, _ := keys.CountKeys(t.Context()); n != 3 {
		t.Errorf("CountKeys() = %d after failed creates, want 3", n)
	}

	// An id collision draws a new key.
	keys.conflicts = 2
	if _, _, err := a.CreateKey(t.Context(), "acme", "", false, nil); err != nil {
		t.Errorf("CreateKey() after 2 collisions = %v, want nil", err)
	}
	keys.conflicts = 3
	if _, _, err := a.CreateKey(t.Context(), "acme", "", false, nil); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Errorf("CreateKey() after 3 collisions = %v, want %v", err, errdefs.ErrConflict)
	}
}

func TestNewInvalid(t *testing.T) {
	keys := newFakeKeys()
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no key store", Config{}},
		{"short token secret", Config{Keys: keys, TokenSecret: []byte("short")}},
		{"empty token secret", Config{Keys: keys, TokenSecret: []byte{}}},
		{"JWT without a key source", Config{Keys: keys, JWT: &JWTConfig{}}},
		{"JWT with two key sources", Config{Keys: keys, JWT: &JWTConfig{HS256Secret: make([]byte, 32), JWKSURL: "https://idp.example/jwks"}}},
		{"short HS256 secret", Config{Keys: keys, JWT: &JWTConfig{HS256Secret: make([]byte, 31)}}},
		{"JWKS URL not http", Config{Keys: keys, JWT: &JWTConfig{JWKSURL: "file:///etc/jwks.json"}}},
		{"JWKS URL without host", Config{Keys: keys, JWT: &JWTConfig{JWKSURL: "https:///jwks"}}},
		{"missing JWKS file", Config{Keys: keys, JWT: &JWTConfig{JWKSFile: "/nonexistent/jwks.json"}}},
		{"negative leeway", Config{Keys: keys, JWT: &JWTConfig{HS256Secret: make([]byte, 32), Leeway: -time.Second}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("New() = %v, want %v", err, errdefs.ErrInvalidArgument)
			}
		})
	}
}
