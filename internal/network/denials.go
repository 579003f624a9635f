package network

import (
	"sync"
	"time"
)

// Denial is one thing a session's policy refused.
type Denial struct {
	Time time.Time
	// Host is the name asked for, or the address connected to.
	Host string
	// Port is the port connected to (0 for a DNS question).
	Port   uint16
	Proto  string // "dns", "tcp", "udp", "icmp", "tls", "http" or another protocol
	Reason string
	// Kind is the reason's class, a short fixed word (the metrics' label:
	// Reason may quote a rule): dns_not_allowed, dns_denied,
	// dns_rebinding, blocked, other_resolver, not_allowed,
	// denied_address, ipv6, quic, connection_cap, sni_refused,
	// host_refused, no_name.
	Kind string
}

// Kinds lists every Denial.Kind.
var Kinds = []string{"dns_not_allowed", "dns_denied", "dns_rebinding", "blocked", "other_resolver", "not_allowed",
	"denied_address", "ipv6", "quic", "connection_cap", "sni_refused", "host_refused", "no_name"}

// MaxDenials is how many denials a session keeps; older ones are dropped.
const MaxDenials = 256

// ring keeps the last MaxDenials denials.
type ring struct {
	mu    sync.Mutex
	buf   []Denial
	next  int
	full  bool
	total uint64
}

func (r *ring) add(d Denial) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.buf == nil {
		r.buf = make([]Denial, MaxDenials)
	}
	r.buf[r.next] = d
	r.next = (r.next + 1) % len(r.buf)
	r.full = r.full || r.next == 0
	r.total++
}

// list returns the kept denials, oldest first.
func (r *ring) list() []Denial {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]Denial(nil), r.buf[:r.next]...)
	}
	return append(append([]Denial(nil), r.buf[r.next:]...), r.buf[:r.next]...)
}
