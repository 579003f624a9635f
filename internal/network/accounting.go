package network

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Traffic returns the bytes a session received (in) and sent (out) over
// its link since it was attached: the host side's counters, so DNS, the
// name check's connections and the rest alike; ok is false for a session
// without a network.
func (m *Manager) Traffic(name string) (in, out uint64, ok bool) {
	m.mu.Lock()
	s := m.sessions[name]
	m.mu.Unlock()
	if s == nil {
		return 0, 0, false
	}
	in, out, err := m.traffic(s)
	return in, out, err == nil
}

// traffic reads the host side's counters: what it transmits goes into
// the sandbox, what it receives came out of it.
func (m *Manager) traffic(s *session) (in, out uint64, err error) {
	l, err := m.nl.LinkByName(s.nft.ifname)
	if err != nil {
		return 0, 0, err
	}
	st := l.Attrs().Statistics
	if st == nil {
		return 0, 0, nil
	}
	return st.TxBytes, st.RxBytes, nil
}

var (
	denialsDesc = prometheus.NewDesc("warren_network_denials_total",
		"What sessions' network policies refused, by kind (dns_not_allowed, dns_denied, dns_rebinding, blocked, other_resolver, not_allowed, denied_address, ipv6, quic, connection_cap, sni_refused, host_refused, no_name).",
		[]string{"kind"}, nil)
	bytesDesc = prometheus.NewDesc("warren_network_bytes_total",
		"Bytes over sessions' links, into the sessions (in) and out of them (out), deleted sessions included.",
		[]string{"direction"}, nil)
	attachedDesc = prometheus.NewDesc("warren_network_sessions",
		"Sessions with a network (mode open or allowlist).", nil, nil)
)

// Describe implements prometheus.Collector.
func (m *Manager) Describe(ch chan<- *prometheus.Desc) {
	ch <- denialsDesc
	ch <- bytesDesc
	ch <- attachedDesc
}

// Collect implements prometheus.Collector: the denial counts, and the
// bytes of every session's link read at scrape time.
func (m *Manager) Collect(ch chan<- prometheus.Metric) {
	for _, k := range Kinds {
		ch <- prometheus.MustNewConstMetric(denialsDesc, prometheus.CounterValue, float64(m.denied[k].Load()), k)
	}
	// Under mu, as Detach moves a session's bytes to retired.
	m.mu.Lock()
	n := 0
	in, out := m.retired[0].Load(), m.retired[1].Load()
	for k, s := range m.sessions {
		if k != s.name {
			continue
		}
		n++
		if i, o, err := m.traffic(s); err == nil {
			in, out = in+i, out+o
		}
	}
	m.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.CounterValue, float64(in), "in")
	ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.CounterValue, float64(out), "out")
	ch <- prometheus.MustNewConstMetric(attachedDesc, prometheus.GaugeValue, float64(n))
}
