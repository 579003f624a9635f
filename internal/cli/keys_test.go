package cli

import (
	"bytes"
	"context"
	"io/fs"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/warrenhq/warren/api"
)

// at returns a pointer to now+d.
func at(d time.Duration) *time.Time {
	t := now.Add(d)
	return &t
}

var (
	keyCI      = api.Key{ID: "aaaaaaaaaaaa", Tenant: "team-a", Name: "ci", CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: at(30 * 24 * time.Hour)}
	keyAdmin   = api.Key{ID: "bbbbbbbbbbbb", Tenant: "ops", Admin: true, CreatedAt: now.Add(-72 * time.Hour)}
	keyExpired = api.Key{ID: "cccccccccccc", Tenant: "team-a", CreatedAt: now.Add(-48 * time.Hour), ExpiresAt: at(-time.Hour)}
	keyRevoked = api.Key{ID: "dddddddddddd", Tenant: "team-a", Name: "old", CreatedAt: now.Add(-5 * time.Minute),
		ExpiresAt: at(time.Hour), RevokedAt: at(-time.Minute)}

	tenantA = api.Tenant{Name: "team-a",
		Quota:     api.TenantQuota{MaxSessions: 10, MaxMemoryMB: 2048, MaxLifetimeSeconds: 3600},
		Policy:    api.TenantPolicy{Deny: []string{"curl"}},
		UpdatedAt: at(-3 * time.Hour)}
	tenantB = api.Tenant{Name: "team-b",
		Quota:  api.TenantQuota{MaxCPUs: 1.5, MaxExecTimeoutSeconds: 90},
		Policy: api.TenantPolicy{Allow: []string{"python3", "node"}}}
)

