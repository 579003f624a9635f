package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/network/nettest"
)

// TestNetworkCLIRealDaemon runs the egress commands against a real daemon
// whose sandboxes reach the test's fake internet (internal/network/nettest):
// create with --allow, a refused name in network denials, a rule added
// live, and run with a network deleting its session afterwards.
func TestNetworkCLIRealDaemon(t *testing.T) {
	w := nettest.NewWorld(t)
	h := daemontest.Start(t, func(c *config.Config) {
		c.Network.NetNS = w.HostPath
		c.Network.DNSUpstream = []string{nettest.UpstreamAddr}
	})
	env := map[string]string{"WARREN_ADDR": h.URL, "WARREN_TOKEN": h.AdminKey}
	warren := func(want int, args ...string) string {
		t.Helper()
		out, errOut, code := runLocal(t, env, args...)
		if code != want {
			t.Fatalf("warren %q: exit %d, want %d; stdout %q stderr %q", args, code, want, out, errOut)
		}
		return out
	}
	curl := "curl -sS -m 5 "

	warren(0, "session", "create", "--id", "cli", "--allow", "allowed.test")
	t.Cleanup(func() { h.Client.DeleteSession(context.Background(), "cli") })
	if out := warren(0, "exec", "cli", "--", curl+"http://allowed.test/"); !strings.HasPrefix(out, "hello from allowed.test") {
		t.Errorf("allowed name: %q", out)
	}
	warren(6, "exec", "cli", "--", curl+"http://other.test/") // curl: could not resolve host
	if out := warren(0, "network", "denials", "cli"); !strings.Contains(out, "other.test") || !strings.Contains(out, "not on the allow-list") {
		t.Errorf("network denials:\n%s", out)
	}
	if out := warren(0, "network", "allow", "cli", "other.test"); !strings.Contains(out, `"other.test"`) || !strings.Contains(out, `"allowed.test"`) {
		t.Errorf("network allow answered %s", out)
	}
	if out := warren(0, "exec", "cli", "--", curl+"http://other.test/"); out == "" {
		t.Error("a name just allowed gave no page")
	}
	if out := warren(0, "network", "get", "cli"); !strings.Contains(out, `"mode": "allowlist"`) {
		t.Errorf("network get: %s", out)
	}
	if _, errOut, code := runLocal(t, env, "network", "allow", "cli", "a.*.test"); code != 1 || !strings.Contains(errOut, "invalid_argument") || !strings.Contains(errOut, "a.*.test") {
		t.Errorf("a bad rule: exit %d, stderr %q", code, errOut)
	}

	if out := warren(0, "run", "--allow", "allowed.test", "--", curl+"http://allowed.test/"); !strings.HasPrefix(out, "hello from allowed.test") {
		t.Errorf("run with --allow: %q", out)
	}
	sessions, err := h.Client.ListSessions(t.Context())
	if err != nil || len(sessions) != 1 || sessions[0].ID != "cli" {
		t.Errorf("sessions after run = %+v, %v; want only cli (run deletes its own)", sessions, err)
	}
}
