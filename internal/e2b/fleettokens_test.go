package e2b

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/session"
)

type rec struct {
	tenant, id string
	created    time.Time
}

func records(n int) []rec {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	out := make([]rec, n)
	for i := range out {
		out[i] = rec{fmt.Sprint("t", i%7), fmt.Sprintf("sb%05d", i), t0.Add(time.Duration(i) * time.Microsecond)}
	}
	return out
}

func eachOf(rs []rec) func(yield func(tenant, id string, created time.Time) bool) {
	return func(yield func(tenant, id string, created time.Time) bool) {
		for _, r := range rs {
			if !yield(r.tenant, r.id, r.created) {
				return
			}
		}
	}
}

// signedRequest is the URL the SDK's downloadUrl (uploadUrl for a POST)
// makes for path, user and token.
func signedRequest(method, path, user, token, exp string) *url.URL {
	op := "read"
	if method == "POST" {
		op = "write"
	}
	q := url.Values{"path": {path}, "signature": {signature(path, op, user, token, exp)}}
	if user != "" {
		q.Set("username", user)
	}
	if exp != "" {
		q.Set("signature_expiration", exp)
	}
	return &url.URL{Path: "/files", RawQuery: q.Encode()}
}

// TestFleetFiles: a signed /files URL names no sandbox; FleetFiles finds
// the one whose fleet token made the signature among the fleet's records,
// and none for a wrong signature, another operation, a token of another
// key, or before the fleet's secret is known.
func TestFleetFiles(t *testing.T) {
	secret := []byte(strings.Repeat("s", 32))
	var known []byte
	ff := NewFleetFiles(func() []byte { return known })
	rs := records(10000)
	target := rs[7777]
	tok := tokenWith(fleetTokenKey(secret), target.tenant, target.id, target.created)
	u := signedRequest("GET", "/home/user/a.txt", "user", tok, "")
	req := httptest.NewRequest("GET", u.String(), nil)
	if got := ff.Sandbox(req, eachOf(rs)); got != "" {
		t.Fatalf("without the fleet's secret: %q, want none", got)
	}
	known = secret
	if got := ff.Sandbox(req, eachOf(rs)); got != target.id {
		t.Fatalf("Sandbox = %q, want %q", got, target.id)
	}
	// With an expiry, and an upload (write).
	exp := fmt.Sprint(time.Now().Add(time.Hour).Unix())
	u = signedRequest("POST", "/tmp/up", "", tok, exp)
	if got := ff.Sandbox(httptest.NewRequest("POST", u.String(), nil), eachOf(rs)); got != target.id {
		t.Fatalf("upload: Sandbox = %q, want %q", got, target.id)
	}
	// A read signature does not make a write.
	u = signedRequest("GET", "/tmp/up", "", tok, exp)
	if got := ff.Sandbox(httptest.NewRequest("POST", u.String(), nil), eachOf(rs)); got != "" {
		t.Fatalf("a read signature used to write: %q, want none", got)
	}
	// A node token (the sandbox predates the fleet) is not found: its
	// owner serves its URLs.
	nodeTok := tokenWith([]byte(strings.Repeat("n", 32)), target.tenant, target.id, target.created)
	u = signedRequest("GET", "/a", "", nodeTok, "")
	if got := ff.Sandbox(httptest.NewRequest("GET", u.String(), nil), eachOf(rs)); got != "" {
		t.Fatalf("node token: %q, want none", got)
	}
	for _, q := range []string{"signature=v1_bad", "signature=nope", "path=/a"} {
		if got := ff.Sandbox(httptest.NewRequest("GET", "/files?"+q, nil), eachOf(rs)); got != "" {
			t.Fatalf("%s: %q, want none", q, got)
		}
	}
	// The cost of a signed request over 10,000 records, its tokens
	// computed once (the memo) and on the first request.
	u = signedRequest("GET", "/nothing", "", "no-token", "")
	miss := httptest.NewRequest("GET", u.String(), nil)
	ff = NewFleetFiles(func() []byte { return secret })
	start := time.Now()
	ff.Sandbox(miss, eachOf(rs))
	cold := time.Since(start)
	start = time.Now()
	const n = 20
	for range n {
		ff.Sandbox(miss, eachOf(rs))
	}
	t.Logf("a signed /files URL matching none of 10,000 records: %v with the tokens memoized, %v the first time", time.Since(start)/n, cold)
}

// TestAccessTokenScheme: in a fleet, sandboxes created since the node
// first ran in one get tokens of the fleet's key, which every node can
// compute; older ones keep their node token; the moment is kept across
// restarts.
func TestAccessTokenScheme(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "e2b-secret")
	since, err := loadFleetSince(secretFile)
	if err != nil {
		t.Fatal(err)
	}
	again, err := loadFleetSince(secretFile)
	if err != nil || !again.Equal(since) {
		t.Fatalf("loadFleetSince again = %v, %v; want %v", again, err, since)
	}
	if b, err := os.ReadFile(filepath.Join(dir, fleetSinceFile)); err != nil || len(b) == 0 {
		t.Fatalf("%s: %q %v", fleetSinceFile, b, err)
	}
	node := []byte(strings.Repeat("n", 32))
	fleet := []byte(strings.Repeat("f", 32))
	var known []byte
	s := &Server{secret: node, fleetSecret: func() []byte { return known }, fleetSince: since}
	old := &session.Session{Tenant: "t", ID: "old", CreatedAt: since.Add(-time.Hour)}
	young := &session.Session{Tenant: "t", ID: "new", CreatedAt: since.Add(time.Second)}
	if got := s.accessToken(young); got != "" {
		t.Fatalf("token before the fleet's secret is known = %q, want none", got)
	}
	known = fleet
	if got, want := s.accessToken(old), tokenWith(node, "t", "old", old.CreatedAt); got != want {
		t.Fatalf("an older sandbox's token = %q, want its node token %q", got, want)
	}
	if got, want := s.accessToken(young), tokenWith(fleetTokenKey(fleet), "t", "new", young.CreatedAt); got != want {
		t.Fatalf("a new sandbox's token = %q, want its fleet token %q", got, want)
	}
	if single := (&Server{secret: node}).accessToken(young); single != tokenWith(node, "t", "new", young.CreatedAt) {
		t.Fatalf("outside a fleet: %q, want the node token", single)
	}
}

func BenchmarkFleetFiles10k(b *testing.B) {
	secret := []byte(strings.Repeat("s", 32))
	ff := NewFleetFiles(func() []byte { return secret })
	rs := records(10000)
	u := signedRequest("GET", "/nothing", "", "no-token", "")
	req := httptest.NewRequest("GET", u.String(), nil)
	ff.Sandbox(req, eachOf(rs))
	b.ResetTimer()
	for range b.N {
		ff.Sandbox(req, eachOf(rs))
	}
}
