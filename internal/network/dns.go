package network

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Pins last the record's TTL, but at least minPinTTL (clients keep using an
// answer a little past its TTL; a TTL of 0 would make the address useless)
// and at most maxPinTTL.
const (
	minPinTTL = 30 * time.Second
	maxPinTTL = 24 * time.Hour
)

// upstreamTimeout bounds one question to one upstream resolver.
const upstreamTimeout = 4 * time.Second

// systemdResolvConf lists the servers systemd-resolved forwards to.
var systemdResolvConf = "/run/systemd/resolve/resolv.conf"

// HostResolvers reads the name servers of resolv.conf at path. A stub on
// 127.0.0.53 (systemd-resolved) is swapped for the servers it forwards to,
// from /run/systemd/resolve/resolv.conf, since the forwarder may run in a
// namespace where the stub is not; other loopback servers are kept.
func HostResolvers(path string) ([]string, error) {
	servers, err := readResolvConf(path)
	if err != nil {
		return nil, err
	}
	if slices.Contains(servers, "127.0.0.53:53") {
		if real, err := readResolvConf(systemdResolvConf); err == nil && len(real) > 0 {
			servers = real
		}
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("%s names no name server", path)
	}
	return servers, nil
}

func readResolvConf(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[0] == "nameserver" {
			a, err := netip.ParseAddr(fs[1])
			if err != nil {
				continue
			}
			out = append(out, net.JoinHostPort(a.WithZone("").String(), "53"))
		}
	}
	return out, sc.Err()
}

// forwarder answers a session's DNS questions on its gateway address.
type forwarder struct {
	m        *Manager
	s        *session
	udp, tcp *dns.Server
}

func (f *forwarder) start() error {
	var pc net.PacketConn
	var ln net.Listener
	addr := net.JoinHostPort(f.s.gw.String(), "53")
	err := inNS(f.m.ns, func() error {
		var err error
		if pc, err = net.ListenPacket("udp4", addr); err != nil {
			return err
		}
		if ln, err = net.Listen("tcp4", addr); err != nil {
			pc.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listen for the session's DNS on %s: %w", addr, err)
	}
	f.udp = &dns.Server{PacketConn: pc, Handler: f}
	f.tcp = &dns.Server{Listener: ln, Handler: f}
	for _, s := range []*dns.Server{f.udp, f.tcp} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go s.ActivateAndServe()
		<-started
	}
	return nil
}

func (f *forwarder) stop() {
	for _, s := range []*dns.Server{f.udp, f.tcp} {
		if s != nil {
			s.Shutdown()
		}
	}
}

// ServeDNS answers one question: a name the policy refuses gets NXDOMAIN
// and a denial; an allowed one is asked upstream, and its IPv4 answers
// are checked (an address in an always-blocked range refuses the answer:
// DNS rebinding) and pinned into the session's sets before the answer
// goes back, so the connection that follows finds them.
func (f *forwarder) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	reply := func(m *dns.Msg) { w.WriteMsg(m) }
	fail := func(rcode int) {
		m := new(dns.Msg)
		m.SetRcode(q, rcode)
		reply(m)
	}
	if q.Opcode != dns.OpcodeQuery || len(q.Question) != 1 {
		fail(dns.RcodeNotImplemented)
		return
	}
	qs := q.Question[0]
	name := strings.TrimSuffix(strings.ToLower(qs.Name), ".")
	pol := f.s.currentPolicy()
	ports, reason := pol.nameVerdict(name)
	if reason != "" {
		kind := "dns_not_allowed"
		if strings.HasPrefix(reason, "denied by rule") {
			kind = "dns_denied"
		}
		f.s.deny(Denial{Host: name, Proto: "dns", Reason: reason, Kind: kind})
		fail(dns.RcodeNameError)
		return
	}
	if qs.Qtype == dns.TypeAAAA {
		// No IPv6 egress: an empty answer sends clients to IPv4 at once.
		m := new(dns.Msg)
		m.SetReply(q)
		reply(m)
		return
	}
	proto := "udp"
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		proto = "tcp"
	}
	resp, err := f.m.exchange(q, proto)
	if err != nil {
		f.m.log.Warn("session DNS: no upstream answered", "sandbox", f.s.name, "name", name, "error", err)
		fail(dns.RcodeServerFailure)
		return
	}
	var addrs []netip.Addr
	var ttl uint32 = ^uint32(0)
	answer := resp.Answer[:0]
	for _, rr := range resp.Answer {
		switch r := rr.(type) {
		case *dns.A:
			a, _ := netip.AddrFromSlice(r.A.To4())
			if f.m.isBlocked(a) {
				f.s.deny(Denial{Host: name, Proto: "dns", Reason: fmt.Sprintf("the name resolves to %s, an always-blocked address (DNS rebinding)", a), Kind: "dns_rebinding"})
				fail(dns.RcodeRefused)
				return
			}
			addrs = append(addrs, a)
			ttl = min(ttl, r.Hdr.Ttl)
		case *dns.AAAA:
			continue // no IPv6 egress
		}
		answer = append(answer, rr)
	}
	resp.Answer = answer
	if len(addrs) > 0 && pol.Mode == ModeAllowlist {
		d := min(max(time.Duration(ttl)*time.Second, minPinTTL), maxPinTTL)
		if err := f.s.pin(ports, addrs, d, name); err != nil {
			f.m.log.Error("session DNS: pin answers", "sandbox", f.s.name, "name", name, "error", err)
			fail(dns.RcodeServerFailure)
			return
		}
	}
	resp.Id = q.Id
	reply(resp)
}

// exchange asks the upstream resolvers in turn, from the uplink's
// namespace; an answer truncated over UDP is asked again over TCP.
func (m *Manager) exchange(q *dns.Msg, proto string) (*dns.Msg, error) {
	var last error
	for _, up := range m.upstream {
		var resp *dns.Msg
		err := inNS(m.ns, func() error {
			c := &dns.Client{Net: proto, Timeout: upstreamTimeout}
			r, _, err := c.Exchange(q, up)
			if err == nil && r.Truncated && proto == "udp" {
				c.Net = "tcp"
				r, _, err = c.Exchange(q, up)
			}
			resp = r
			return err
		})
		if err == nil {
			return resp, nil
		}
		last = err
	}
	if last == nil {
		last = fmt.Errorf("no upstream resolver is configured")
	}
	return nil, last
}
