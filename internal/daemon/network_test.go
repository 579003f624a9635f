package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/network/nettest"
)

// TestNetworkEgress runs real sandboxes whose egress goes through a
// namespace of the test's own (network.netns) into a fake internet: curl
// inside the sandbox against names on and off the allow-list, a live
// policy change, open mode against the host, none with no route, and
// nothing left of it all after the daemon stops.
func TestNetworkEgress(t *testing.T) {
	w := nettest.NewWorld(t)
	t.Cleanup(func() { checkNetworkClean(t, w) }) // runs after the daemon stopped
	h := daemontest.Start(t, func(c *config.Config) {
		c.Network.NetNS = w.HostPath
		c.Network.DNSUpstream = []string{nettest.UpstreamAddr}
	})
	ctx := context.Background()
	exec := func(id, cmd string) *api.ExecResult {
		t.Helper()
		r, err := h.Client.Exec(ctx, id, &api.ExecRequest{Command: cmd})
		if err != nil {
			t.Fatalf("exec %q in %s: %v", cmd, id, err)
		}
		return r
	}
	call := func(method, path string, body any, want int) []byte {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, h.URL+path, rd)
		resp, err := h.Do(h.Authorize(req))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s; want %d", method, path, resp.StatusCode, b, want)
		}
		return b
	}
	curl := "curl -sS -m 5 "

	// The issue's own example: a create with a policy object.
	call("POST", "/v1/sessions", map[string]any{"id": "dev", "network": map[string]any{"mode": "allowlist", "allow": []string{"allowed.test", "203.0.113.30:8080"}}}, 201)
	if r := exec("dev", curl+"http://allowed.test/"); r.ExitCode != 0 || !strings.HasPrefix(r.Stdout, "hello from allowed.test") {
		t.Errorf("allowed name: %+v", r)
	}
	start := time.Now()
	if r := exec("dev", curl+"http://other.test/"); r.ExitCode == 0 {
		t.Errorf("a name off the list was fetched: %+v", r)
	} else if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a name off the list failed after %v; want at once", d)
	}
	if r := exec("dev", curl+"http://198.51.100.20/"); r.ExitCode == 0 {
		t.Errorf("an address no allowed name resolved to was fetched: %+v", r)
	}
	if r := exec("dev", curl+"http://203.0.113.30:8080/"); r.ExitCode != 0 {
		t.Errorf("an allowed address and port: %+v", r)
	}
	var den api.NetworkDenials
	json.Unmarshal(call("GET", "/v1/sessions/dev/network/denials", nil, 200), &den)
	var sawName, sawAddr bool
	for _, d := range den.Denials {
		sawName = sawName || d.Host == "other.test" && d.Proto == "dns" && strings.Contains(d.Reason, "allow-list")
		sawAddr = sawAddr || d.Host == "198.51.100.20" && d.Port == 80 && d.Proto == "tcp"
	}
	if !sawName || !sawAddr {
		t.Errorf("denials %+v; want other.test (dns) and 198.51.100.20:80 (tcp)", den.Denials)
	}

	// Live, both ways; a bad rule changes nothing.
	var pol api.NetworkPolicy
	json.Unmarshal(call("PATCH", "/v1/sessions/dev/network", map[string]any{"allow": []string{"other.test"}}, 200), &pol)
	if pol.Mode != "allowlist" || len(pol.Allow) != 1 {
		t.Errorf("PATCH answered %+v", pol)
	}
	if r := exec("dev", curl+"http://other.test/"); r.ExitCode != 0 {
		t.Errorf("a name just allowed: %+v", r)
	}
	if r := exec("dev", curl+"http://allowed.test/"); r.ExitCode == 0 {
		t.Errorf("a name just taken off the list: %+v", r)
	}
	b := call("PATCH", "/v1/sessions/dev/network", map[string]any{"allow": []string{"a.*.test"}}, 400)
	if !strings.Contains(string(b), `"invalid_argument"`) || !strings.Contains(string(b), "a.*.test") {
		t.Errorf("a bad rule: %s", b)
	}
	call("PATCH", "/v1/sessions/dev/network", map[string]any{"allow": []string{"10.0.0.0/8"}}, 400)
	if r := exec("dev", curl+"http://other.test/"); r.ExitCode != 0 {
		t.Errorf("after a refused change the policy before it must hold: %+v", r)
	}

	// Open: the internet, not the host, its daemon port or private ranges.
	h.Client.CreateSession(ctx, &api.CreateSessionRequest{ID: "open", Network: &api.NetworkPolicy{Mode: "open"}})
	if r := exec("open", curl+"http://twin.test/"); r.ExitCode != 0 {
		t.Errorf("open mode: %+v", r)
	}
	for _, u := range []string{"http://" + nettest.HostAddr + ":7433/", "http://10.99.0.1/", "http://169.254.169.254/"} {
		if r := exec("open", curl+u); r.ExitCode == 0 {
			t.Errorf("open mode reached %s: %+v", u, r)
		}
	}

	// None: no interface but lo, no route.
	call("POST", "/v1/sessions", map[string]any{"id": "quiet", "network": "none"}, 201)
	if r := exec("quiet", "ls /sys/class/net; cat /proc/net/route | wc -l"); r.Stdout != "lo\n1\n" {
		t.Errorf("mode none: %q", r.Stdout)
	}
	call("PATCH", "/v1/sessions/quiet/network", map[string]any{"mode": "open"}, 409)

	// Bad input at create.
	for _, n := range []any{"bridge", map[string]any{"mode": "allowlist", "allow": []string{"*"}}, map[string]any{"mode": "none", "allow": []string{"x.test"}}} {
		call("POST", "/v1/sessions", map[string]any{"network": n}, 400)
	}

	for _, id := range []string{"dev", "open", "quiet"} {
		if err := h.Client.DeleteSession(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	hl, err := netlink.NewHandleAt(w.Host)
	nettest.Must(t, err)
	defer hl.Close()
	links, _ := hl.LinkList()
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, "wrn") {
			t.Errorf("link %s left after its session's delete", l.Attrs().Name)
		}
	}
}

// checkNetworkClean wants no session link and no warren table left in the
// world's host namespace.
func checkNetworkClean(t *testing.T, w *nettest.World) {
	h, err := netlink.NewHandleAt(w.Host)
	nettest.Must(t, err)
	defer h.Close()
	links, _ := h.LinkList()
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, "wrn") {
			t.Errorf("leaked link %s", l.Attrs().Name)
		}
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(w.Host)))
	nettest.Must(t, err)
	tables, _ := c.ListTablesOfFamily(nftables.TableFamilyINet)
	for _, tb := range tables {
		if tb.Name == network.TableName {
			t.Errorf("nftables table %s left after the daemon stopped", tb.Name)
		}
	}
}