func TestAuthCommands(t *testing.T) {
	forbidden := reply{status: 403, body: `{"error":{"code":"permission_denied","message":"an admin key is needed"}}`}
	created := api.KeyCreated{Key: keyCI, Secret: "wrn_aaaaaaaaaaaa_" + strings.Repeat("s", 32)}
	tests := []struct {
		name       string
		args       []string
		routes     map[string]reply
		wantCalls  []call // as in TestCommands
		wantStdout string
		wantStderr string
		wantCode   int
	}{
		{
			name:   "keys create prints the secret first",
			args:   []string{"keys", "create", "--tenant", "team-a", "--name", "ci", "--admin", "--expires", "720h"},
			routes: map[string]reply{"POST /v1/keys": {status: 201, body: mustJSON(t, created)}},
			wantCalls: []call{{Method: "POST", Path: "/v1/keys",
				Body: `{"tenant":"team-a","name":"ci","admin":true,"expires_in_seconds":2592000}`}},
			wantStdout: created.Secret + "\n",
			wantStderr: "warren: created key aaaaaaaaaaaa for tenant team-a; it expires 2026-12-22T12:00:00Z (in 30d)\n" +
				"warren: the key is shown once: store it now\n",
		},
		{
			name: "keys create of an admin key that never expires",
			args: []string{"keys", "create", "--tenant", "ops"},
			routes: map[string]reply{"POST /v1/keys": {status: 201,
				body: mustJSON(t, api.KeyCreated{Key: keyAdmin, Secret: "wrn_secret"})}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/keys", Body: `{"tenant":"ops"}`}},
			wantStdout: "wrn_secret\n",
			wantStderr: "warren: created admin key bbbbbbbbbbbb for tenant ops; it never expires\n" +
				"warren: the key is shown once: store it now\n",
		},
		{
			name:       "keys create --json",
			args:       []string{"keys", "create", "--tenant", "team-a", "--json"},
			routes:     map[string]reply{"POST /v1/keys": {status: 201, body: mustJSON(t, created)}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/keys", Body: `{"tenant":"team-a"}`}},
			wantStdout: indentJSON(t, created),
		},
		{
			name:       "keys create without --tenant",
			args:       []string{"keys", "create"},
			wantStderr: "warren: required flag(s) \"tenant\" not set\n",
			wantCode:   1,
		},
		{
			name:       "keys create with a negative --expires",
			args:       []string{"keys", "create", "--tenant", "a", "--expires", "-1h"},
			wantStderr: "warren: --expires must not be negative\n",
			wantCode:   1,
		},
		{
			name:       "keys create without the right",
			args:       []string{"keys", "create", "--tenant", "a"},
			routes:     map[string]reply{"POST /v1/keys": forbidden},
			wantCalls:  []call{{Method: "POST", Path: "/v1/keys", Body: `{"tenant":"a"}`}},
			wantStderr: "warren: create key for tenant a: permission_denied: an admin key is needed\n",
			wantCode:   1,
		},
		{
			name: "keys ls",
			args: []string{"keys", "ls"},
			routes: map[string]reply{"GET /v1/keys": {status: 200,
				body: mustJSON(t, api.KeyList{Keys: []api.Key{keyCI, keyAdmin, keyExpired, keyRevoked}})}},
			wantCalls: []call{{Method: "GET", Path: "/v1/keys", Query: url.Values{}}},
			wantStdout: "" +
				"ID            TENANT  NAME  ADMIN  CREATED  EXPIRES  STATE\n" +
				"aaaaaaaaaaaa  team-a  ci    no     2h ago   in 30d   active\n" +
				"bbbbbbbbbbbb  ops     -     yes    3d ago   never    active\n" +
				"cccccccccccc  team-a  -     no     2d ago   expired  expired\n" +
				"dddddddddddd  team-a  old   no     5m ago   in 1h    revoked\n",
		},
		{
			name:       "keys ls --tenant --json",
			args:       []string{"keys", "ls", "--tenant", "team-a", "--json"},
			routes:     map[string]reply{"GET /v1/keys": {status: 200, body: `{"keys":null}`}},
			wantCalls:  []call{{Method: "GET", Path: "/v1/keys", Query: url.Values{"tenant": {"team-a"}}}},
			wantStdout: "[]\n",
		},
		{
			name:       "keys ls without credentials",
			args:       []string{"keys", "ls"},
			routes:     map[string]reply{"GET /v1/keys": {status: 401, body: `{"error":{"code":"unauthenticated","message":"invalid API key"}}`}},
			wantCalls:  []call{{Method: "GET", Path: "/v1/keys"}},
			wantStderr: "warren: list keys: unauthenticated: invalid API key\n",
			wantCode:   1,
		},
		{
			name: "keys revoke escapes ids and goes on after a failure",
			args: []string{"keys", "revoke", "aaaaaaaaaaaa", "a/b", "cccccccccccc"},
			routes: map[string]reply{
				"DELETE /v1/keys/aaaaaaaaaaaa": {status: 204},
				"DELETE /v1/keys/cccccccccccc": {status: 204},
			},
			wantCalls: []call{
				{Method: "DELETE", Path: "/v1/keys/aaaaaaaaaaaa"},
				{Method: "DELETE", Path: "/v1/keys/a%2Fb"},
				{Method: "DELETE", Path: "/v1/keys/cccccccccccc"},
			},
			wantStdout: "aaaaaaaaaaaa\ncccccccccccc\n",
			wantStderr: "warren: revoke key a/b: not_found: no route DELETE /v1/keys/a/b\n",
			wantCode:   1,
		},
		{
			name:       "token --ttl",
			args:       []string{"token", "--ttl", "90s"},
			routes:     map[string]reply{"POST /v1/tokens": {status: 201, body: `{"token":"wrt_x.y","expires_at":"2026-11-22T12:01:30Z"}`}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/tokens", Body: `{"ttl_seconds":90}`}},
			wantStdout: "wrt_x.y\n",
		},
		{
			name:       "token with the daemon's lifetime, as JSON",
			args:       []string{"token", "--json"},
			routes:     map[string]reply{"POST /v1/tokens": {status: 201, body: `{"token":"wrt_x.y","expires_at":"2026-11-22T12:15:00Z"}`}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/tokens", Body: `{}`}},
			wantStdout: "{\n  \"token\": \"wrt_x.y\",\n  \"expires_at\": \"2026-11-22T12:15:00Z\"\n}\n",
		},
		{
			name: "tenants ls",
			args: []string{"tenants", "ls"},
			routes: map[string]reply{"GET /v1/tenants": {status: 200,
				body: mustJSON(t, api.TenantList{Tenants: []api.Tenant{tenantA, tenantB}})}},
			wantCalls: []call{{Method: "GET", Path: "/v1/tenants"}},
			wantStdout: "" +
				"NAME    MAX-SESSIONS  MAX-MEMORY  MAX-CPUS  MAX-LIFETIME  MAX-EXEC-TIMEOUT  ALLOW         DENY  UPDATED\n" +
				"team-a  10            2GiB        -         1h            -                 -             curl  3h ago\n" +
				"team-b  -             -           1.5       -             1m30s             python3,node  -     -\n",
		},
		{
			name:       "tenants ls --json, none",
			args:       []string{"tenants", "ls", "--json"},
			routes:     map[string]reply{"GET /v1/tenants": {status: 200, body: `{"tenants":[]}`}},
			wantCalls:  []call{{Method: "GET", Path: "/v1/tenants"}},
			wantStdout: "[]\n",
		},
		{
			name:       "tenants get",
			args:       []string{"tenants", "get", "team-a"},
			routes:     map[string]reply{"GET /v1/tenants/team-a": {status: 200, body: mustJSON(t, tenantA)}},
			wantCalls:  []call{{Method: "GET", Path: "/v1/tenants/team-a"}},
			wantStdout: indentJSON(t, tenantA),
		},
		{
			name: "tenants set changes only the flags given",
			args: []string{"tenants", "set", "team-a", "--max-sessions", "20", "--max-exec-timeout", "1m", "--allow", "python3, node"},
			routes: map[string]reply{
				"GET /v1/tenants/team-a": {status: 200, body: mustJSON(t, tenantA)},
				"PUT /v1/tenants/team-a": {status: 200, body: mustJSON(t, tenantB)},
			},
			wantCalls: []call{
				{Method: "GET", Path: "/v1/tenants/team-a"},
				{Method: "PUT", Path: "/v1/tenants/team-a", Body: `{"name":"team-a",
					"quota":{"max_sessions":20,"max_memory_mb":2048,"max_lifetime_seconds":3600,"max_exec_timeout_seconds":60},
					"policy":{"allow":["python3","node"],"deny":["curl"]}}`},
			},
			wantStdout: indentJSON(t, tenantB), // what the daemon answered
		},
		{
			name: "tenants set resets with 0 and empties a list with \"\"",
			args: []string{"tenants", "set", "team-a", "--max-memory-mb", "0", "--deny", ""},
			routes: map[string]reply{
				"GET /v1/tenants/team-a": {status: 200, body: mustJSON(t, tenantA)},
				"PUT /v1/tenants/team-a": {status: 200, body: mustJSON(t, tenantA)},
			},
			wantCalls: []call{
				{Method: "GET", Path: "/v1/tenants/team-a"},
				{Method: "PUT", Path: "/v1/tenants/team-a", Body: `{"name":"team-a",
					"quota":{"max_sessions":10,"max_lifetime_seconds":3600},"policy":{}}`},
			},
			wantStdout: indentJSON(t, tenantA),
		},
		{
			name: "tenants set of a tenant without settings",
			args: []string{"tenants", "set", "new", "--max-cpus", "0.5", "--max-lifetime", "8h"},
			routes: map[string]reply{
				"PUT /v1/tenants/new": {status: 200, body: `{"name":"new","quota":{"max_cpus":0.5,"max_lifetime_seconds":28800},"policy":{}}`},
			},
			wantCalls: []call{
				{Method: "GET", Path: "/v1/tenants/new"},
				{Method: "PUT", Path: "/v1/tenants/new", Body: `{"name":"new","quota":{"max_cpus":0.5,"max_lifetime_seconds":28800},"policy":{}}`},
			},
			wantStdout: indentJSON(t, api.Tenant{Name: "new", Quota: api.TenantQuota{MaxCPUs: 0.5, MaxLifetimeSeconds: 28800}}),
		},
		{
			name: "tenants set a network ceiling",
			args: []string{"tenants", "set", "team-a", "--network-allow", "pypi.org:443, *.pythonhosted.org:443"},
			routes: map[string]reply{
				"GET /v1/tenants/team-a": {status: 200, body: mustJSON(t, tenantA)},
				"PUT /v1/tenants/team-a": {status: 200, body: mustJSON(t, tenantA)},
			},
			wantCalls: []call{
				{Method: "GET", Path: "/v1/tenants/team-a"},
				{Method: "PUT", Path: "/v1/tenants/team-a", Body: `{"name":"team-a",
					"quota":{"max_sessions":10,"max_memory_mb":2048,"max_lifetime_seconds":3600},
					"policy":{"deny":["curl"],"network":{"allow":["pypi.org:443","*.pythonhosted.org:443"]}}}`},
			},
			wantStdout: indentJSON(t, tenantA),
		},
		{
			name:       "tenants set when the read fails",
			args:       []string{"tenants", "set", "team-a", "--max-sessions", "1"},
			routes:     map[string]reply{"GET /v1/tenants/team-a": forbidden},
			wantCalls:  []call{{Method: "GET", Path: "/v1/tenants/team-a"}},
			wantStderr: "warren: get tenant team-a: permission_denied: an admin key is needed\n",
			wantCode:   1,
		},
		{
			name:       "tenants set without a setting",
			args:       []string{"tenants", "set", "team-a"},
			wantStderr: "warren: nothing to set: give at least one of --max-sessions, --max-memory-mb, --max-cpus, --max-lifetime, --max-exec-timeout, --max-workspaces, --max-snapshots, --allow, --deny, --network-max-mode, --network-allow\n",
			wantCode:   1,
		},
		{
			name:       "tenants set with a negative quota",
			args:       []string{"tenants", "set", "team-a", "--max-sessions", "-1"},
			wantStderr: "warren: quotas must not be negative\n",
			wantCode:   1,
		},
		{
			name:       "tenants rm",
			args:       []string{"tenants", "rm", "team-a"},
			routes:     map[string]reply{"DELETE /v1/tenants/team-a": {status: 204}},
			wantCalls:  []call{{Method: "DELETE", Path: "/v1/tenants/team-a"}},
			wantStdout: "team-a\n",
		},
		{
			name: "audit with every filter",
			args: []string{"audit", "--tenant", "team-a", "--session", "demo", "--op", "session.exec",
				"--since", "1h", "--until", "2026-11-22T12:00:00Z", "--limit", "3"},
			routes: map[string]reply{"GET /v1/audit": {status: 200, body: mustJSON(t, api.AuditList{Records: []api.AuditRecord{
				{Time: now.Add(-90 * time.Second), Tenant: "team-a", KeyID: "aaaaaaaaaaaa", Session: "demo", Op: "session.exec",
					Status: 200, Outcome: "ok", DurationMs: 12.345},
				{Time: now.Add(-time.Minute), Tenant: "team-a", Subject: "alice", Session: "demo", Op: "session.exec",
					Target: "/workspace", Status: 403, Outcome: "denied", DurationMs: 0.35},
				{Time: now, Op: "key.create", Status: 0, Outcome: "error", DurationMs: 1234.5},
			}})}},
			wantCalls: []call{{Method: "GET", Path: "/v1/audit", Query: url.Values{"tenant": {"team-a"}, "session": {"demo"},
				"op": {"session.exec"}, "since": {"1h"}, "until": {"2026-11-22T12:00:00Z"}, "limit": {"3"}}}},
			wantStdout: "" +
				"TIME                  TENANT  KEY           SESSION  OP            TARGET      STATUS  OUTCOME  DURATION\n" +
				"2026-11-22T11:58:30Z  team-a  aaaaaaaaaaaa  demo     session.exec  -           200     ok       12.3ms\n" +
				"2026-11-22T11:59:00Z  team-a  alice         demo     session.exec  /workspace  403     denied   350µs\n" +
				"2026-11-22T12:00:00Z  -       -             -        key.create    -           -       error    1.23s\n",
		},
		{
			name:       "audit --json, none and no filter",
			args:       []string{"audit", "--json"},
			routes:     map[string]reply{"GET /v1/audit": {status: 200, body: `{"records":null}`}},
			wantCalls:  []call{{Method: "GET", Path: "/v1/audit", Query: url.Values{}}},
			wantStdout: "[]\n",
		},
		{
			name: "session ls --all adds a TENANT column",
			args: []string{"session", "ls", "--all"},
			routes: map[string]reply{"GET /v1/sessions": {status: 200, body: mustJSON(t, api.SessionList{Sessions: []api.Session{
				func() api.Session { s := demo; s.Tenant = "team-a"; return s }(), old,
			}})}},
			wantCalls: []call{{Method: "GET", Path: "/v1/sessions", Query: url.Values{"all": {"true"}}}},
			wantStdout: "" +
				"TENANT  ID    IMAGE   STATE    CREATED  EXPIRES  MEMORY\n" +
				"team-a  demo  python  running  5m ago   in 25m   12MiB/512MiB\n" +
				"-       old   -       failed   2d ago   expired  -\n",
		},
		{
			name:       "session ls asks for the caller's sessions only",
			args:       []string{"session", "ls", "--json"},
			routes:     map[string]reply{"GET /v1/sessions": {status: 200, body: `{"sessions":[]}`}},
			wantCalls:  []call{{Method: "GET", Path: "/v1/sessions", Query: url.Values{}}},
			wantStdout: "[]\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFakeAPI(t, tc.routes)
			stdout, stderr, code := runCLI(t, srv, "", tc.args...)
			if code != tc.wantCode {
				t.Errorf("warren %q exit code = %d, want %d (stderr %q)", tc.args, code, tc.wantCode, stderr)
			}
			if diff := cmp.Diff(tc.wantStdout, stdout); diff != "" {
				t.Errorf("warren %q stdout mismatch (-want +got):\n%s", tc.args, diff)
			}
			if diff := cmp.Diff(tc.wantStderr, stderr); diff != "" {
				t.Errorf("warren %q stderr mismatch (-want +got):\n%s", tc.args, diff)
			}
			got := f.recorded()
			if len(got) != len(tc.wantCalls) {
				t.Fatalf("warren %q made %d calls, want %d: %+v", tc.args, len(got), len(tc.wantCalls), got)
			}
			for i, want := range tc.wantCalls {
				g := got[i]
				if g.Method != want.Method || g.Path != want.Path {
					t.Errorf("call %d = %s %s, want %s %s", i, g.Method, g.Path, want.Method, want.Path)
				}
				if want.Query != nil && !cmp.Equal(g.Query, want.Query) {
					t.Errorf("call %d query = %v, want %v", i, g.Query, want.Query)
				}
				if !sameJSON(t, want.Body, g.Body) {
					t.Errorf("call %d body = %s, want %s", i, g.Body, want.Body)
				}
				if g.Auth != "Bearer env-token" {
					t.Errorf("call %d Authorization = %q, want %q", i, g.Auth, "Bearer env-token")
				}
			}
		})
	}
}

// TestDefaultToken checks where the token comes from: --token, then
// WARREN_TOKEN, then the local daemon's admin.key, which is sent only to a
// loopback address.
func TestDefaultToken(t *testing.T) {
	f, srv := newFakeAPI(t, map[string]reply{"GET /v1/sessions": {status: 200, body: `{"sessions":[]}`}})
	loopback := srv.URL // httptest listens on 127.0.0.1
	// A daemon elsewhere: tests serve on loopback only, so nothing answers
	// at this documentation address (RFC 5737); what matters is that the
	// key file is never read for it.
	const remote = "http://192.0.2.2:9"
	keyFile := func(content string, err error) func(string) ([]byte, error) {
		return func(string) ([]byte, error) { return []byte(content), err }
	}
	tests := []struct {
		name     string
		addr     string // WARREN_ADDR; "remote" is the non-loopback server
		flags    []string
		env      map[string]string
		readFile func(string) ([]byte, error)
		wantRead string // the file read, if any
		wantAuth string
	}{
		{
			name: "admin.key of the default data dir", addr: loopback,
			readFile: keyFile(" wrn_file \n", nil), wantRead: "/var/lib/warren/admin.key", wantAuth: "Bearer wrn_file",
		},
		{
			name: "admin.key of WARREN_DATA_DIR", addr: loopback, env: map[string]string{"WARREN_DATA_DIR": "/srv/warren"},
			readFile: keyFile("wrn_file\n", nil), wantRead: "/srv/warren/admin.key", wantAuth: "Bearer wrn_file",
		},
		{
			name: "admin.key through localhost", addr: strings.Replace(loopback, "127.0.0.1", "localhost", 1),
			readFile: keyFile("wrn_file\n", nil), wantRead: "/var/lib/warren/admin.key", wantAuth: "Bearer wrn_file",
		},
		{
			name: "--token wins over admin.key", addr: loopback, flags: []string{"--token", "flag-token"},
			readFile: keyFile("wrn_file\n", nil), wantAuth: "Bearer flag-token",
		},
		{
			name: "WARREN_TOKEN wins over admin.key", addr: loopback, env: map[string]string{"WARREN_TOKEN": "env-token"},
			readFile: keyFile("wrn_file\n", nil), wantAuth: "Bearer env-token",
		},
		{
			name: "no admin.key", addr: loopback,
			readFile: keyFile("", fs.ErrNotExist), wantRead: "/var/lib/warren/admin.key",
		},
		{
			name: "unreadable admin.key", addr: loopback,
			readFile: keyFile("", fs.ErrPermission), wantRead: "/var/lib/warren/admin.key",
		},
		{
			name: "empty admin.key", addr: loopback,
			readFile: keyFile("\n", nil), wantRead: "/var/lib/warren/admin.key",
		},
		{
			name: "never to a remote daemon", addr: "remote",
			readFile: keyFile("wrn_file\n", nil),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := tc.addr
			ctx := t.Context()
			if addr == "remote" {
				addr = remote
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
			}
			env := map[string]string{"WARREN_ADDR": addr}
			for k, v := range tc.env {
				env[k] = v
			}
			var read []string
			var out, errOut bytes.Buffer
			before := len(f.recorded())
			code := run(ctx, append(tc.flags, "session", "ls"), &app{
				stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
				getenv: func(k string) string { return env[k] },
				readFile: func(p string) ([]byte, error) {
					read = append(read, p)
					return tc.readFile(p)
				},
				now: func() time.Time { return now },
			})
			var wantRead []string
			if tc.wantRead != "" {
				wantRead = []string{filepath.FromSlash(tc.wantRead)}
			}
			if diff := cmp.Diff(wantRead, read); diff != "" {
				t.Errorf("files read mismatch (-want +got):\n%s", diff)
			}
			if tc.addr == "remote" {
				return // nothing listens there
			}
			if code != 0 {
				t.Fatalf("warren session ls: exit %d, stderr %q", code, errOut.String())
			}
			calls := f.recorded()[before:]
			if len(calls) != 1 {
				t.Fatalf("made %d calls, want 1", len(calls))
			}
			if calls[0].Auth != tc.wantAuth {
				t.Errorf("Authorization = %q, want %q", calls[0].Auth, tc.wantAuth)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"http://127.0.0.1:7433", true},
		{"http://127.8.9.10:7433", true},
		{"http://localhost:7433", true},
		{"https://LocalHost", true},
		{"http://[::1]:7433", true},
		{"http://[::ffff:127.0.0.1]:7433", true},
		{"http://192.0.2.2:7433", false},
		{"http://[fd00::2]:7433", false},
		{"http://0.0.0.0:7433", false},
		{"http://localhost.example.com:7433", false},
		{"http://127.0.0.1.example.com:7433", false},
		{"http://warren.internal", false},
		{"http://127.0.0.1@evil.example:7433", false}, // userinfo, not the host
		{"::not a url", false},
	}
	for _, tc := range tests {
		if got := isLoopback(tc.addr); got != tc.want {
			t.Errorf("isLoopback(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// TestAdminKeyNotReadWithoutHook checks that an app without a readFile
// (as in the other tests) reads no file.
func TestAdminKeyNotReadWithoutHook(t *testing.T) {
	a := &app{getenv: func(string) string { return "" }}
	if got := a.localAdminKey(); got != "" {
		t.Errorf("localAdminKey() without readFile = %q, want \"\"", got)
	}
}
