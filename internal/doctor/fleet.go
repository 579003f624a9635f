package doctor

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/fleet/registry"
)

// maxSkew is the clock difference to etcd the fleet tolerates: forwarded
// requests carry signatures valid for 30 s, and the reaper's grace is
// counted on one node's clock; a few seconds off is fine, more is a
// misconfigured host.
const maxSkew = 5 * time.Second

// CheckFleet checks a fleet node's registry: that etcd answers (and has a
// leader), and how far this host's clock is from etcd's hosts', read from
// the Date header of each endpoint's /version (one second's resolution).
// It is run only when the fleet is configured.
func CheckFleet(ctx context.Context, reg registry.Registry, endpoints []string, client *http.Client) []Check {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out []Check
	res, err := reg.Ping(ctx)
	c := Check{Name: "fleet: etcd reachable", Required: true,
		Fix: "start etcd or fix --fleet-etcd, its TLS and auth settings; docs/FLEET.md"}
	switch {
	case err != nil:
		c.Detail = err.Error()
	case res.Leader == "":
		c.Detail = fmt.Sprintf("%d of %d endpoints answer, but the cluster has no leader (no quorum)", res.Endpoints, res.Total)
	default:
		c.OK = true
		c.Detail = fmt.Sprintf("%d of %d endpoints answer, leader %s, round trip %v", res.Endpoints, res.Total, res.Leader, res.RTT.Round(time.Microsecond))
	}
	out = append(out, c)
	if _, err := reg.Secret(ctx); err != nil && c.OK {
		out = append(out, Check{Name: "fleet: registry writable", Required: true, Detail: err.Error(),
			Fix: "the etcd user needs read and write access to the fleet prefix"})
	}
	for _, ep := range endpoints {
		out = append(out, checkSkew(ctx, ep, client))
	}
	return out
}

func checkSkew(ctx context.Context, ep string, client *http.Client) Check {
	c := Check{Name: "fleet: clock against " + ep, Fix: "synchronise the clocks (NTP, chrony or systemd-timesyncd) of every node and etcd host"}
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(ep, "/")+"/version", nil)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	sent := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		c.Detail = "no answer: " + err.Error()
		return c
	}
	resp.Body.Close()
	got := time.Now()
	date, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		c.OK, c.Detail = true, "the endpoint sends no Date header; skew unknown"
		return c
	}
	// The header has whole seconds: compare with the middle of the round
	// trip, truncated alike.
	mid := sent.Add(got.Sub(sent) / 2).Truncate(time.Second)
	skew := date.Sub(mid)
	c.Detail = fmt.Sprintf("etcd's clock is %v from ours (1 s resolution)", skew)
	c.OK = skew.Abs() <= maxSkew
	return c
}
