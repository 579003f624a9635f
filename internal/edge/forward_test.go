package edge

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/auth"
)

// twoNodes is a pair of edges with Forward in front of a handler that
// says which node served and as whom.
type twoNodes struct {
	a, b     *httptest.Server
	owner    atomic.Value // string: "a" or "b", who owns session "s"
	secret   []byte
	hitsA    atomic.Int32
	hitsB    atomic.Int32
	misroute atomic.Bool // b answers as if it did not own s (a stale route)
}

func newTwoNodes(t testing.TB) *twoNodes {
	tn := &twoNodes{secret: []byte(strings.Repeat("k", 32))}
	tn.owner.Store("b")
	mk := func(name string, hits *atomic.Int32, other func() string) *httptest.Server {
		e := New(Config{Log: slog.New(slog.DiscardHandler)})
		inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, err := e.Admit(r)
			if err != nil {
				e.WriteError(w, r, err)
				return
			}
			hits.Add(1)
			body, _ := io.ReadAll(r.Body)
			w.Write([]byte(name + " " + TenantOf(ctx) + " " + string(body)))
		})
		return httptest.NewServer(e.Forward(&Forwarding{Node: name, Secret: func() []byte { return tn.secret },
			Locate: func(tenant, id string) Owner {
				if id != "s" {
					return Owner{}
				}
				o := tn.owner.Load().(string)
				here := o == name
				if name == "b" && tn.misroute.Load() {
					here = false
				}
				return Owner{Known: true, Here: here, Node: o, Addr: other(), Alive: true}
			}}, inner))
	}
	tn.b = mk("b", &tn.hitsB, func() string { return tn.a.URL })
	tn.a = mk("a", &tn.hitsA, func() string { return tn.b.URL })
	t.Cleanup(tn.a.Close)
	t.Cleanup(tn.b.Close)
	return tn
}

