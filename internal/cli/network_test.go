package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/warrenhq/warren/api"
)

func TestNetworkCommands(t *testing.T) {
	sess := mustJSON(t, api.Session{ID: "dev", State: "running"})
	policy := api.NetworkPolicy{Mode: "allowlist", Allow: []string{"pypi.org:443"}, Deny: []string{"evil.pypi.org"}}
	ok := `{"stdout":"hi\n","stderr":"","exit_code":0,"duration_ms":1,"timed_out":false,"truncated":false,"shell_restarted":false,"oom_killed":false}`
	tests := []struct {
		name       string
		args       []string
		routes     map[string]reply
		wantCalls  []call // Body compared as JSON
		wantStdout string
		wantStderr string
		wantCode   int
	}{
		{
			name:       "session create --allow implies allowlist",
			args:       []string{"session", "create", "--id", "dev", "--allow", "pypi.org:443", "--allow", "*.pythonhosted.org", "--deny", "evil.pypi.org"},
			routes:     map[string]reply{"POST /v1/sessions": {status: 201, body: sess}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions", Body: `{"id":"dev","network":{"mode":"allowlist","allow":["pypi.org:443","*.pythonhosted.org"],"deny":["evil.pypi.org"]}}`}},
			wantStdout: "dev\n",
		},
		{
			name:       "session create --network open",
			args:       []string{"session", "create", "--network", "open"},
			routes:     map[string]reply{"POST /v1/sessions": {status: 201, body: sess}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions", Body: `{"network":{"mode":"open"}}`}},
			wantStdout: "dev\n",
		},
		{
			name:     "session create with a bad --network",
			args:     []string{"session", "create", "--network", "closed"},
			wantCode: 1, wantStderr: "warren: --network \"closed\": want none, open or allowlist\n",
		},
		{
			name:     "session create --deny alone",
			args:     []string{"session", "create", "--deny", "example.com"},
			wantCode: 1, wantStderr: "warren: --deny needs --network open or allowlist, or --allow\n",
		},
		{
			name:     "session create --network none with rules",
			args:     []string{"session", "create", "--network", "none", "--allow", "example.com"},
			wantCode: 1, wantStderr: "warren: --allow and --deny need --network open or allowlist, not none\n",
		},
		{
			name: "session create, a rule the daemon refuses",
			args: []string{"session", "create", "--allow", "*.com"},
			routes: map[string]reply{"POST /v1/sessions": {status: 400,
				body: `{"error":{"code":"invalid_argument","message":"allow rule \"*.com\": a wildcard needs at least two labels after it"}}`}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions", Body: `{"network":{"mode":"allowlist","allow":["*.com"]}}`}},
			wantCode:   1,
			wantStderr: "warren: create session: invalid_argument: allow rule \"*.com\": a wildcard needs at least two labels after it\n",
		},
		{
			name: "run with --allow creates, execs and deletes",
			args: []string{"run", "--image", "py", "--allow", "pypi.org", "--", "echo", "hi"},
			routes: map[string]reply{
				"POST /v1/sessions":          {status: 201, body: sess},
				"POST /v1/sessions/dev/exec": {status: 200, body: ok},
				"DELETE /v1/sessions/dev":    {status: 204},
			},
			wantCalls: []call{
				{Method: "POST", Path: "/v1/sessions", Body: `{"image":"py","network":{"mode":"allowlist","allow":["pypi.org"]}}`},
				{Method: "POST", Path: "/v1/sessions/dev/exec", Body: `{"command":"echo hi"}`},
				{Method: "DELETE", Path: "/v1/sessions/dev"},
			},
			wantStdout: "hi\n",
		},
		{
			name: "run with a network deletes the session when the exec fails",
			args: []string{"run", "--network", "open", "--", "true"},
			routes: map[string]reply{
				"POST /v1/sessions":       {status: 201, body: sess},
				"DELETE /v1/sessions/dev": {status: 204},
			},
			wantCalls: []call{
				{Method: "POST", Path: "/v1/sessions", Body: `{"network":{"mode":"open"}}`},
				{Method: "POST", Path: "/v1/sessions/dev/exec", Body: `{"command":"true"}`},
				{Method: "DELETE", Path: "/v1/sessions/dev"},
			},
			wantCode:   1,
			wantStderr: "warren: run: not_found: no route POST /v1/sessions/dev/exec\n",
		},
		{
			name:       "run without a network uses /v1/run",
			args:       []string{"run", "--", "true"},
			routes:     map[string]reply{"POST /v1/run": {status: 200, body: ok}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/run", Body: `{"command":"true"}`}},
			wantStdout: "hi\n",
		},
		{
			name:       "network get",
			args:       []string{"network", "get", "dev"},
			routes:     map[string]reply{"GET /v1/sessions/dev/network": {status: 200, body: mustJSON(t, policy)}},
			wantCalls:  []call{{Method: "GET", Path: "/v1/sessions/dev/network"}},
			wantStdout: indentJSON(t, policy),
		},
		{
			name: "network allow adds to the rules",
			args: []string{"network", "allow", "dev", "example.com", "pypi.org:443"},
			routes: map[string]reply{
				"GET /v1/sessions/dev/network":   {status: 200, body: mustJSON(t, policy)},
				"PATCH /v1/sessions/dev/network": {status: 200, body: `{"mode":"allowlist","allow":["pypi.org:443","example.com"],"deny":["evil.pypi.org"]}`},
			},
			wantCalls: []call{
				{Method: "GET", Path: "/v1/sessions/dev/network"},
				{Method: "PATCH", Path: "/v1/sessions/dev/network", Body: `{"mode":"allowlist","allow":["pypi.org:443","example.com"],"deny":["evil.pypi.org"]}`},
			},
			wantStdout: indentJSON(t, api.NetworkPolicy{Mode: "allowlist", Allow: []string{"pypi.org:443", "example.com"}, Deny: []string{"evil.pypi.org"}}),
		},
		{
			name: "network deny adds a deny rule",
			args: []string{"network", "deny", "dev", "gist.github.com"},
			routes: map[string]reply{
				"GET /v1/sessions/dev/network":   {status: 200, body: `{"mode":"open"}`},
				"PATCH /v1/sessions/dev/network": {status: 200, body: `{"mode":"open","deny":["gist.github.com"]}`},
			},
			wantCalls: []call{
				{Method: "GET", Path: "/v1/sessions/dev/network"},
				{Method: "PATCH", Path: "/v1/sessions/dev/network", Body: `{"mode":"open","deny":["gist.github.com"]}`},
			},
			wantStdout: indentJSON(t, api.NetworkPolicy{Mode: "open", Deny: []string{"gist.github.com"}}),
		},
		{
			name: "network allow on a session without a network",
			args: []string{"network", "allow", "dev", "example.com"},
			routes: map[string]reply{
				"GET /v1/sessions/dev/network": {status: 200, body: `{"mode":"none"}`},
				"PATCH /v1/sessions/dev/network": {status: 409,
					body: `{"error":{"code":"conflict","message":"session \"dev\" has network none"}}`},
			},
			wantCalls: []call{
				{Method: "GET", Path: "/v1/sessions/dev/network"},
				{Method: "PATCH", Path: "/v1/sessions/dev/network", Body: `{"mode":"none","allow":["example.com"]}`},
			},
			wantCode:   1,
			wantStderr: "warren: allow on network of dev: conflict: session \"dev\" has network none\n",
		},
		{
			name:       "network set with no rules clears them",
			args:       []string{"network", "set", "dev"},
			routes:     map[string]reply{"PATCH /v1/sessions/dev/network": {status: 200, body: `{"mode":"allowlist"}`}},
			wantCalls:  []call{{Method: "PATCH", Path: "/v1/sessions/dev/network", Body: `{}`}},
			wantStdout: indentJSON(t, api.NetworkPolicy{Mode: "allowlist"}),
		},
		{
			name:       "network set --network open --deny",
			args:       []string{"network", "set", "dev", "--network", "open", "--deny", "10.0.0.0/8"},
			routes:     map[string]reply{"PATCH /v1/sessions/dev/network": {status: 200, body: `{"mode":"open","deny":["10.0.0.0/8"]}`}},
			wantCalls:  []call{{Method: "PATCH", Path: "/v1/sessions/dev/network", Body: `{"mode":"open","deny":["10.0.0.0/8"]}`}},
			wantStdout: indentJSON(t, api.NetworkPolicy{Mode: "open", Deny: []string{"10.0.0.0/8"}}),
		},
		{
			name:     "network set --network none",
			args:     []string{"network", "set", "dev", "--network", "none"},
			wantCode: 1, wantStderr: "warren: --network none: a running session cannot change to none (delete it, or set no rules)\n",
		},
		{
			name: "network denials",
			args: []string{"network", "denials", "dev"},
			routes: map[string]reply{"GET /v1/sessions/dev/network/denials": {status: 200, body: mustJSON(t, api.NetworkDenials{Denials: []api.NetworkDenial{
				{Time: now.Add(-2 * time.Minute), Host: "example.com", Port: 0, Proto: "dns", Reason: "not on the allow-list"},
				{Time: now.Add(-time.Minute), Host: "198.51.100.20", Port: 443, Proto: "tcp", Reason: "no allowed name resolved to this address"},
			}})}},
			wantCalls: []call{{Method: "GET", Path: "/v1/sessions/dev/network/denials"}},
			wantStdout: "" +
				"TIME    HOST           PORT  PROTO  REASON\n" +
				"2m ago  example.com    0     dns    not on the allow-list\n" +
				"1m ago  198.51.100.20  443   tcp    no allowed name resolved to this address\n",
		},
		{
			name:       "network denials --json, none",
			args:       []string{"network", "denials", "dev", "--json"},
			routes:     map[string]reply{"GET /v1/sessions/dev/network/denials": {status: 200, body: `{"denials":[]}`}},
			wantCalls:  []call{{Method: "GET", Path: "/v1/sessions/dev/network/denials"}},
			wantStdout: "[]\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFakeAPI(t, tc.routes)
			stdout, stderr, code := runCLI(t, srv, "", tc.args...)
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tc.wantCode, stderr)
			}
			if diff := cmp.Diff(tc.wantStdout, stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStderr, stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			got := f.recorded()
			if len(got) != len(tc.wantCalls) {
				t.Fatalf("made %d calls, want %d: %+v", len(got), len(tc.wantCalls), got)
			}
			for i, want := range tc.wantCalls {
				g := got[i]
				if g.Method != want.Method || g.Path != want.Path {
					t.Errorf("call %d = %s %s, want %s %s", i, g.Method, g.Path, want.Method, want.Path)
				}
				if !sameJSON(t, want.Body, g.Body) {
					t.Errorf("call %d body = %s, want %s", i, g.Body, want.Body)
				}
				if !strings.HasPrefix(g.Auth, "Bearer ") {
					t.Errorf("call %d sent no token", i)
				}
			}
		})
	}
}
