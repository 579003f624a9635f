package e2b

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// TestKeySpellings checks that an E2B key and the warren key it spells
// convert both ways, and that other keys do not.
func TestKeySpellings(t *testing.T) {
	plain, _, _, err := auth.GenerateKey("team-a", "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e2bKey(plain); ok {
		t.Fatalf("a random warren key %s has an E2B spelling", plain)
	}
	id, secret, _ := auth.ParseKey(plain)
	fit := auth.KeyPrefix + id + "_" + secret[:randomSecretLen] + secretPad
	e, ok := e2bKey(fit)
	if !ok || len(e) != len("e2b_")+40 || strings.ToLower(e) != e {
		t.Fatalf("e2bKey(%s) = %q, %v", fit, e, ok)
	}
	back, ok := warrenKey(e)
	if !ok || back != fit {
		t.Fatalf("warrenKey(%s) = %q, %v; want %s", e, back, ok, fit)
	}
	if _, _, ok := auth.ParseKey(back); !ok {
		t.Fatalf("%s is not a warren key", back)
	}
	for _, bad := range []string{"e2b_", "e2b_" + strings.Repeat("0", 39), "e2b_" + strings.Repeat("A", 40), "e2b_" + strings.Repeat("g", 40), "wrn_x"} {
		if k, ok := warrenKey(bad); ok {
			t.Errorf("warrenKey(%q) = %q, want no key", bad, k)
		}
	}
}

// TestSignature checks envd's URL signature against one computed the way
// the SDK does (btoa of the SHA-256, padding removed).
func TestSignature(t *testing.T) {
	sum := sha256.Sum256([]byte("hello.txt:read::tok:1700000000"))
	want := "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
	if got := signature("hello.txt", "read", "", "tok", "1700000000"); got != want {
		t.Fatalf("signature = %s, want %s", got, want)
	}
	if !validSignature(want, "hello.txt", "read", "", "tok", "1700000000") {
		t.Fatal("a good signature is refused")
	}
	for _, c := range [][5]string{
		{"hello.txt", "write", "", "tok", "1700000000"},
		{"hello.txt", "read", "root", "tok", "1700000000"},
		{"hello.txt", "read", "", "other", "1700000000"},
		{"hello.txt", "read", "", "tok", ""},
	} {
		if validSignature(want, c[0], c[1], c[2], c[3], c[4]) {
			t.Errorf("signature of %v accepted for another request", c)
		}
	}
}

// TestErrorShapes checks E2B's error body and the status of each class.
func TestErrorShapes(t *testing.T) {
	s := &Server{log: edge.New(edge.Config{}).Log()}
	for _, c := range []struct {
		err    error
		status int
	}{
		{errdefs.New(errdefs.ErrNotFound, "sandbox x not found"), 404},
		{errdefs.New(errdefs.ErrInvalidArgument, "bad"), 400},
		{errdefs.New(errdefs.ErrConflict, "paused"), 409},
		{errdefs.New(errdefs.ErrUnauthenticated, "no"), 401},
		{errdefs.WithRetryAfter(errdefs.ErrResourceExhausted, 2*time.Second, "slow down"), 429},
		{&http.MaxBytesError{Limit: 10}, 413},
	} {
		w := httptest.NewRecorder()
		s.writeError(w, httptest.NewRequest("GET", "/sandboxes/x", nil), c.err)
		if w.Code != c.status {
			t.Errorf("%v: status %d, want %d", c.err, w.Code, c.status)
		}
		want := `{"code":` + itoa(c.status) + `,"message":`
		if !strings.HasPrefix(w.Body.String(), want) {
			t.Errorf("%v: body %s, want it to start with %s", c.err, w.Body, want)
		}
	}
}

// TestListQuery checks the parsing of GET /v2/sandboxes's filters and
// that bad ones are 400s.
func TestListQuery(t *testing.T) {
	md := url.Values{"a%20b": {"c%26d"}, "k": {"v"}}.Encode()
	lq, err := parseListQuery(url.Values{"metadata": {md}, "state": {"paused"}, "order": {"asc"}, "limit": {"2"}})
	if err != nil {
		t.Fatal(err)
	}
	if lq.metadata["a b"] != "c&d" || lq.metadata["k"] != "v" || !lq.asc || lq.limit != 2 || lq.states["running"] || !lq.states["paused"] {
		t.Fatalf("parsed %+v", lq)
	}
	now := time.Now()
	rec := &session.Session{ID: "x", CreatedAt: now, Labels: map[string]string{"a b": "c&d", "k": "v", session.PausedLabel: "t"}}
	if !lq.match(rec) {
		t.Fatal("a paused sandbox with the metadata does not match")
	}
	rec.Labels["k"] = "w"
	if lq.match(rec) {
		t.Fatal("a sandbox with other metadata matches")
	}
	for _, bad := range []url.Values{{"state": {"gone"}}, {"order": {"up"}}, {"limit": {"0"}}, {"limit": {"101"}},
		{"startedAfter": {"yesterday"}}, {"nextToken": {"!!"}}, {"metadata": {"%zz"}}} {
		if _, err := parseListQuery(bad); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%v: err %v, want invalid_argument", bad, err)
		}
	}
}

// TestEnvdHost checks the envd host form <port>-<id>.<preview domain>.
func TestEnvdHost(t *testing.T) {
	s := &Server{previewDomain: "sb.example.com"}
	for host, want := range map[string]string{
		"49983-abc.sb.example.com":      "abc",
		"49983-abc.sb.example.com:8443": "abc",
		"8080-abc.sb.example.com":       "",
		"49983-.sb.example.com":         "",
		"49983-abc.other.com":           "",
		"49983-a.b.sb.example.com":      "",
	} {
		got, ok := s.envdHost(host)
		if got != want || ok != (want != "") {
			t.Errorf("envdHost(%q) = %q, %v; want %q", host, got, ok, want)
		}
	}
}

// TestAccessToken checks that a sandbox's token depends on its tenant, id
// and creation time, and not on the labels a client can change.
func TestAccessToken(t *testing.T) {
	s := &Server{secret: []byte(strings.Repeat("k", 32))}
	now := time.Now()
	a := &session.Session{Tenant: "t", ID: "x", CreatedAt: now}
	tok := s.accessToken(a)
	for _, b := range []*session.Session{{Tenant: "u", ID: "x", CreatedAt: now}, {Tenant: "t", ID: "y", CreatedAt: now},
		{Tenant: "t", ID: "x", CreatedAt: now.Add(time.Nanosecond)}} {
		if s.accessToken(b) == tok {
			t.Errorf("%+v has the token of %+v", b, a)
		}
	}
	a.Labels = map[string]string{"k": "v"}
	if s.accessToken(a) != tok {
		t.Error("a label changed the token")
	}
}