func do(t *testing.T, method, url, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestForwardOneHop(t *testing.T) {
	tn := newTwoNodes(t)
	// A request at a for b's session is served by b, as a's caller, with
	// its body, in one hop.
	code, body := do(t, "POST", tn.a.URL+"/v1/sessions/s/exec", `{"command":"x"}`, nil)
	if code != 200 || body != `b default {"command":"x"}` || tn.hitsA.Load() != 0 || tn.hitsB.Load() != 1 {
		t.Fatalf("forwarded = %d %q (hits a %d, b %d), want b serving it once", code, body, tn.hitsA.Load(), tn.hitsB.Load())
	}
	// Other paths and unknown sessions stay where they are.
	if code, body := do(t, "GET", tn.a.URL+"/v1/sessions/other", "", nil); code != 200 || !strings.HasPrefix(body, "a ") {
		t.Fatalf("unknown session at a = %d %q, want a serving it", code, body)
	}
	if code, body := do(t, "GET", tn.a.URL+"/v1/images", "", nil); code != 200 || !strings.HasPrefix(body, "a ") {
		t.Fatalf("/v1/images at a = %d %q, want a serving it", code, body)
	}
}

// TestForwardStaleRoute: b no longer owns s; it answers 421 and a tries
// once more, then says unavailable; nothing bounces back and forth.
func TestForwardStaleRoute(t *testing.T) {
	tn := newTwoNodes(t)
	tn.misroute.Store(true)
	code, body := do(t, "POST", tn.a.URL+"/v1/sessions/s/exec", "{}", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"unavailable"`) {
		t.Fatalf("stale route = %d %q, want 503 unavailable", code, body)
	}
	if tn.hitsB.Load() != 0 || tn.hitsA.Load() != 0 {
		t.Fatalf("hits a %d, b %d; want none served", tn.hitsA.Load(), tn.hitsB.Load())
	}
	// The route catches up between the two tries: the retry lands.
	tn.misroute.Store(true)
	go func() { time.Sleep(50 * time.Millisecond); tn.misroute.Store(false) }()
	if code, body := do(t, "POST", tn.a.URL+"/v1/sessions/s/exec", "{}", nil); code != 200 || !strings.HasPrefix(body, "b ") {
		t.Fatalf("retry after a stale route = %d %q, want b serving it", code, body)
	}
}

func TestForwardedHeaderCannotBeForged(t *testing.T) {
	tn := newTwoNodes(t)
	req := httptest.NewRequest("GET", "/v1/sessions/s", nil)
	good := sign(tn.secret, &auth.Identity{Tenant: "t1", Admin: true, Method: "key"}, req, "a")
	other := httptest.NewRequest("DELETE", "/v1/sessions/s", nil)
	for _, tc := range []struct {
		name, method, header string
		want                 int
	}{
		{"valid", "GET", good, 200},
		{"replayed", "GET", good, 401}, // each hop is served once
		{"another method", "DELETE", good, 401},
		{"another secret", "GET", sign([]byte(strings.Repeat("x", 32)), &auth.Identity{Tenant: "t1"}, req, "a"), 401},
		{"tampered", "GET", strings.Replace(good, good[:4], "AAAA", 1), 401},
		{"no signature", "GET", strings.Split(good, ".")[0], 401},
		{"for another request", "GET", sign(tn.secret, &auth.Identity{Tenant: "t1"}, other, "a"), 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(t, tc.method, tn.b.URL+"/v1/sessions/s", "", map[string]string{ForwardHeader: tc.header})
			if code != tc.want {
				t.Fatalf("%s = %d %q, want %d", tc.name, code, body, tc.want)
			}
			if tc.want == 200 && body != "b t1 " {
				t.Fatalf("served as %q, want tenant t1 on b", body)
			}
		})
	}
	// A hop signed for longer than nodes sign for (a clock far ahead).
	long := forwarded{Tenant: "t1", Request: "GET /v1/sessions/s", Expires: time.Now().Add(3 * forwardTTL).Unix(), Nonce: "n"}
	if _, _, err := verify(tn.secret, encode(tn.secret, long), req); err == nil {
		t.Fatal("a signature valid for 90 s verified")
	}
	// An expired signature.
	f := forwarded{Tenant: "t1", Request: "GET /v1/sessions/s", Expires: time.Now().Add(-time.Second).Unix()}
	if _, _, err := verify(tn.secret, encode(tn.secret, f), req); err == nil {
		t.Fatal("an expired signature verified")
	}
	// An anonymous hop names no caller; one that also names a tenant, or
	// a signed caller without one, is refused.
	if who, f, err := verify(tn.secret, sign(tn.secret, nil, req, "a"), req); err != nil || who != nil || f.From != "a" {
		t.Fatalf("anonymous hop = %v, %q, %v; want no caller from a", who, f.From, err)
	}
	exp := time.Now().Add(time.Minute).Unix()
	for _, f := range []forwarded{
		{Anon: true, Tenant: "t1", Request: "GET /v1/sessions/s", Expires: exp},
		{Request: "GET /v1/sessions/s", Expires: exp},
	} {
		if who, _, err := verify(tn.secret, encode(tn.secret, f), req); err == nil {
			t.Fatalf("%+v verified as %v", f, who)
		}
	}
}

func TestSandboxOfE2BPath(t *testing.T) {
	for path, want := range map[string]string{
		"/e2b/sandboxes/abc":            "abc",
		"/e2b/sandboxes/abc/connect":    "abc",
		"/e2b/v2/sandboxes/abc/logs":    "abc",
		"/e2b/sandboxes":                "",
		"/e2b/v2/sandboxes":             "",
		"/v1/sessions/abc":              "",
		"/e2b/templates/aliases/sandbo": "",
	} {
		if got := SandboxOfE2BPath(path); got != want {
			t.Errorf("SandboxOfE2BPath(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestSessionOfPreviewHost(t *testing.T) {
	for _, tc := range []struct{ host, want string }{
		{"8080-s2.preview.test", "s2"},
		{"8080-s2.Preview.Test:7433", "s2"},
		{"8080-my-id.preview.test", "my-id"},
		{"x80-s2.preview.test", ""},
		{"-s2.preview.test", ""},
		{"8080-s2.other.test", ""},
		{"a.8080-s2.preview.test", ""},
		{"preview.test", ""},
	} {
		if _, got := sessionOfPreviewHost(tc.host, "preview.test"); got != tc.want {
			t.Errorf("sessionOfPreviewHost(%q) = %q, want %q", tc.host, got, tc.want)
		}
	}
}

// TestForwardOverTLS: a node advertised at https:// gets forwarded
// requests over TLS, HTTP/1.1 ones and HTTP/2 ones (gRPC) alike.
func TestForwardOverTLS(t *testing.T) {
	secret := []byte(strings.Repeat("k", 32))
	eb := New(Config{Log: slog.New(slog.DiscardHandler)})
	b := httptest.NewUnstartedServer(eb.Forward(&Forwarding{Node: "b", Secret: func() []byte { return secret },
		Locate: func(tenant, id string) Owner { return Owner{Known: true, Here: true, Node: "b", Alive: true} }},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, err := eb.Admit(r)
			if err != nil {
				eb.WriteError(w, r, err)
				return
			}
			fmt.Fprintf(w, "b %s tls=%v proto=%d", TenantOf(ctx), r.TLS != nil, r.ProtoMajor)
		})))
	b.EnableHTTP2 = true
	b.StartTLS()
	t.Cleanup(b.Close)
	roots := x509.NewCertPool()
	roots.AddCert(b.Certificate())
	ea := New(Config{Log: slog.New(slog.DiscardHandler)})
	a := httptest.NewUnstartedServer(ea.Forward(&Forwarding{Node: "a", Secret: func() []byte { return secret }, TLS: &tls.Config{RootCAs: roots},
		Locate: func(tenant, id string) Owner { return Owner{Known: true, Node: "b", Addr: b.URL, Alive: true} }},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("a")) })))
	a.Config.Protocols = new(http.Protocols)
	a.Config.Protocols.SetHTTP1(true)
	a.Config.Protocols.SetUnencryptedHTTP2(true)
	a.Start()
	t.Cleanup(a.Close)
	if code, body := do(t, "GET", a.URL+"/v1/sessions/s", "", nil); code != 200 || body != "b default tls=true proto=1" {
		t.Fatalf("HTTP/1.1 forwarded over TLS = %d %q", code, body)
	}
	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	c := &http.Client{Transport: &http.Transport{Protocols: &h2}}
	resp, err := c.Get(a.URL + "/v1/sessions/s")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "b default tls=true proto=2" {
		t.Fatalf("HTTP/2 forwarded over TLS = %d %q", resp.StatusCode, body)
	}
}

// TestHopNonces: a nonce is fresh once, remembered across one turn of the
// generations and forgotten after two.
func TestHopNonces(t *testing.T) {
	h := newHopNonces()
	if !h.fresh("a") || h.fresh("a") {
		t.Fatal("a nonce was fresh twice, or not at first")
	}
	h.since = h.since.Add(-2 * forwardTTL) // one turn: "a" is in prev
	if h.fresh("a") {
		t.Fatal("a nonce was forgotten after one turn")
	}
	if !h.fresh("b") {
		t.Fatal("a new nonce was refused")
	}
	h.since = h.since.Add(-4 * forwardTTL) // long idle: both generations go
	if !h.fresh("a") || !h.fresh("b") {
		t.Fatal("nonces outlived 4*forwardTTL")
	}
}

// BenchmarkForward measures what one fleet hop adds in process, without
// a sandbox: a POST to the owner b directly, and through a (the caller's
// key checked, the route looked up, the caller signed, the owner's check
// of the signature and its nonce).
//
//	go test -run '^$' -bench Forward -benchtime 5000x ./internal/edge/
func BenchmarkForward(b *testing.B) {
	tn := newTwoNodes(b)
	for _, tc := range []struct{ name, url string }{{"direct", tn.b.URL}, {"forwarded", tn.a.URL}} {
		b.Run(tc.name, func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			for b.Loop() {
				resp, err := c.Post(tc.url+"/v1/sessions/s/exec", "application/json", strings.NewReader(`{"command":"echo hi"}`))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
