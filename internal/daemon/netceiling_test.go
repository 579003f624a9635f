package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/network/nettest"
)

// TestNetworkCeiling: the daemon's default network for sessions that ask
// for none, and tenants' ceilings (held to none; a maximum allow-list),
// at create and PATCH, with the reason in a 403.
func TestNetworkCeiling(t *testing.T) {
	w := nettest.NewWorld(t)
	t.Cleanup(func() { checkNetworkClean(t, w) })
	h := daemontest.Start(t, func(c *config.Config) {
		c.Network.NetNS = w.HostPath
		c.Network.DNSUpstream = []string{nettest.UpstreamAddr}
		c.Session.DefaultNetwork = "allowlist"
		c.Session.DefaultNetworkAllow = []string{"allowed.test:443"}
	})
	admin := bearer(h.AdminKey)
	put := func(name, body string, want int) reply {
		t.Helper()
		r := as(t, h, admin, "PUT", "/v1/tenants/"+name, body)
		if r.status != want {
			t.Fatalf("PUT tenant %s %s = %d %s; want %d", name, body, r.status, r.body, want)
		}
		return r
	}
	put("held", `{"policy":{"network":{"max_mode":"none"}}}`, 200)
	r := put("capped", `{"policy":{"network":{"allow":["allowed.test","*.wild.test"]}}}`, 200)
	var ten api.Tenant
	if json.Unmarshal(r.body, &ten) != nil || ten.Policy.Network == nil || ten.Policy.Network.MaxMode != "" || len(ten.Policy.Network.Allow) != 2 {
		t.Errorf("PUT tenant answered %s", r.body)
	}
	for _, bad := range []string{`{"policy":{"network":{"max_mode":"wide"}}}`, `{"policy":{"network":{"max_mode":"open","allow":["a.test"]}}}`, `{"policy":{"network":{"allow":["a.*.test"]}}}`} {
		if r := put("bad", bad, 400); r.err.Error.Code != "invalid_argument" {
			t.Errorf("PUT %s: %s", bad, r.body)
		}
	}
	held := bearer(newKey(t, h, api.CreateKeyRequest{Tenant: "held", Name: "h"}).Secret)
	capped := bearer(newKey(t, h, api.CreateKeyRequest{Tenant: "capped", Name: "c"}).Secret)

	network := func(cred map[string][]string, id string) api.NetworkPolicy {
		t.Helper()
		r := as(t, h, cred, "GET", "/v1/sessions/"+id+"/network", "")
		var p api.NetworkPolicy
		if r.status != 200 || json.Unmarshal(r.body, &p) != nil {
			t.Fatalf("GET network of %s = %d %s", id, r.status, r.body)
		}
		return p
	}
	create := func(cred map[string][]string, body string, want int, reason string) {
		t.Helper()
		r := as(t, h, cred, "POST", "/v1/sessions", body)
		if r.status != want || want == 403 && (r.err.Error.Code != "permission_denied" || !strings.Contains(r.err.Error.Message, reason)) {
			t.Errorf("create %s = %d %s; want %d naming %q", body, r.status, r.body, want, reason)
		}
	}
	// The default applies to a session that names no network.
	create(admin, `{"id":"d1"}`, 201, "")
	if p := network(admin, "d1"); p.Mode != "allowlist" || len(p.Allow) != 1 || p.Allow[0] != "allowed.test:443" {
		t.Errorf("a session without a network got %+v; want the daemon's default", p)
	}
	// Held to none: the default becomes none; asking for more is 403.
	create(held, `{"id":"h1"}`, 201, "")
	if p := network(held, "h1"); p.Mode != "none" {
		t.Errorf("a held tenant's session got %+v; want none", p)
	}
	create(held, `{"id":"h2","network":"open"}`, 403, "beyond the tenant's ceiling")
	create(held, `{"id":"h2","network":{"allow":["allowed.test"]}}`, 403, "at most none")
	// A maximum allow-list: rules inside it pass, others are 403 naming
	// the rule; open is beyond it.
	create(capped, `{"id":"c1","network":{"allow":["a.wild.test","allowed.test:443"],"deny":["gist.wild.test"]}}`, 201, "")
	create(capped, `{"id":"c2","network":{"allow":["other.test"]}}`, 403, `"other.test" is outside the tenant's maximum allow-list`)
	create(capped, `{"id":"c2","network":"open"}`, 403, "at most allowlist")
	// The default (allowed.test:443) is inside the cap.
	create(capped, `{"id":"c3"}`, 201, "")
	if p := network(capped, "c3"); p.Mode != "allowlist" {
		t.Errorf("capped tenant's default session: %+v", p)
	}
	// PATCH is held the same way, and a refused PATCH changes nothing.
	if r := as(t, h, capped, "PATCH", "/v1/sessions/c1/network", `{"allow":["other.test"]}`); r.status != 403 || r.err.Error.Code != "permission_denied" || !strings.Contains(r.err.Error.Message, "other.test") {
		t.Errorf("PATCH beyond the ceiling = %d %s", r.status, r.body)
	}
	if r := as(t, h, capped, "PATCH", "/v1/sessions/c1/network", `{"mode":"open"}`); r.status != 403 {
		t.Errorf("PATCH to open beyond the ceiling = %d %s", r.status, r.body)
	}
	if p := network(capped, "c1"); len(p.Allow) != 2 || p.Allow[0] != "a.wild.test" {
		t.Errorf("after refused PATCHes the policy is %+v", p)
	}
	if r := as(t, h, capped, "PATCH", "/v1/sessions/c1/network", `{"allow":["x.wild.test"]}`); r.status != 200 {
		t.Errorf("PATCH inside the ceiling = %d %s", r.status, r.body)
	}

	// Accounting: the session's bytes in its usage, denials in the
	// metrics and the audit log (host and port, no payload).
	exec := func(id, cmd string) {
		t.Helper()
		r := as(t, h, capped, "POST", "/v1/sessions/"+id+"/exec", `{"command":"`+cmd+`"}`)
		if r.status != 200 {
			t.Fatalf("exec %s = %d %s", cmd, r.status, r.body)
		}
	}
	exec("c1", "curl -sS -m 5 -o /dev/null http://x.wild.test/; curl -sS -m 5 http://other.test/")
	var info api.Session
	if r := as(t, h, capped, "GET", "/v1/sessions/c1", ""); json.Unmarshal(r.body, &info) != nil || info.Usage == nil ||
		info.Usage.NetworkInBytes < 100 || info.Usage.NetworkOutBytes < 50 {
		t.Errorf("usage after a download: %s", r.body)
	}
	if r := as(t, h, admin, "GET", "/metrics", ""); !strings.Contains(string(r.body), `warren_network_denials_total{kind="dns_not_allowed"} `) ||
		strings.Contains(string(r.body), `warren_network_denials_total{kind="dns_not_allowed"} 0`) ||
		!strings.Contains(string(r.body), `warren_network_bytes_total{direction="in"}`) {
		t.Errorf("metrics lack the network's: %d %s", r.status, grepLines(string(r.body), "warren_network"))
	}
	if r := as(t, h, admin, "GET", "/v1/audit?session=c1", ""); !strings.Contains(string(r.body), `"target":"dns other.test (dns_not_allowed)"`) {
		t.Errorf("audit log lacks the denial: %s", r.body)
	}
	for _, s := range []struct {
		cred map[string][]string
		id   string
	}{{admin, "d1"}, {held, "h1"}, {capped, "c1"}, {capped, "c3"}} {
		if r := as(t, h, s.cred, "DELETE", "/v1/sessions/"+s.id, ""); r.status != 204 && r.status != 200 {
			t.Errorf("delete %s = %d %s", s.id, r.status, r.body)
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
