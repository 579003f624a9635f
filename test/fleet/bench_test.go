package fleet

import (
	"sort"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/testutil"
)

// BenchmarkExec measures what forwarding adds to an exec: `echo hi` in one
// session, through the node that owns it (local) and through another
// (forwarded: one more HTTP hop on loopback, the signature and the cache
// lookup). It reports the median besides the mean.
//
//	go test -run '^$' -bench Exec -benchtime 2000x ./test/fleet/
func BenchmarkExec(b *testing.B) {
	testutil.RequiresRoot(b)
	_, nodes, reg := newFleet(b, 2, embeddedEtcd(b))
	if _, err := nodes[0].c.CreateSession(bg, &api.CreateSessionRequest{ID: "bench"}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nodes[0].c.DeleteSession(bg, "bench") })
	r, err := reg.GetSession(bg, daemon.BootstrapTenant, "bench")
	if err != nil {
		b.Fatal(err)
	}
	local, remote := nodes[0], nodes[1]
	if r.Node != local.name {
		local, remote = remote, local
	}
	for _, tc := range []struct {
		name string
		n    *node
	}{{"local", local}, {"forwarded", remote}} {
		b.Run(tc.name, func(b *testing.B) {
			req := &api.ExecRequest{Command: "echo hi"}
			// Warm the connections (and the forwarder's to the owner).
			for range 20 {
				if _, err := tc.n.c.Exec(bg, "bench", req); err != nil {
					b.Fatal(err)
				}
			}
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				res, err := tc.n.c.Exec(bg, "bench", req)
				took = append(took, time.Since(start))
				if err != nil || res.Stdout != "hi\n" {
					b.Fatalf("exec = %+v, %v", res, err)
				}
			}
			sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
		})
	}
}
