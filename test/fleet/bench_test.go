package fleet

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
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

// BenchmarkCreate measures creates per second through one node of a fleet
// of 1 and of 3 (placement spreading them): three clients, each creating
// and deleting a session in a loop, so that no node passes its capacity.
//
//	go test -run '^$' -bench Create -benchtime 60x ./test/fleet/
func BenchmarkCreate(b *testing.B) {
	testutil.RequiresRoot(b)
	for _, size := range []int{1, 3} {
		b.Run(fmt.Sprint(size, "-nodes"), func(b *testing.B) {
			_, nodes, _ := newFleet(b, size, embeddedEtcd(b))
			entry := nodes[0]
			const clients = 3
			var next atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			b.ResetTimer()
			for c := range clients {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						id := fmt.Sprintf("b%d", c)
						if _, err := entry.c.CreateSession(bg, &api.CreateSessionRequest{ID: id}); err != nil {
							b.Errorf("create: %v", err)
							return
						}
						if err := entry.c.DeleteSession(bg, id); err != nil {
							b.Errorf("delete: %v", err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "creates/s")
		})
	}
}
