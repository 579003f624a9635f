package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// reply is an answer of the daemon.
type reply struct {
	status int
	header http.Header
	body   []byte
	err    api.Error
}

// as sends a request with the given credential headers ("" sends none).
func as(t *testing.T, h *daemontest.Harness, cred http.Header, method, path, body string) reply {
	t.Helper()
	req, _ := http.NewRequest(method, h.URL+path, strings.NewReader(body))
	for k, v := range cred {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, body: b}
	json.Unmarshal(b, &r.err)
	return r
}

// flipLast changes a key's last character: the same id, a wrong secret.
func flipLast(key string) string {
	last := byte('a')
	if key[len(key)-1] == 'a' {
		last = 'b'
	}
	return key[:len(key)-1] + string(last)
}

func bearer(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }

// newKey creates a key with the admin key and returns it.
func newKey(t *testing.T, h *daemontest.Harness, req api.CreateKeyRequest) api.KeyCreated {
	t.Helper()
	b, _ := json.Marshal(req)
	r := as(t, h, bearer(h.AdminKey), "POST", "/v1/keys", string(b))
	var k api.KeyCreated
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &k) != nil || k.Secret == "" {
		t.Fatalf("create key %+v: %d %s", req, r.status, r.body)
	}
	return k
}

func TestAuthentication(t *testing.T) {
	h := daemontest.Start(t, nil)
	// The first start wrote the admin key where the README says, for root
	// only.
	keyFile := filepath.Join(h.DataDir, daemon.AdminKeyFile)
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin key file: %v, mode %v; want 0600", err, fi)
	}
	if b, _ := os.ReadFile(keyFile); strings.TrimSpace(string(b)) != h.AdminKey || !strings.HasPrefix(h.AdminKey, "wrn_") {
		t.Fatalf("admin key file holds %q, the daemon created %q", b, h.AdminKey)
	}

	alice := newKey(t, h, api.CreateKeyRequest{Tenant: "alice"})
	revoked := newKey(t, h, api.CreateKeyRequest{Tenant: "alice"})
	if r := as(t, h, bearer(h.AdminKey), "DELETE", "/v1/keys/"+revoked.ID, ""); r.status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	expiring := newKey(t, h, api.CreateKeyRequest{Tenant: "alice", ExpiresInSeconds: 1})
	if expiring.ExpiresAt == nil {
		t.Fatalf("a key with expires_in_seconds has no expires_at: %+v", expiring)
	}
	time.Sleep(time.Until(*expiring.ExpiresAt) + 50*time.Millisecond)

	wrong := flipLast(alice.Secret)
	refused := []struct {
		name string
		cred http.Header
	}{
		{"no credentials", nil},
		{"wrong secret", bearer(wrong)},
		{"unknown key", bearer("wrn_aaaaaaaaaaaa_" + strings.Repeat("a", 32))},
		{"malformed key", bearer("wrn_short")},
		{"revoked key", bearer(revoked.Secret)},
		{"expired key", bearer(expiring.Secret)},
		{"other scheme", http.Header{"Authorization": {"Basic " + alice.Secret}}},
		{"bad X-API-Key", http.Header{"X-Api-Key": {wrong}}},
		{"forged token", bearer("wrt_eyJ0IjoiYWxpY2UiLCJhIjp0cnVlLCJlIjo5OTk5OTk5OTk5fQ.AAAA")},
	}
	for _, tc := range refused {
		for _, route := range []string{"GET /v1/sessions", "POST /v1/sessions", "GET /v1/stats", "GET /v1/keys"} {
			method, path, _ := strings.Cut(route, " ")
			r := as(t, h, tc.cred, method, path, `{}`)
			if r.status != http.StatusUnauthorized || r.err.Error.Code != "unauthenticated" {
				t.Errorf("%s: %s answered %d %s, want 401 unauthenticated", tc.name, route, r.status, r.body)
			}
			if r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: %s: 401 without WWW-Authenticate", tc.name, route)
			}
		}
	}
	// The answer for a wrong secret does not tell that the id exists.
	if a, b := as(t, h, bearer(wrong), "GET", "/v1/sessions", ""), as(t, h, bearer("wrn_aaaaaaaaaaaa_"+strings.Repeat("a", 32)), "GET", "/v1/sessions", ""); a.err != b.err {
		t.Errorf("a wrong secret answers %q, an unknown key %q: an existence oracle", a.err.Error.Message, b.err.Error.Message)
	}
	// A key in the URL is refused, and the message says why.
	if r := as(t, h, nil, "GET", "/v1/sessions?token="+alice.Secret, ""); r.status != http.StatusUnauthorized || !strings.Contains(r.err.Error.Message, "URL") {
		t.Errorf("key in the query: %d %s", r.status, r.body)
	}

	// Probes and the API description need no key.
	for _, p := range []string{"/healthz", "/readyz", "/openapi.yaml", "/openapi.json"} {
		if r := as(t, h, nil, "GET", p, ""); r.status != http.StatusOK {
			t.Errorf("GET %s without a key: %d", p, r.status)
		}
	}

	// Both headers work.
	for _, cred := range []http.Header{bearer(alice.Secret), {"X-Api-Key": {alice.Secret}}} {
		if r := as(t, h, cred, "GET", "/v1/sessions", ""); r.status != http.StatusOK {
			t.Errorf("GET /v1/sessions with %v: %d %s", cred, r.status, r.body)
		}
	}

	// A token stands in for its key, in the query string too; it dies with
	// the key.
	short := newKey(t, h, api.CreateKeyRequest{Tenant: "alice"})
	r := as(t, h, bearer(short.Secret), "POST", "/v1/tokens", `{"ttl_seconds":60}`)
	var tok api.Token
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &tok) != nil || !strings.HasPrefix(tok.Token, "wrt_") {
		t.Fatalf("POST /v1/tokens: %d %s", r.status, r.body)
	}
	if d := time.Until(tok.ExpiresAt); d <= 0 || d > time.Minute {
		t.Errorf("token expires in %v, want within the minute asked", d)
	}
	if r := as(t, h, nil, "GET", "/v1/sessions?token="+tok.Token, ""); r.status != http.StatusOK {
		t.Errorf("token in the query: %d %s", r.status, r.body)
	}
	if r := as(t, h, bearer(tok.Token), "GET", "/v1/sessions", ""); r.status != http.StatusOK {
		t.Errorf("token as bearer: %d %s", r.status, r.body)
	}
	if r := as(t, h, bearer(tok.Token), "POST", "/v1/tokens", `{"ttl_seconds":100000}`); r.status != http.StatusBadRequest {
		t.Errorf("a token for a day: %d %s, want 400", r.status, r.body)
	}
	as(t, h, bearer(h.AdminKey), "DELETE", "/v1/keys/"+short.ID, "")
	if r := as(t, h, nil, "GET", "/v1/sessions?token="+tok.Token, ""); r.status != http.StatusUnauthorized {
		t.Errorf("token of a revoked key: %d %s, want 401", r.status, r.body)
	}

	// Only admins manage keys and tenants.
	for _, route := range []string{"POST /v1/keys", "GET /v1/tenants", "PUT /v1/tenants/alice", "DELETE /v1/tenants/alice", "GET /v1/sessions?all=true"} {
		method, path, _ := strings.Cut(route, " ")
		if r := as(t, h, bearer(alice.Secret), method, path, `{"tenant":"alice"}`); r.status != http.StatusForbidden || r.err.Error.Code != "permission_denied" {
			t.Errorf("%s with a tenant key: %d %s, want 403", route, r.status, r.body)
		}
	}
	// A tenant lists and revokes its own keys only.
	var kl api.KeyList
	r = as(t, h, bearer(alice.Secret), "GET", "/v1/keys", "")
	json.Unmarshal(r.body, &kl)
	for _, k := range kl.Keys {
		if k.Tenant != "alice" {
			t.Errorf("alice's key list shows %+v", k)
		}
	}
	if len(kl.Keys) < 4 {
		t.Errorf("alice sees %d keys, want her 4", len(kl.Keys))
	}
	admins := as(t, h, bearer(h.AdminKey), "GET", "/v1/keys?tenant=default", "")
	json.Unmarshal(admins.body, &kl)
	if len(kl.Keys) != 1 || !kl.Keys[0].Admin {
		t.Fatalf("default tenant keys: %s", admins.body)
	}
	if r := as(t, h, bearer(alice.Secret), "DELETE", "/v1/keys/"+kl.Keys[0].ID, ""); r.status != http.StatusNotFound {
		t.Errorf("alice revoking the admin key: %d %s, want 404", r.status, r.body)
	}
	if r := as(t, h, bearer(h.AdminKey), "GET", "/v1/sessions", ""); r.status != http.StatusOK {
		t.Errorf("the admin key stopped working: %d", r.status)
	}
	// Listings never carry secrets or hashes.
	all := as(t, h, bearer(h.AdminKey), "GET", "/v1/keys", "")
	for _, k := range []api.KeyCreated{alice, revoked, expiring, short} {
		if bytes.Contains(all.body, []byte(k.Secret[len("wrn_")+13:])) {
			t.Errorf("GET /v1/keys shows the secret of %s", k.ID)
		}
	}
}

