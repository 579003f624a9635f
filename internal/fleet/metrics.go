package fleet

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/warrenhq/warren/internal/fleet/registry"
)

// Collector returns the node's fleet gauges, computed from its routing
// cache at each scrape: whether this node is registered, the fleet's nodes
// by state, its session records by state, the free room placement sees,
// and the registry removals this node still owes.
func (n *Node) Collector() prometheus.Collector { return collector{n} }

type collector struct{ n *Node }

var (
	descRegistered = prometheus.NewDesc("warren_fleet_registered", "1 while this node's entry is in the fleet's registry (it takes new sessions only then), else 0.", nil, nil)
	descNodes      = prometheus.NewDesc("warren_fleet_nodes", "Live nodes of the fleet, by state (ready, draining), as this node's cache sees them.", []string{"state"}, nil)
	descSessions   = prometheus.NewDesc("warren_fleet_sessions", "Session records of the whole fleet, by state (live, lost), and of the live ones those whose node has no entry (unreachable).", []string{"state"}, nil)
	descFree       = prometheus.NewDesc("warren_fleet_free_sessions", "Sessions the fleet's ready nodes would still take, by their published free room.", nil, nil)
	descPending    = prometheus.NewDesc("warren_fleet_pending_record_removals", "Sessions this node deleted whose registry records it could not remove yet (their quota stays counted until it can).", nil, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRegistered, descNodes, descSessions, descFree, descPending} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	reg := 0.0
	if n.Registered() {
		reg = 1
	}
	ch <- prometheus.MustNewConstMetric(descRegistered, prometheus.GaugeValue, reg)
	ready, draining, free := 0, 0, 0
	live := map[string]bool{}
	for _, nd := range n.cache.Nodes() {
		live[nd.Name] = true
		if nd.Draining {
			draining++
			continue
		}
		ready++
		free += nd.Free
	}
	ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(ready), "ready")
	ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(draining), "draining")
	ch <- prometheus.MustNewConstMetric(descFree, prometheus.GaugeValue, float64(free))
	counts := map[string]int{"live": 0, "lost": 0, "unreachable": 0}
	n.cache.mu.RLock()
	for _, s := range n.cache.sessions {
		switch {
		case s.State == registry.Lost:
			counts["lost"]++
		default:
			counts["live"]++
			if !live[s.Node] {
				counts["unreachable"]++
			}
		}
	}
	n.cache.mu.RUnlock()
	for state, v := range counts {
		ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(v), state)
	}
	ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(n.Pending()))
}
