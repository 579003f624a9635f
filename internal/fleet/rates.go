package fleet

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/warrenhq/warren/internal/fleet/registry"
)

// KindRates is the kind of the objects in which each node publishes how
// many requests each caller made to it in the last interval (named by the
// node).
const KindRates = "rates"

// rateInterval is how often a node publishes its callers' request counts
// and recomputes their shares: a caller that moves its traffic to other
// nodes has its limit follow within about this long.
const rateInterval = time.Second

// rateFresh is how old another node's counts may be and still count: a
// node that died (or stopped publishing) leaves its callers' shares to the
// others after this long.
const rateFresh = 4 * rateInterval

// maxRateCallers bounds one node's published counts (the busiest callers
// first), so that the object stays small; a caller left out keeps its
// whole limit on every node.
const maxRateCallers = 2000

// rateDoc is a node's published request counts.
type rateDoc struct {
	// At is when the counts were taken (Unix milliseconds, the node's
	// clock).
	At     int64            `json:"at"`
	Counts map[string]int64 `json:"c"`
}

// ShareRates makes the callers' rate limits fleet-wide (docs/FLEET.md,
// "Tenants, keys, quotas, rate limits"): every rateInterval the node takes
// its callers' request counts (counts, which resets them), publishes them
// in the registry, and gives each caller the part of its limit that
// matches this node's part of its requests across the fleet (apply). A
// caller that uses only this node keeps its whole limit here; one that a
// load balancer spreads over three nodes gets about a third on each, so
// the fleet allows it about its limit, not three times it. The shares
// lag by an interval, so a caller that moves can briefly get more; no
// request waits on etcd. counts returning nil (no rate limit) turns it
// off.
func (n *Node) ShareRates(counts func() map[string]int64, apply func(map[string]float64)) {
	n.wg.Go(func() {
		tick := time.NewTicker(rateInterval)
		defer tick.Stop()
		published := false
		for {
			select {
			case <-n.ctx.Done():
				if published {
					// Leaving: the others need not wait for the counts
					// to go stale.
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					_ = n.reg.DeleteObject(ctx, KindRates, n.cfg.Name) // best effort: they go stale in rateFresh anyway
					cancel()
				}
				return
			case <-tick.C:
			}
			mine := counts()
			if mine == nil {
				continue
			}
			mine = busiest(mine, maxRateCallers)
			// Nothing to say twice: an idle node writes once.
			if len(mine) > 0 || published {
				b, _ := json.Marshal(rateDoc{At: time.Now().UnixMilli(), Counts: mine})
				if _, err := n.reg.PutObject(n.ctx, registry.Object{Kind: KindRates, Name: n.cfg.Name, Value: b}, -1); err != nil {
					n.log.Debug("publish request counts", "error", err)
				}
				published = len(mine) > 0
			}
			apply(n.rateShares(mine))
		}
	})
}

// rateShares computes this node's share of each caller's limit from its
// own counts and the other nodes' fresh ones: its part of the caller's
// requests (at least half an even split among the nodes serving the
// caller, so that a small part is not starved by the interval's lag), or,
// for a caller the others serve and this node did not see, an even split
// with them (its clients may be just arriving). Callers only this node
// serves are left out: they have their whole limit.
func (n *Node) rateShares(mine map[string]int64) map[string]float64 {
	var others []map[string]int64
	now := time.Now().UnixMilli()
	for _, o := range n.cache.Objects(KindRates) {
		var d rateDoc
		if o.Name == n.cfg.Name || json.Unmarshal(o.Value, &d) != nil || now-d.At > rateFresh.Milliseconds() {
			continue
		}
		others = append(others, d.Counts)
	}
	return shares(mine, others)
}

// shares is rateShares' arithmetic: mine are this node's counts, others
// the other nodes' fresh ones.
func shares(mine map[string]int64, others []map[string]int64) map[string]float64 {
	total := map[string]int64{}
	seen := map[string]int{}
	for _, counts := range others {
		for k, c := range counts {
			if c > 0 {
				total[k] += c
				seen[k]++
			}
		}
	}
	out := make(map[string]float64, len(total))
	for k, theirs := range total {
		nodes := seen[k] + 1 // the others serving the caller, and this one
		own := mine[k]
		if own == 0 {
			out[k] = 1 / float64(nodes)
			continue
		}
		out[k] = max(float64(own)/float64(own+theirs), 1/float64(2*nodes))
	}
	return out
}

// busiest keeps the max callers with the most requests.
func busiest(counts map[string]int64, limit int) map[string]int64 {
	if len(counts) <= limit {
		return counts
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	out := make(map[string]int64, limit)
	for _, k := range keys[:limit] {
		out[k] = counts[k]
	}
	return out
}