// TestKeysNotStoredInClear reads the database files: no secret appears.
func TestKeysNotStoredInClear(t *testing.T) {
	h := daemontest.Start(t, nil)
	keys := []string{h.AdminKey}
	for range 3 {
		keys = append(keys, newKey(t, h, api.CreateKeyRequest{Tenant: "t1", Name: "ci"}).Secret)
	}
	h.Stop() // checkpoints the WAL into the database file
	var files []byte
	matches, _ := filepath.Glob(filepath.Join(h.DataDir, "warren.db*"))
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b...)
	}
	if len(files) == 0 {
		t.Fatal("no database file")
	}
	for _, k := range keys {
		secret := k[len("wrn_")+13:]
		if bytes.Contains(files, []byte(secret)) {
			t.Errorf("the database holds the secret of %s in clear", k[:len("wrn_")+12])
		}
		if !bytes.Contains(files, []byte(k[len("wrn_"):len("wrn_")+12])) {
			t.Errorf("the database does not hold the key id of %s: did the test read the right files?", k[:16])
		}
	}
}

// TestTenantIsolation: another tenant's session is exactly as absent as a
// session that does not exist, on every route that names a session.
func TestTenantIsolation(t *testing.T) {
	h := daemontest.Start(t, nil)
	a := bearer(newKey(t, h, api.CreateKeyRequest{Tenant: "a"}).Secret)
	b := bearer(newKey(t, h, api.CreateKeyRequest{Tenant: "b"}).Secret)
	if r := as(t, h, a, "POST", "/v1/sessions", `{"id":"s"}`); r.status != http.StatusCreated {
		t.Fatalf("a creates s: %d %s", r.status, r.body)
	}
	as(t, h, a, "PUT", "/v1/sessions/s/files?path=secret.txt", "a's secret")
	r := as(t, h, a, "POST", "/v1/sessions/s/processes", `{"command":"sleep 60"}`)
	var p api.Process
	if json.Unmarshal(r.body, &p); p.ID == "" {
		t.Fatalf("a starts a process: %d %s", r.status, r.body)
	}

	routes := h.Daemon.API().Routes()
	tried := 0
	for _, route := range routes {
		if !strings.Contains(route, "{id}") {
			continue
		}
		method, pattern, _ := strings.Cut(route, " ")
		for _, sid := range []string{"s", "missing"} {
			path := strings.NewReplacer("{id}", sid, "{pid}", p.ID, "{port}", "8000").Replace(pattern)
			if strings.Contains(path, "/files") || strings.HasSuffix(path, "/archive") {
				path += "?path=secret.txt"
			}
			hdr := b.Clone()
			if strings.HasSuffix(path, "/shell") || strings.Contains(path, "/port-forward/") {
				hdr.Set("Connection", "Upgrade")
				hdr.Set("Upgrade", "websocket")
				hdr.Set("Sec-WebSocket-Version", "13")
				hdr.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			}
			body := `{"command":"cat secret.txt"}`
			switch {
			case strings.HasSuffix(path, "/resize"):
				body = `{"cols":80,"rows":24}`
			case strings.HasSuffix(path, "/signal"):
				body = `{"signal":"KILL"}`
			case strings.Contains(path, "/ports/"):
				body = `{"public":false}`
			}
			r := as(t, h, hdr, method, path, body)
			if r.status != http.StatusNotFound || r.err.Error.Code != "not_found" {
				t.Errorf("b: %s %s answered %d %s, want 404", method, path, r.status, r.body)
			}
			if sid == "s" {
				tried++
				// The message is the one a missing session gets.
				miss := as(t, h, hdr, method, strings.Replace(path, "/sessions/s", "/sessions/missing", 1), body)
				if strings.ReplaceAll(miss.err.Error.Message, "missing", "s") != r.err.Error.Message {
					t.Errorf("b: %s %s: %q for a's session, %q for a missing one", method, path, r.err.Error.Message, miss.err.Error.Message)
				}
			}
		}
	}
	if tried < 20 {
		t.Fatalf("tried %d session routes, want every one of them", tried)
	}
	// Over a real WebSocket too.
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(h.URL, "http") + "/v1/sessions/s/shell"
	if c, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: b}); err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
		if c != nil {
			c.CloseNow()
		}
		t.Errorf("b's WebSocket to a's shell: %v %v, want 404", resp, err)
	}

	// Ids are scoped per tenant: b gets its own s.
	if r := as(t, h, b, "POST", "/v1/sessions", `{"id":"s"}`); r.status != http.StatusCreated {
		t.Fatalf("b creates its own s: %d %s", r.status, r.body)
	}
	if r := as(t, h, b, "GET", "/v1/sessions/s/files?path=secret.txt", ""); r.status != http.StatusNotFound {
		t.Errorf("b's s shows a's file: %d %s", r.status, r.body)
	}
	if r := as(t, h, a, "GET", "/v1/sessions/s/files?path=secret.txt", ""); string(r.body) != "a's secret" {
		t.Errorf("a's file after b made its s: %d %q", r.status, r.body)
	}
	// Each tenant lists and counts its own sessions; an admin sees all.
	var sl api.SessionList
	json.Unmarshal(as(t, h, b, "GET", "/v1/sessions", "").body, &sl)
	if len(sl.Sessions) != 1 || sl.Sessions[0].Tenant != "" {
		t.Errorf("b lists %+v", sl.Sessions)
	}
	var st api.Stats
	json.Unmarshal(as(t, h, b, "GET", "/v1/stats", "").body, &st)
	if st.Sessions != 1 {
		t.Errorf("b's stats count %d sessions, want its 1", st.Sessions)
	}
	json.Unmarshal(as(t, h, bearer(h.AdminKey), "GET", "/v1/sessions?all=true", "").body, &sl)
	tenants := map[string]bool{}
	for _, s := range sl.Sessions {
		tenants[s.Tenant] = true
	}
	if len(sl.Sessions) != 2 || !tenants["a"] || !tenants["b"] {
		t.Errorf("admin ?all=true lists %+v", sl.Sessions)
	}
	for _, cred := range []http.Header{a, b} {
		as(t, h, cred, "DELETE", "/v1/sessions/s", "")
	}
}

