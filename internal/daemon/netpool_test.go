package daemon_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/network/nettest"
)

// TestWarmPoolNetwork: a session with a network takes a warm sandbox and
// gets its network at claim, with its own policy.
func TestWarmPoolNetwork(t *testing.T) {
	w := nettest.NewWorld(t)
	t.Cleanup(func() { checkNetworkClean(t, w) })
	h := daemontest.Start(t, func(c *config.Config) {
		c.Session.PoolSize = 1
		c.Network.NetNS = w.HostPath
		c.Network.DNSUpstream = []string{nettest.UpstreamAddr}
	})
	m := h.Daemon.Manager()
	waitPool(t, m, 1)
	warm := m.WarmSandboxes()
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "wn", Network: &api.NetworkPolicy{Allow: []string{"allowed.test"}}}); err != nil {
		t.Fatal(err)
	}
	info, err := m.Get(bg, "default", "wn")
	if err != nil || !slices.Contains(warm, info.Name) {
		t.Fatalf("a create with a network started cold (%v, pool %v)", err, warm)
	}
	r, err := h.Client.Exec(bg, "wn", &api.ExecRequest{Command: "curl -sS -m 5 http://allowed.test/; curl -sS -m 5 http://other.test/"})
	if err != nil || !strings.HasPrefix(r.Stdout, "hello from allowed.test") || r.ExitCode == 0 {
		t.Errorf("a warm session's network: %+v %v", r, err)
	}
	if err := h.Client.DeleteSession(bg, "wn"); err != nil {
		t.Fatal(err)
	}
}
