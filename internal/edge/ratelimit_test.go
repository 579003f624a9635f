package edge

import (
	"log/slog"
	"testing"

	"github.com/warrenhq/warren/internal/auth"
)

// TestRateShares: the edge counts each caller's requests (refused ones
// too) for the fleet, and a share cuts the caller's bucket here, for
// callers that exist and for those that come later.
func TestRateShares(t *testing.T) {
	e := New(Config{Log: slog.New(slog.DiscardHandler), RateLimit: 0.001, RateBurst: 10})
	a, b := &auth.Identity{Tenant: "t", KeyID: "ka"}, &auth.Identity{Tenant: "t", KeyID: "kb"}
	allowed := func(id *auth.Identity, n int) int {
		ok := 0
		for range n {
			if e.limits.allow(id) == nil {
				ok++
			}
		}
		return ok
	}
	if got := allowed(a, 4); got != 4 {
		t.Fatalf("%d of 4 allowed under a burst of 10", got)
	}
	if c := e.RateCounts(); len(c) != 1 || c["ka"] != 4 {
		t.Fatalf("counts = %v, want ka 4", c)
	}
	if c := e.RateCounts(); len(c) != 0 {
		t.Fatalf("counts again = %v, want none (read resets them)", c)
	}
	// A third of the limit here: a's bucket holds 3 now (rounded from
	// 10/3), b (not yet seen) gets its share when it comes.
	e.SetRateShares(map[string]float64{"ka": 1.0 / 3, "kb": 0.5})
	if got := allowed(a, 10); got != 3 {
		t.Fatalf("a with a third of its limit: %d allowed, want 3", got)
	}
	if got := allowed(b, 10); got != 5 {
		t.Fatalf("b with half of its limit: %d allowed, want 5", got)
	}
	if c := e.RateCounts(); c["ka"] != 10 || c["kb"] != 10 {
		t.Fatalf("counts = %v, want 10 each (refused requests count: the share follows demand)", c)
	}
	// Shares gone: the whole limit again (the bucket refills at the rate,
	// so only its size shows here).
	e.SetRateShares(nil)
	if l := e.limits.m["ka"].l; l.Burst() != 10 {
		t.Fatalf("burst without a share = %d, want 10", l.Burst())
	}
	if New(Config{}).RateCounts() != nil {
		t.Fatal("counts without a rate limit")
	}
}