func TestTenantQuotas(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.Auth.TenantDefaults.MaxSessions = 3 })
	admin := bearer(h.AdminKey)
	q := bearer(newKey(t, h, api.CreateKeyRequest{Tenant: "q"}).Secret)
	other := bearer(newKey(t, h, api.CreateKeyRequest{Tenant: "other"}).Secret)
	r := as(t, h, admin, "PUT", "/v1/tenants/q", `{"quota":{"max_sessions":1,"max_exec_timeout_seconds":5,"max_lifetime_seconds":3600},"policy":{"deny":["curl"]}}`)
	if r.status != http.StatusOK {
		t.Fatalf("PUT tenant: %d %s", r.status, r.body)
	}
	var got api.Tenant
	json.Unmarshal(as(t, h, q, "GET", "/v1/tenants/q", "").body, &got)
	if got.Name != "q" || got.Quota.MaxSessions != 1 || len(got.Policy.Deny) != 1 {
		t.Errorf("q reads its settings: %+v", got)
	}
	if r := as(t, h, q, "GET", "/v1/tenants/other", ""); r.status != http.StatusForbidden {
		t.Errorf("q reads other's settings: %d", r.status)
	}

	if r := as(t, h, q, "POST", "/v1/sessions", `{"id":"one"}`); r.status != http.StatusCreated {
		t.Fatalf("first session: %d %s", r.status, r.body)
	}
	checks := []struct {
		name, method, path, body, quota string
		status                          int
	}{
		{"second session", "POST", "/v1/sessions", `{"id":"two"}`, "max_sessions", 429},
		{"long exec", "POST", "/v1/sessions/one/exec", `{"command":"true","timeout_ms":60000}`, "max_exec_timeout_seconds", 429},
		{"long life", "POST", "/v1/sessions", `{"id":"three","max_lifetime_seconds":7200}`, "max_lifetime_seconds", 429},
		{"denied program", "POST", "/v1/sessions/one/exec", `{"command":"curl http://example.com"}`, "curl", 403},
	}
	for _, c := range checks {
		r := as(t, h, q, c.method, c.path, c.body)
		if r.status != c.status || !strings.Contains(r.err.Error.Message, c.quota) {
			t.Errorf("%s: %d %s, want %d naming %s", c.name, r.status, r.body, c.status, c.quota)
		}
		if c.status == 429 && r.err.Error.Code != "resource_exhausted" {
			t.Errorf("%s: code %q, want resource_exhausted", c.name, r.err.Error.Code)
		}
	}
	if r := as(t, h, q, "POST", "/v1/sessions/one/exec", `{"command":"echo fine","timeout_ms":5000}`); r.status != http.StatusOK {
		t.Errorf("exec within the quota: %d %s", r.status, r.body)
	}
	// Another tenant gets the daemon's defaults: three sessions.
	for i, id := range []string{"x1", "x2", "x3", "x4"} {
		r := as(t, h, other, "POST", "/v1/sessions", `{"id":"`+id+`"}`)
		if want := map[bool]int{true: 201, false: 429}[i < 3]; r.status != want {
			t.Errorf("other's session %s: %d %s, want %d", id, r.status, r.body, want)
		}
	}
	// Settings change at once; deleting them restores the defaults.
	as(t, h, admin, "PUT", "/v1/tenants/q", `{"quota":{"max_sessions":2}}`)
	if r := as(t, h, q, "POST", "/v1/sessions", `{"id":"two"}`); r.status != http.StatusCreated {
		t.Errorf("after raising the quota: %d %s", r.status, r.body)
	}
	if r := as(t, h, admin, "DELETE", "/v1/tenants/q", ""); r.status != http.StatusNoContent {
		t.Errorf("DELETE tenant: %d %s", r.status, r.body)
	}
	if r := as(t, h, q, "POST", "/v1/sessions/one/exec", `{"command":"curl --version >/dev/null 2>&1; echo ran"}`); r.status != http.StatusOK {
		t.Errorf("curl after the policy went: %d %s", r.status, r.body)
	}
	// Malformed settings are refused.
	for _, body := range []string{`{"quota":{"max_sessions":-1}}`, `{"policy":{"deny":["/bin/sh"]}}`, `{"name":"other"}`, `{"quota":{"bogus":1}}`, `[`} {
		if r := as(t, h, admin, "PUT", "/v1/tenants/q", body); r.status != http.StatusBadRequest {
			t.Errorf("PUT %s: %d %s, want 400", body, r.status, r.body)
		}
	}
	if r := as(t, h, admin, "PUT", "/v1/tenants/Bad..Name", `{}`); r.status != http.StatusBadRequest {
		t.Errorf("PUT a bad tenant name: %d %s", r.status, r.body)
	}
	for _, id := range []string{"one", "two"} {
		as(t, h, q, "DELETE", "/v1/sessions/"+id, "")
	}
	for _, id := range []string{"x1", "x2", "x3"} {
		as(t, h, other, "DELETE", "/v1/sessions/"+id, "")
	}
}

