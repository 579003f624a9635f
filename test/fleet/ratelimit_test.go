package fleet

import (
	"net/http"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestFleetRateLimit: a caller's rate limit holds across the fleet. On one
// node it gets its whole limit; spread over three nodes it gets about its
// limit in all, not three times it, once the nodes have shared their
// counts (an interval, 1 s).
func TestFleetRateLimit(t *testing.T) {
	testutil.RequiresRoot(t)
	const limit = 5 // requests a second, and the burst
	_, nodes, _ := newFleet(t, 3, embeddedEtcd(t), func(_ int, n *node) {
		n.extra = []string{"--rate-limit", "5", "--rate-burst", "5"}
	})
	k, err := nodes[0].c.CreateKey(bg, &api.CreateKeyRequest{Tenant: "rl"})
	if err != nil {
		t.Fatal(err)
	}
	// hammer sends requests as fast as it can through the nodes in turn
	// for d, and counts the ones let through after settle.
	hammer := func(via []*node, d, settle time.Duration) (allowed int, rate float64) {
		start := time.Now()
		for i := 0; time.Since(start) < d; i++ {
			req, _ := http.NewRequest("GET", via[i%len(via)].url+"/v1/sessions/none", nil)
			req.Header.Set("Authorization", "Bearer "+k.Secret)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusNotFound: // let through, and answered
				if time.Since(start) >= settle {
					allowed++
				}
			case http.StatusTooManyRequests:
			default:
				t.Fatalf("status %d", resp.StatusCode)
			}
			time.Sleep(2 * time.Millisecond)
		}
		return allowed, float64(allowed) / (d - settle).Seconds()
	}
	// One node: the whole limit.
	_, one := hammer(nodes[:1], 4*time.Second, 2*time.Second)
	t.Logf("through one node: %.1f requests/s let through (limit %d)", one, limit)
	if one < 0.7*limit || one > 1.5*limit {
		t.Fatalf("through one node %.1f/s let through, want about %d", one, limit)
	}
	time.Sleep(5 * time.Second) // the counts go stale
	// Three nodes: about the limit in all, where per-node buckets would
	// let three times it through.
	_, three := hammer(nodes, 6*time.Second, 2*time.Second)
	t.Logf("through three nodes: %.1f requests/s let through (limit %d; per-node buckets would give %d)", three, limit, 3*limit)
	if three > 2*limit {
		t.Fatalf("through three nodes %.1f/s let through, want about %d (not %d)", three, limit, 3*limit)
	}
	if three < 0.5*limit {
		t.Fatalf("through three nodes only %.1f/s let through, want about %d", three, limit)
	}
}
