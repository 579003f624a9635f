package network

import (
	"fmt"
	"testing"

	"github.com/warrenhq/warren/internal/network/nettest"
)

// BenchmarkAttach measures what a session's network adds to its create
// (the veth pair, its addresses and route, the nft chain and sets, the
// forwarder's listeners) and, in the detach cases, to its delete too.
func BenchmarkAttach(b *testing.B) {
	for _, c := range []struct {
		mode        string
		detachTimed bool
	}{{"open", false}, {"allowlist", false}, {"open", true}} {
		mode, detachTimed := c.mode, c.detachTimed
		name := mode
		if detachTimed {
			name += "+detach"
		}
		b.Run(name, func(b *testing.B) {
			w := nettest.NewWorld(b)
			m, err := New(Config{NetNS: w.HostPath, Upstream: []string{upstreamAddr}})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			p, err := ParsePolicy(mode, map[string][]string{"open": nil, "allowlist": {"allowed.test", "*.wild.test", "203.0.113.0/24:8080"}}[mode], nil, m.Blocked)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				ns, path, err := nettest.Create()
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				name := fmt.Sprintf("b%d", i)
				if _, err := m.Attach(name, path, p); err != nil {
					b.Fatal(err)
				}
				if !detachTimed {
					b.StopTimer()
				}
				if err := m.Detach(name); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				ns.Close()
				b.StartTimer()
			}
		})
	}
}