func TestRateLimit(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.Auth.RateLimit, c.Auth.RateBurst = 0.5, 2 })
	k := bearer(newKey(t, h, api.CreateKeyRequest{Tenant: "r"}).Secret)
	var last reply
	for range 3 {
		last = as(t, h, k, "GET", "/v1/sessions", "")
	}
	if last.status != http.StatusTooManyRequests || last.err.Error.Code != "resource_exhausted" {
		t.Fatalf("third request at 0.5/s, burst 2: %d %s, want 429", last.status, last.body)
	}
	if ra := last.header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("429 with Retry-After %q", ra)
	}
	// The bucket is the key's: another key is not slowed down, and probes
	// are never limited.
	if r := as(t, h, bearer(h.AdminKey), "GET", "/v1/sessions", ""); r.status != http.StatusOK {
		t.Errorf("another key: %d", r.status)
	}
	for range 5 {
		if r := as(t, h, nil, "GET", "/healthz", ""); r.status != http.StatusOK {
			t.Errorf("healthz: %d", r.status)
		}
	}
}

func TestAuditTrail(t *testing.T) {
	h := daemontest.Start(t, nil)
	key := newKey(t, h, api.CreateKeyRequest{Tenant: "au", Name: "auditor"})
	k := bearer(key.Secret)
	const (
		fileSecret = "FILE-CONTENT-9f3a"
		cmdSecret  = "COMMAND-TEXT-77b1"
		envSecret  = "ENV-VALUE-c0ffee"
	)
	steps := []struct{ method, path, body string }{
		{"POST", "/v1/sessions", `{"id":"aud","env":{"TOKEN":"` + envSecret + `"}}`},
		{"POST", "/v1/sessions/aud/exec", `{"command":"echo ` + cmdSecret + `","env":{"X":"` + envSecret + `"}}`},
		{"PUT", "/v1/sessions/aud/files?path=notes.txt", fileSecret},
		{"GET", "/v1/sessions/aud/files?path=notes.txt", ""}, // a read: not audited
		{"POST", "/v1/sessions/nope/exec", `{"command":"true"}`},
		{"DELETE", "/v1/sessions/aud", ""},
	}
	for _, s := range steps {
		as(t, h, k, s.method, s.path, s.body)
	}
	as(t, h, bearer("wrn_aaaaaaaaaaaa_"+strings.Repeat("b", 32)), "POST", "/v1/sessions", `{}`)

	r := as(t, h, bearer(h.AdminKey), "GET", "/v1/audit?tenant=au&since=1h", "")
	var al api.AuditList
	if r.status != http.StatusOK || json.Unmarshal(r.body, &al) != nil {
		t.Fatalf("GET /v1/audit: %d %s", r.status, r.body)
	}
	type row struct{ op, session, target, outcome string }
	var got []row
	for _, rec := range al.Records {
		if rec.Tenant != "au" || rec.KeyID != key.ID || rec.Time.IsZero() || rec.DurationMs < 0 {
			t.Errorf("record %+v: want tenant au, key %s, a time and a duration", rec, key.ID)
		}
		got = append(got, row{rec.Op, rec.Session, rec.Target, rec.Outcome})
	}
	want := []row{
		{"POST /v1/sessions", "aud", "", "ok"},
		{"POST /v1/sessions/{id}/exec", "aud", "", "ok"},
		{"PUT /v1/sessions/{id}/files", "aud", "notes.txt", "ok"},
		{"POST /v1/sessions/{id}/exec", "nope", "", "not_found"},
		{"DELETE /v1/sessions/{id}", "aud", "", "ok"},
	}
	if len(got) != len(want) {
		t.Fatalf("audit records for au:\n got %+v\nwant %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	// The refused call and the key creations are there too, for the admin.
	var everyone api.AuditList
	json.Unmarshal(as(t, h, bearer(h.AdminKey), "GET", "/v1/audit?op=POST+/v1/keys", "").body, &everyone)
	if len(everyone.Records) != 1 || everyone.Records[0].Target != "" || everyone.Records[0].Status != 201 {
		t.Errorf("key creation records: %+v", everyone.Records)
	}
	json.Unmarshal(as(t, h, bearer(h.AdminKey), "GET", "/v1/audit?op=POST+/v1/sessions", "").body, &everyone)
	unauth := 0
	for _, rec := range everyone.Records {
		if rec.Outcome == "unauthenticated" && rec.Status == 401 {
			unauth++
		}
	}
	if unauth != 1 {
		t.Errorf("refused create not recorded once: %+v", everyone.Records)
	}
	// A tenant reads only its own records.
	if r := as(t, h, k, "GET", "/v1/audit?tenant=default", ""); r.status != http.StatusForbidden {
		t.Errorf("au reading default's records: %d", r.status)
	}
	json.Unmarshal(as(t, h, k, "GET", "/v1/audit", "").body, &al)
	for _, rec := range al.Records {
		if rec.Tenant != "au" {
			t.Errorf("au sees %+v", rec)
		}
	}
	if r := as(t, h, k, "GET", "/v1/audit?since=yesterday", ""); r.status != http.StatusBadRequest {
		t.Errorf("bad since: %d", r.status)
	}

	// The log on disk holds no secret: not the keys, file contents,
	// command text or environment values.
	log, err := os.ReadFile(filepath.Join(h.DataDir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{key.Secret, key.Secret[17:], h.AdminKey[17:], fileSecret, cmdSecret, envSecret} {
		if bytes.Contains(log, []byte(secret)) {
			t.Errorf("the audit log contains %q", secret)
		}
	}
	if fi, _ := os.Stat(filepath.Join(h.DataDir, "audit.log")); fi.Mode().Perm() != 0o600 {
		t.Errorf("audit.log mode %v, want 0600", fi.Mode().Perm())
	}
}

// TestAuthOff: --no-auth serves everyone as the admin of tenant "default",
// on loopback only.
func TestAuthOff(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.Auth.Disabled = true })
	if h.AdminKey != "" {
		t.Errorf("a daemon without auth created key %q", h.AdminKey)
	}
	if _, err := os.Stat(filepath.Join(h.DataDir, daemon.AdminKeyFile)); !os.IsNotExist(err) {
		t.Errorf("a daemon without auth wrote an admin key file: %v", err)
	}
	if r := as(t, h, nil, "POST", "/v1/sessions", `{"id":"open"}`); r.status != http.StatusCreated {
		t.Fatalf("create without a key: %d %s", r.status, r.body)
	}
	if r := as(t, h, nil, "POST", "/v1/keys", `{"tenant":"x"}`); r.status != http.StatusBadRequest || !strings.Contains(r.err.Error.Message, "--no-auth") {
		t.Errorf("POST /v1/keys without auth: %d %s", r.status, r.body)
	}
	as(t, h, nil, "DELETE", "/v1/sessions/open", "")
}

// TestAdminKeyOnce: a restarted daemon keeps its keys and makes no new one.
func TestAdminKeyOnce(t *testing.T) {
	h := daemontest.Start(t, nil)
	h.Stop()
	h2 := daemontest.Start(t, func(c *config.Config) { c.DataDir = h.DataDir })
	if h2.Daemon.AdminKey() != "" {
		t.Errorf("the second start made another admin key")
	}
	if r := as(t, h2, bearer(h.AdminKey), "GET", "/v1/sessions", ""); r.status != http.StatusOK {
		t.Errorf("the first admin key after a restart: %d %s", r.status, r.body)
	}
}

// TestWorkspaceAndSnapshotQuotas: a tenant keeps at most max_workspaces
// workspaces and max_snapshots snapshots (the daemon's default, or its
// own); past it, 429 naming the quota; another tenant is not counted.
func TestWorkspaceAndSnapshotQuotas(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.Auth.TenantDefaults.MaxSnapshots = 1 })
	admin := bearer(h.AdminKey)
	q := bearer(newKey(t, h, api.CreateKeyRequest{Tenant: "wq"}).Secret)
	other := bearer(newKey(t, h, api.CreateKeyRequest{Tenant: "wother"}).Secret)
	if r := as(t, h, admin, "PUT", "/v1/tenants/wq", `{"quota":{"max_workspaces":1}}`); r.status != http.StatusOK {
		t.Fatalf("PUT tenant: %d %s", r.status, r.body)
	}
	if r := as(t, h, q, "POST", "/v1/workspaces", `{"name":"a","size_mb":16}`); r.status != http.StatusCreated {
		t.Fatalf("first workspace: %d %s", r.status, r.body)
	}
	r := as(t, h, q, "POST", "/v1/workspaces", `{"name":"b","size_mb":16}`)
	if r.status != http.StatusTooManyRequests || !strings.Contains(r.err.Error.Message, "max_workspaces") {
		t.Errorf("second workspace: %d %s, want 429 naming max_workspaces", r.status, r.body)
	}
	for _, name := range []string{"a", "b"} {
		if r := as(t, h, other, "POST", "/v1/workspaces", `{"name":"`+name+`","size_mb":16}`); r.status != http.StatusCreated {
			t.Errorf("another tenant's workspace %s: %d %s", name, r.status, r.body)
		}
	}
	// Snapshots: the daemon's default of one.
	if r := as(t, h, q, "POST", "/v1/sessions", `{"id":"s"}`); r.status != http.StatusCreated {
		t.Fatalf("session: %d %s", r.status, r.body)
	}
	if r := as(t, h, q, "POST", "/v1/sessions/s/snapshot", `{"name":"one"}`); r.status != http.StatusCreated && r.status != http.StatusOK {
		t.Fatalf("first snapshot: %d %s", r.status, r.body)
	}
	r = as(t, h, q, "POST", "/v1/sessions/s/snapshot", `{"name":"two"}`)
	if r.status != http.StatusTooManyRequests || !strings.Contains(r.err.Error.Message, "max_snapshots") {
		t.Errorf("second snapshot: %d %s, want 429 naming max_snapshots", r.status, r.body)
	}
	as(t, h, q, "DELETE", "/v1/sessions/s", "")
	as(t, h, q, "DELETE", "/v1/snapshots/one", "")
	for _, c := range []struct {
		cred http.Header
		name string
	}{{q, "a"}, {other, "a"}, {other, "b"}} {
		as(t, h, c.cred, "DELETE", "/v1/workspaces/"+c.name, "")
	}
}
