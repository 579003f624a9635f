package daemon_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/network/nettest"
)

// BenchmarkCreateNetwork times cold creates (no warm pool) over REST with
// network none, allowlist and open: what a session's network adds to a
// create (the link, the rules, the forwarder and the name check's
// listeners, resolv.conf). Each session is deleted after, untimed.
func BenchmarkCreateNetwork(b *testing.B) {
	w := nettest.NewWorld(b)
	h := daemontest.Start(b, func(c *config.Config) {
		c.Session.PoolSize, c.Auth.RateLimit = 0, 0
		c.Network.NetNS = w.HostPath
		c.Network.DNSUpstream = []string{nettest.UpstreamAddr}
	})
	for _, c := range []struct {
		name string
		net  *api.NetworkPolicy
	}{
		{"none", nil},
		{"allowlist", &api.NetworkPolicy{Allow: []string{"allowed.test", "*.wild.test", "203.0.113.0/24:8080"}}},
		{"open", &api.NetworkPolicy{Mode: "open"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var ts timings
			i := 0
			for b.Loop() {
				i++
				id := c.name + strconv.Itoa(i)
				t0 := time.Now()
				if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: id, Network: c.net}); err != nil {
					b.Fatal(err)
				}
				ts = append(ts, time.Since(t0))
				b.StopTimer()
				if err := h.Client.DeleteSession(bg, id); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			ts.report(b)
		})
	}
}
