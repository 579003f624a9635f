package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/warrenhq/warren/internal/session"
)

// Sessions is what the metrics read of the session manager at each scrape.
type Sessions interface {
	// Counts returns the number of sessions by state and by tenant.
	Counts() (byState map[session.State]int, byTenant map[string]int)
	// Disk reads the space of the data directory's filesystem.
	Disk() (session.DiskSpace, error)
	Config() session.Config
}

// WatchSessions registers the gauges read from s when scraped: sessions by
// state, sessions by tenant, the session cap and the data directory's free
// space.
func (m *Metrics) WatchSessions(s Sessions) error {
	return m.reg.Register(sessionCollector{s})
}

var (
	sessionsDesc = prometheus.NewDesc("warren_sessions",
		"Sessions by state (creating, running, deleting, failed), the hidden sessions of /v1/run included.",
		[]string{"state"}, nil)
	tenantSessionsDesc = prometheus.NewDesc("warren_tenant_sessions",
		"Sessions by tenant, for the tenants that hold any. Tenants are bounded by the API keys an admin creates.",
		[]string{"tenant"}, nil)
	maxSessionsDesc = prometheus.NewDesc("warren_sessions_max",
		"The most sessions the daemon holds at once (--max-sessions).", nil, nil)
	diskFreeDesc = prometheus.NewDesc("warren_data_dir_free_bytes",
		"Free space of the data directory's filesystem.", nil, nil)
	diskMinDesc = prometheus.NewDesc("warren_data_dir_min_free_bytes",
		"Free space below which new sessions are refused (--min-free-disk-mb); 0 when the check is off.", nil, nil)
)

// sessionCollector reads the manager at scrape time; it keeps no state.
type sessionCollector struct{ s Sessions }

func (c sessionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sessionsDesc, tenantSessionsDesc, maxSessionsDesc, diskFreeDesc, diskMinDesc} {
		ch <- d
	}
}

func (c sessionCollector) Collect(ch chan<- prometheus.Metric) {
	byState, byTenant := c.s.Counts()
	for st, n := range byState {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(n), string(st))
	}
	for t, n := range byTenant {
		ch <- prometheus.MustNewConstMetric(tenantSessionsDesc, prometheus.GaugeValue, float64(n), t)
	}
	ch <- prometheus.MustNewConstMetric(maxSessionsDesc, prometheus.GaugeValue, float64(c.s.Config().MaxSessions))
	// A filesystem that cannot be read leaves its gauges out rather than
	// failing the whole scrape; /readyz reports the error.
	if d, err := c.s.Disk(); err == nil {
		ch <- prometheus.MustNewConstMetric(diskFreeDesc, prometheus.GaugeValue, float64(d.Free))
		ch <- prometheus.MustNewConstMetric(diskMinDesc, prometheus.GaugeValue, float64(d.Min))
	}
}
