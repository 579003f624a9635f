package network

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestConnectionCap: a session may hold MaxConnections connections at
// once, forwarded and through the name check together; the next is
// refused at once and recorded; closing one makes room.
func TestConnectionCap(t *testing.T) {
	w := newWorld(t)
	m, err := New(Config{NetNS: w.HostPath, Upstream: []string{upstreamAddr}, MaxConnections: 3})
	must(t, err)
	t.Cleanup(func() { m.Close() })
	s := w.sandbox(t)
	s.attach(t, m, "sbx1", policy(t, m, "open", nil, nil))
	var open []net.Conn
	echo := func(c net.Conn) error {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		_, err := c.Read(make([]byte, 1))
		return err
	}
	for i := range 2 {
		c, err := s.dial("198.51.100.10:7")
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		must(t, echo(c))
		open = append(open, c)
	}
	// The third goes through the name check (port 443) and counts too.
	tlsConn, err := s.dial("198.51.100.10:443")
	must(t, err)
	open = append(open, tlsConn)
	start := time.Now()
	if c, err := s.dial("198.51.100.20:7"); err == nil {
		c.Close()
		t.Errorf("a fourth connection was let through a cap of 3")
	} else if time.Since(start) > time.Second {
		t.Errorf("the fourth connection failed after %v; want at once", time.Since(start))
	}
	wantDenial(t, m, "sbx1", Denial{Host: "198.51.100.20", Port: 7, Proto: "tcp", Reason: reasonConnCap, Kind: "connection_cap"})
	if c, err := s.dial("198.51.100.10:443"); err == nil {
		c.Close()
		t.Errorf("a fourth connection, to 443, was let through a cap of 3")
	}
	// Recorded with where it was going, not where the name check listens.
	wantDenial(t, m, "sbx1", Denial{Host: "198.51.100.10", Port: 443, Proto: "tcp", Reason: reasonConnCap, Kind: "connection_cap"})
	open[0].Close()
	// The closed connection leaves the count once conntrack sees it end.
	deadline := time.Now().Add(3 * time.Second)
	for {
		c, err := s.dial("198.51.100.20:7")
		if err == nil {
			must(t, echo(c))
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no room after closing a connection: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range open[1:] {
		c.Close()
	}
	must(t, m.Detach("sbx1"))
	checkClean(t, w)
}

// TestAccounting: a session's bytes in and out (its link's counters) and
// the metrics: denials by kind, bytes that never go down after a delete.
func TestAccounting(t *testing.T) {
	w := newWorld(t)
	m := w.manager(t)
	reg := prometheus.NewRegistry()
	must(t, reg.Register(m))
	s := w.sandbox(t)
	s.attach(t, m, "sbx1", policy(t, m, "allowlist", []string{"allowed.test"}, nil))
	in0, out0, ok := m.Traffic("sbx1")
	if !ok {
		t.Fatal("no traffic counters for an attached session")
	}
	const n = 1 << 20
	if c, err := s.dial("198.51.100.10:80"); err == nil {
		c.Close()
		t.Fatal("reached an address before DNS") // pins come from DNS
	}
	if _, err := s.resolve(s.info.Gateway.String(), "allowed.test", "udp"); err != nil {
		t.Fatal(err)
	}
	c, err := s.dial("198.51.100.10:80")
	must(t, err)
	fmt.Fprintf(c, "GET /bulk?n=%d HTTP/1.0\r\nHost: allowed.test\r\n\r\n", n)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := 0
	buf := make([]byte, 64<<10)
	for {
		k, err := c.Read(buf)
		got += k
		if err != nil {
			break
		}
	}
	c.Close()
	if got < n {
		t.Fatalf("read %d bytes of %d", got, n)
	}
	in1, out1, _ := m.Traffic("sbx1")
	if in1-in0 < n || out1-out0 < 50 || out1-out0 > n/4 {
		t.Errorf("traffic in %d out %d after a %d-byte download; want in >= %d and a little out", in1-in0, out1-out0, n, n)
	}
	s.resolve(s.info.Gateway.String(), "other.test", "udp")
	metric := func(name, label string) float64 {
		t.Helper()
		fams, err := reg.Gather()
		must(t, err)
		for _, f := range fams {
			if f.GetName() != name {
				continue
			}
			for _, mt := range f.Metric {
				if mt.Label[0].GetValue() == label {
					if mt.Counter != nil {
						return mt.Counter.GetValue()
					}
					return mt.Gauge.GetValue()
				}
			}
		}
		t.Fatalf("no %s{%s}", name, label)
		return 0
	}
	if v := metric("warren_network_denials_total", "dns_not_allowed"); v < 1 {
		t.Errorf("denials of kind dns_not_allowed = %v; want at least 1", v)
	}
	if v := metric("warren_network_denials_total", "not_allowed"); v < 1 {
		t.Errorf("denials of kind not_allowed = %v; want at least 1", v)
	}
	before := metric("warren_network_bytes_total", "in")
	if before < n {
		t.Errorf("warren_network_bytes_total{in} = %v; want at least %d", before, n)
	}
	must(t, m.Detach("sbx1"))
	if after := metric("warren_network_bytes_total", "in"); after < before {
		t.Errorf("warren_network_bytes_total{in} went down at delete: %v -> %v", before, after)
	}
	if _, _, ok := m.Traffic("sbx1"); ok {
		t.Errorf("traffic of a detached session")
	}
}
