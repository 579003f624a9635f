package daemon_test

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/network/nettest"
)

// TestNetworkRestartKeep: a session's egress survives a daemon restart
// with --shutdown=keep. While no daemon runs, its rules stay in force (a
// pinned address is reachable); the next daemon adopts it: DNS, the name
// check and the policy are back, unchanged, and it can still be changed.
func TestNetworkRestartKeep(t *testing.T) {
	w := nettest.NewWorld(t)
	t.Cleanup(func() { checkNetworkClean(t, w) })
	netcfg := func(c *config.Config) {
		c.Network.NetNS = w.HostPath
		c.Network.DNSUpstream = []string{nettest.UpstreamAddr}
	}
	h1 := daemontest.Start(t, func(c *config.Config) { netcfg(c); c.Shutdown = config.ShutdownKeep })
	if _, err := h1.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "kept", Network: &api.NetworkPolicy{Allow: []string{"allowed.test"}}}); err != nil {
		t.Fatal(err)
	}
	curl := func(h *daemontest.Harness, url string) *api.ExecResult {
		t.Helper()
		r, err := h.Client.Exec(bg, "kept", &api.ExecRequest{Command: "curl -sS -m 5 " + url})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := curl(h1, "http://allowed.test/"); !strings.HasPrefix(r.Stdout, "hello from allowed.test") {
		t.Fatalf("before the restart: %+v", r)
	}
	h1.Stop()

	// No daemon: the sandbox's rules hold.
	pid := storedPid(t, h1.DataDir, "kept")
	ns, err := netns.GetFromPath(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	dial := func(addr string) error {
		return nettest.Do(ns, func() error {
			c, err := net.DialTimeout("tcp4", addr, 2*time.Second)
			if err == nil {
				c.Close()
			}
			return err
		})
	}
	if err := dial("198.51.100.10:7"); err != nil {
		t.Errorf("a pinned address while no daemon runs: %v", err)
	}
	if err := dial("198.51.100.20:7"); err == nil {
		t.Errorf("an address off the policy while no daemon runs was reachable")
	}

	h2 := daemontest.Start(t, func(c *config.Config) {
		netcfg(c)
		c.DataDir, c.CgroupParent, c.Shutdown = h1.DataDir, h1.Config.CgroupParent, config.ShutdownDestroy
	})
	if r := curl(h2, "http://allowed.test/"); !strings.HasPrefix(r.Stdout, "hello from allowed.test") {
		t.Errorf("after the restart: %+v", r)
	}
	if r := curl(h2, "http://other.test/"); r.ExitCode == 0 {
		t.Errorf("after the restart a name off the list was fetched: %+v", r)
	}
	r := as(t, h2, bearer(h2.AdminKey), "GET", "/v1/sessions/kept/network", "")
	var p api.NetworkPolicy
	if r.status != 200 || json.Unmarshal(r.body, &p) != nil || p.Mode != "allowlist" || len(p.Allow) != 1 {
		t.Errorf("the policy after the restart: %d %s", r.status, r.body)
	}
	if r := as(t, h2, bearer(h2.AdminKey), "PATCH", "/v1/sessions/kept/network", `{"allow":["other.test"]}`); r.status != 200 {
		t.Errorf("PATCH after the restart: %d %s", r.status, r.body)
	}
	if r := curl(h2, "http://other.test/"); !strings.HasPrefix(r.Stdout, "hello from other.test") {
		t.Errorf("after a PATCH on the adopted session: %+v", r)
	}
	if err := h2.Client.DeleteSession(bg, "kept"); err != nil {
		t.Fatal(err)
	}
}
