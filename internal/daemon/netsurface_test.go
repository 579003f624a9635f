package daemon_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/network/nettest"
)

// TestNetworkSurfaces drives egress through the Go client and the MCP
// tools against a real daemon whose sandboxes reach the test's fake
// internet: create with a policy (MCP), a refused name read back as a
// denial (MCP and client), a live change (client), and the errors of a
// session without a network.
func TestNetworkSurfaces(t *testing.T) {
	w := nettest.NewWorld(t)
	t.Cleanup(func() { checkNetworkClean(t, w) })
	h := daemontest.Start(t, func(c *config.Config) {
		c.Network.NetNS = w.HostPath
		c.Network.DNSUpstream = []string{nettest.UpstreamAddr}
	})
	ctx := context.Background()
	cs := mcpConnect(t, h, h.AdminKey)
	curl := "curl -sS -m 5 "

	var sess struct{ ID string }
	callOK(t, cs, "create_session", map[string]any{"id": "agent",
		"network": map[string]any{"allow": []string{"allowed.test"}}}, &sess)
	t.Cleanup(func() { h.Client.DeleteSession(context.WithoutCancel(ctx), "agent") })
	var res struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	callOK(t, cs, "exec", map[string]any{"session_id": "agent", "command": curl + "http://allowed.test/"}, &res)
	if res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "hello from allowed.test") {
		t.Errorf("allowed name over MCP: %+v", res)
	}
	callOK(t, cs, "exec", map[string]any{"session_id": "agent", "command": curl + "http://other.test/"}, &res)
	if res.ExitCode == 0 {
		t.Errorf("a name off the list was fetched: %+v", res)
	}

	var den struct{ Denials []api.NetworkDenial }
	callOK(t, cs, "network_denials", map[string]any{"session_id": "agent"}, &den)
	isOther := func(d api.NetworkDenial) bool {
		return d.Host == "other.test" && d.Proto == "dns" && d.Reason == "not on the allow-list"
	}
	if !slices.ContainsFunc(den.Denials, isOther) {
		t.Errorf("network_denials = %+v; want other.test refused by DNS", den.Denials)
	}
	ds, err := h.Client.NetworkDenials(ctx, "agent")
	if err != nil || !slices.ContainsFunc(ds, isOther) {
		t.Errorf("client NetworkDenials = %+v, %v; want other.test", ds, err)
	}

	// The Go client: read and change the policy live.
	p, err := h.Client.GetNetwork(ctx, "agent")
	if err != nil || p.Mode != "allowlist" || !slices.Equal(p.Allow, []string{"allowed.test"}) {
		t.Fatalf("GetNetwork = %+v, %v", p, err)
	}
	p, err = h.Client.UpdateNetwork(ctx, "agent", &api.NetworkPolicy{Allow: []string{"allowed.test", "other.test"}})
	if err != nil || p.Mode != "allowlist" || len(p.Allow) != 2 {
		t.Fatalf("UpdateNetwork = %+v, %v", p, err)
	}
	callOK(t, cs, "exec", map[string]any{"session_id": "agent", "command": curl + "http://other.test/"}, &res)
	if res.ExitCode != 0 {
		t.Errorf("a name just allowed through the client: %+v", res)
	}
	_, err = h.Client.UpdateNetwork(ctx, "agent", &api.NetworkPolicy{Allow: []string{"a.*.test"}})
	if client.Code(err) != "invalid_argument" || !strings.Contains(err.Error(), "a.*.test") {
		t.Errorf("UpdateNetwork with a bad rule: %v; want invalid_argument naming it", err)
	}

	// A session without a network: no denials, and no live change.
	if _, err := h.Client.CreateSession(ctx, &api.CreateSessionRequest{ID: "quiet"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Client.DeleteSession(context.WithoutCancel(ctx), "quiet") })
	callOK(t, cs, "network_denials", map[string]any{"session_id": "quiet"}, &den)
	if den.Denials == nil || len(den.Denials) != 0 {
		t.Errorf("network_denials of a none session = %#v; want an empty list", den.Denials)
	}
	if p, err := h.Client.GetNetwork(ctx, "quiet"); err != nil || p.Mode != "none" {
		t.Errorf("GetNetwork of a none session = %+v, %v", p, err)
	}
	if _, err := h.Client.UpdateNetwork(ctx, "quiet", &api.NetworkPolicy{Mode: "open"}); client.Code(err) != "conflict" {
		t.Errorf("UpdateNetwork of a none session: %v; want conflict", err)
	}
	callErr(t, cs, "network_denials", map[string]any{"session_id": "nope"}, "not_found")
	callErr(t, cs, "create_session", map[string]any{"network": map[string]any{"allow": []string{"*"}}}, "invalid_argument")
}
