package network

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"github.com/warrenhq/warren/internal/network/nettest"
	"golang.org/x/net/icmp"
	xipv4 "golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

func must(t *testing.T, err error) {
	t.Helper()
	nettest.Must(t, err)
}

const (
	hostAddr     = nettest.HostAddr
	upstreamAddr = nettest.UpstreamAddr
	daemonPort   = nettest.DaemonPort
)

type world struct{ *nettest.World }

func newWorld(t *testing.T) *world { return &world{nettest.NewWorld(t)} }

func newNS(t *testing.T) (netns.NsHandle, string) { return nettest.NewNS(t) }

func (w *world) manager(t *testing.T, allowPrivate ...netip.Prefix) *Manager {
	m, err := New(Config{NetNS: w.HostPath, Upstream: []string{upstreamAddr}, AllowPrivate: allowPrivate})
	must(t, err)
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m
}

// sandbox is a namespace standing in for a sandbox's.
type sandbox struct {
	ns   netns.NsHandle
	path string
	info *Info
}

func (w *world) sandbox(t *testing.T) *sandbox {
	ns, path := newNS(t)
	return &sandbox{ns: ns, path: path}
}

// resolve asks the session's forwarder (or server) for name's A record.
func (s *sandbox) resolve(server, name, proto string) (*dns.Msg, error) {
	var r *dns.Msg
	err := inNS(s.ns, func() error {
		c := &dns.Client{Net: proto, Timeout: 2 * time.Second}
		q := new(dns.Msg)
		q.SetQuestion(dns.Fqdn(name), dns.TypeA)
		var err error
		r, _, err = c.Exchange(q, net.JoinHostPort(server, "53"))
		return err
	})
	return r, err
}

// dialTimeout bounds a dial from a sandbox; a refusal comes far sooner.
var dialTimeout = 3 * time.Second

// dial connects from inside the sandbox.
func (s *sandbox) dial(addr string) (net.Conn, error) {
	var c net.Conn
	err := inNS(s.ns, func() (err error) {
		c, err = net.DialTimeout("tcp", addr, dialTimeout)
		return err
	})
	return c, err
}

// get resolves host through the session's forwarder and fetches / on
// port: the body, or why it failed.
func (s *sandbox) get(host string, port int) (string, error) {
	ip := host
	if _, err := netip.ParseAddr(host); err != nil {
		r, err := s.resolve(s.info.Gateway.String(), host, "udp")
		if err != nil {
			return "", err
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			return "", fmt.Errorf("resolve %s: %s", host, dns.RcodeToString[r.Rcode])
		}
		ip = r.Answer[0].(*dns.A).A.String()
	}
	c, err := s.dial(net.JoinHostPort(ip, fmt.Sprint(port)))
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func (s *sandbox) attach(t *testing.T, m *Manager, name string, p Policy) {
	t.Helper()
	info, err := m.Attach(name, s.path, p)
	must(t, err)
	s.info = info
}

func policy(t *testing.T, m *Manager, mode string, allow, deny []string) Policy {
	t.Helper()
	p, err := ParsePolicy(mode, allow, deny, m.Blocked)
	must(t, err)
	return p
}

// wantOK fetches host:port and wants the internet's page.
func wantOK(t *testing.T, s *sandbox, host string, port int) {
	t.Helper()
	body, err := s.get(host, port)
	if err != nil {
		t.Errorf("get %s:%d: %v", host, port, err)
		return
	}
	if !strings.HasPrefix(body, "hello from "+host) {
		t.Errorf("get %s:%d = %q", host, port, body)
	}
}

// wantRefused fetches host:port and wants a refusal within a second: a
// policy's "no" is never a timeout.
func wantRefused(t *testing.T, s *sandbox, host string, port int, why string) {
	t.Helper()
	start := time.Now()
	body, err := s.get(host, port)
	took := time.Since(start)
	if err == nil {
		t.Errorf("%s: get %s:%d worked (%q); want it refused", why, host, port, body)
		return
	}
	if took > time.Second {
		t.Errorf("%s: get %s:%d failed after %v (%v); want a refusal at once", why, host, port, took, err)
	}
}

// wantDenial waits briefly for a logged connection denial (the kernel
// hands it over asynchronously).
func wantDenial(t *testing.T, m *Manager, name string, want Denial) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		ds, _ := m.Denials(name)
		for _, d := range ds {
			d.Time = time.Time{}
			if want.Kind == "" {
				d.Kind = ""
			}
			if d == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("denial %+v not recorded; have %+v", want, ds)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func lastDenial(t *testing.T, m *Manager, name string) Denial {
	t.Helper()
	ds, ok := m.Denials(name)
	if !ok || len(ds) == 0 {
		t.Fatalf("no denials recorded for %s", name)
	}
	return ds[len(ds)-1]
}

func TestAllowlist(t *testing.T) {
	w := newWorld(t)
	m := w.manager(t)
	s := w.sandbox(t)
	p := policy(t, m, "allowlist", []string{"allowed.test", "*.wild.test", "203.0.113.30:8080", "rebind.test", "private.test", "meta.test"}, []string{"gist.wild.test"})
	s.attach(t, m, "sbx1", p)

	// An allowed name's address is reachable only once the session's
	// forwarder resolved it.
	wantRefused(t, s, "198.51.100.10", 80, "an allowed name's address before any DNS")
	wantOK(t, s, "allowed.test", 80)
	if body, err := s.get("198.51.100.10", 80); err != nil || !strings.HasPrefix(body, "hello") {
		t.Errorf("an allowed name's address after DNS: %q %v", body, err)
	}
	// No IPv6: an AAAA question gets an empty answer, so clients go to
	// IPv4 at once.
	must(t, inNS(s.ns, func() error {
		q := new(dns.Msg)
		q.SetQuestion("allowed.test.", dns.TypeAAAA)
		r, err := dns.Exchange(q, net.JoinHostPort(s.info.Gateway.String(), "53"))
		if err != nil {
			return err
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
			t.Errorf("AAAA of an allowed name: %v", r)
		}
		return nil
	}))
	wantOK(t, s, "allowed.test", 8080)

	_, err := s.get("other.test", 80)
	if err == nil || !strings.Contains(err.Error(), "NXDOMAIN") {
		t.Errorf("other.test: %v; want NXDOMAIN", err)
	}
	if d := lastDenial(t, m, "sbx1"); d.Host != "other.test" || d.Proto != "dns" || !strings.Contains(d.Reason, "allow-list") {
		t.Errorf("denial %+v; want other.test, dns, not on the allow-list", d)
	}
	// Its address was never resolved through an allowed name.
	wantRefused(t, s, "198.51.100.20", 80, "an address no allowed name resolved to")
	wantDenial(t, m, "sbx1", Denial{Host: "198.51.100.20", Port: 80, Proto: "tcp", Reason: reasonNotAllow})

	wantOK(t, s, "a.wild.test", 80)
	if _, err := s.get("gist.wild.test", 80); err == nil {
		t.Errorf("gist.wild.test resolved; a deny rule should win over *.wild.test")
	} else if d := lastDenial(t, m, "sbx1"); !strings.Contains(d.Reason, "denied by rule") {
		t.Errorf("denial %+v; want denied by rule", d)
	}
	wildcardBase, err := s.resolve(s.info.Gateway.String(), "wild.test", "udp")
	if err != nil || wildcardBase.Rcode != dns.RcodeNameError {
		t.Errorf("wild.test: %v %v; *.wild.test must not match wild.test itself", wildcardBase, err)
	}

	// An address rule with a port opens that port only.
	if body, err := s.get("203.0.113.30", 8080); err != nil || !strings.HasPrefix(body, "hello") {
		t.Errorf("203.0.113.30:8080: %q %v", body, err)
	}
	wantRefused(t, s, "203.0.113.30", 80, "an allowed address on another port")

	// DNS rebinding: allowed names that resolve to what is always blocked.
	for _, name := range []string{"rebind.test", "private.test", "meta.test"} {
		r, err := s.resolve(s.info.Gateway.String(), name, "udp")
		if err != nil || r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
			t.Errorf("%s: %v %v; want REFUSED and no answer", name, r, err)
		}
		if d := lastDenial(t, m, "sbx1"); d.Host != name || !strings.Contains(d.Reason, "rebinding") {
			t.Errorf("denial %+v; want %s, rebinding", d, name)
		}
	}

	// Other resolvers, over UDP and TCP, and the host and its ports.
	for _, proto := range []string{"udp", "tcp"} {
		start := time.Now()
		if r, err := s.resolve(upstreamAddr, "allowed.test", proto); err == nil {
			t.Errorf("DNS over %s to another resolver answered: %v", proto, r)
		} else if time.Since(start) > time.Second {
			t.Errorf("DNS over %s to another resolver failed after %v; want at once", proto, time.Since(start))
		}
	}
	wantDenial(t, m, "sbx1", Denial{Host: upstreamAddr, Port: 53, Proto: "tcp", Reason: reasonDNS})
	wantRefused(t, s, upstreamAddr, 853, "DNS over TLS to another resolver")
	wantDenial(t, m, "sbx1", Denial{Host: upstreamAddr, Port: 853, Proto: "tcp", Reason: reasonDNS})
	for _, a := range []string{hostAddr, s.info.Gateway.String()} {
		wantRefused(t, s, a, daemonPort, "the host's address")
	}
	wantDenial(t, m, "sbx1", Denial{Host: hostAddr, Port: daemonPort, Proto: "tcp", Reason: reasonBlocked})
	// The forwarder over TCP works too.
	if r, err := s.resolve(s.info.Gateway.String(), "allowed.test", "tcp"); err != nil || len(r.Answer) != 1 {
		t.Errorf("DNS over TCP to the forwarder: %v %v", r, err)
	}

	// Live change: other.test in, allowed.test out (its pinned address
	// goes with it).
	must(t, m.Update("sbx1", policy(t, m, "allowlist", []string{"other.test"}, nil)))
	wantOK(t, s, "other.test", 80)
	wantRefused(t, s, "allowed.test", 80, "a name taken off the list")
	wantRefused(t, s, "198.51.100.10", 80, "the address of a name taken off the list")
	wantRefused(t, s, "203.0.113.30", 8080, "an address rule taken off the list")
	// And back.
	must(t, m.Update("sbx1", p))
	wantOK(t, s, "allowed.test", 80)
	wantRefused(t, s, "198.51.100.20", 80, "other.test's address after it left the list")

	must(t, m.Detach("sbx1"))
	checkClean(t, w)
}

func TestOpen(t *testing.T) {
	w := newWorld(t)
	m := w.manager(t)
	s1, s2 := w.sandbox(t), w.sandbox(t)
	s1.attach(t, m, "sbx1", policy(t, m, "open", nil, []string{"twin.test"}))
	s2.attach(t, m, "sbx2", policy(t, m, "allowlist", []string{"allowed.test"}, nil))

	wantOK(t, s1, "allowed.test", 80)
	wantOK(t, s1, "other.test", 80)
	wantOK(t, s1, "203.0.113.30", 8080)
	if _, err := s1.get("twin.test", 80); err == nil {
		t.Errorf("twin.test resolved in open mode despite a deny rule")
	}
	for _, a := range []string{"10.99.0.1", "169.254.169.254", "100.64.0.1", hostAddr, s1.info.Gateway.String(), s2.info.Address.String(), s2.info.Gateway.String()} {
		wantRefused(t, s1, a, 80, "always blocked in open mode")
		wantRefused(t, s1, a, daemonPort, "always blocked in open mode")
	}
	for _, name := range []string{"rebind.test", "private.test", "meta.test", "cgnat.test"} {
		if r, err := s1.resolve(s1.info.Gateway.String(), name, "udp"); err != nil || r.Rcode != dns.RcodeRefused {
			t.Errorf("%s in open mode: %v %v; want REFUSED", name, r, err)
		}
	}
	if _, err := s1.resolve(upstreamAddr, "allowed.test", "udp"); err == nil {
		t.Errorf("DNS to another resolver answered in open mode")
	}
	// Each session's forwarder answers its own session only.
	for _, proto := range []string{"udp", "tcp"} {
		start := time.Now()
		if _, err := s1.resolve(s2.info.Gateway.String(), "allowed.test", proto); err == nil {
			t.Errorf("a session's DNS question over %s reached another session's forwarder", proto)
		} else if time.Since(start) > time.Second {
			t.Errorf("DNS over %s to another session's forwarder failed after %v (%v); want at once", proto, time.Since(start), err)
		}
	}
	// The sessions are apart: the allowlist one still cannot reach what
	// the open one can.
	wantRefused(t, s2, "198.51.100.20", 80, "another session's freedom")

	// An operator's allow_private opens a private range in open mode.
	must(t, m.Detach("sbx1"))
	must(t, m.Detach("sbx2"))
	checkClean(t, w)
}

func TestAllowPrivate(t *testing.T) {
	w := newWorld(t)
	m := w.manager(t, netip.MustParsePrefix("10.99.0.0/24"))
	s := w.sandbox(t)
	s.attach(t, m, "sbx1", policy(t, m, "open", nil, nil))
	wantOK(t, s, "private.test", 80)
	wantRefused(t, s, "169.254.169.254", 80, "metadata is not in allow_private")
	if _, err := ParsePolicy("allowlist", []string{"10.99.0.0/16"}, nil, m.Blocked); err == nil {
		t.Errorf("an allow rule wider than allow_private was accepted")
	}
	if _, err := ParsePolicy("allowlist", []string{"10.99.0.7"}, nil, m.Blocked); err != nil {
		t.Errorf("an allow rule inside allow_private: %v", err)
	}
}

func TestNoneHasNoRoute(t *testing.T) {
	w := newWorld(t)
	w.manager(t)
	s := w.sandbox(t)
	_, err := s.dial("198.51.100.10:80")
	if !errors.Is(err, unix.ENETUNREACH) {
		t.Errorf("dial from a namespace with no attachment: %v; want network unreachable", err)
	}
}

// checkClean wants nothing of a session left in the host namespace: no
// session link, and only the shared chains and set in the table.
func checkClean(t *testing.T, w *world) {
	t.Helper()
	h, err := netlink.NewHandleAt(w.Host)
	must(t, err)
	defer h.Close()
	links, err := h.LinkList()
	must(t, err)
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, ifPrefix) {
			t.Errorf("leaked link %s", l.Attrs().Name)
		}
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(w.Host)))
	must(t, err)
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	must(t, err)
	for _, ch := range chains {
		if ch.Table.Name == TableName && ch.Name != "forward" && ch.Name != "input" && ch.Name != "postrouting" && ch.Name != "prerouting" {
			t.Errorf("leaked chain %s", ch.Name)
		}
	}
	tab := &nftables.Table{Name: TableName, Family: nftables.TableFamilyINet}
	sets, err := c.GetSets(tab)
	must(t, err)
	for _, s := range sets {
		if s.Name != "blocked4" {
			t.Errorf("leaked set %s", s.Name)
		}
	}
	for _, ch := range []string{"forward", "input", "prerouting"} {
		rules, err := c.GetRules(tab, &nftables.Chain{Name: ch, Table: tab})
		must(t, err)
		for _, r := range rules {
			if len(r.UserData) > 0 {
				t.Errorf("leaked rule of %s in %s", r.UserData, ch)
			}
		}
	}
}

// TestIPv6Blocked gives a session's link, the uplink and the internet
// IPv6 addresses and routes and turns on IPv6 forwarding, as a host with
// IPv6 would have: the session still reaches neither the internet nor the
// host over IPv6, and is refused at once (a reset by warren's rules: with
// no rule the packets would be forwarded and answered).
func TestIPv6Blocked(t *testing.T) {
	w := newWorld(t)
	m := w.manager(t)
	s := w.sandbox(t)
	s.attach(t, m, "sbx1", policy(t, m, "open", nil, nil))

	addr := func(h *netlink.Handle, link, a string) {
		t.Helper()
		l, err := h.LinkByName(link)
		must(t, err)
		must(t, h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(a), Mask: net.CIDRMask(64, 128)}, Flags: unix.IFA_F_NODAD}))
	}
	route := func(h *netlink.Handle, dst, gw string) {
		t.Helper()
		_, d, _ := net.ParseCIDR(dst)
		must(t, h.RouteAdd(&netlink.Route{Dst: d, Gw: net.ParseIP(gw)}))
	}
	hh, err := netlink.NewHandleAt(w.Host)
	must(t, err)
	defer hh.Close()
	ih, err := netlink.NewHandleAt(w.Inet)
	must(t, err)
	defer ih.Close()
	sh, err := netlink.NewHandleAt(s.ns)
	must(t, err)
	defer sh.Close()
	// As attached, the session has no IPv6 at all.
	if c, err := s.dial("[2001:db8:2::2]:80"); err == nil {
		c.Close()
		t.Errorf("a fresh session dialled out over IPv6")
	} else if !errors.Is(err, unix.ENETUNREACH) {
		t.Errorf("IPv6 from a fresh session: %v; want network unreachable", err)
	}
	// warren turned IPv6 off on both ends of the link; a sandbox with
	// CAP_NET_ADMIN could turn its end back on, and the host's end might
	// be turned on by the host's own configuration.
	must(t, inNS(w.Host, func() error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/"+s.info.Interface+"/disable_ipv6", []byte("0\n"), 0o644)
	}))
	must(t, inNS(s.ns, func() error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/eth0/disable_ipv6", []byte("0\n"), 0o644)
	}))
	addr(hh, s.info.Interface, "2001:db8:1::1")
	addr(sh, "eth0", "2001:db8:1::2")
	addr(hh, "up0", "2001:db8:2::1")
	addr(ih, "up1", "2001:db8:2::2")
	route(sh, "::/0", "2001:db8:1::1")
	// Static neighbours: the host's rules refuse the session's neighbour
	// discovery too, and the test is of the rules on real traffic.
	neigh := func(h *netlink.Handle, link, ip string, peer netlink.Link) {
		t.Helper()
		l, err := h.LinkByName(link)
		must(t, err)
		must(t, h.NeighAdd(&netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V6, State: netlink.NUD_PERMANENT,
			IP: net.ParseIP(ip), HardwareAddr: peer.Attrs().HardwareAddr}))
	}
	hostEnd, err := hh.LinkByName(s.info.Interface)
	must(t, err)
	sbxEnd, err := sh.LinkByName("eth0")
	must(t, err)
	neigh(sh, "eth0", "2001:db8:1::1", hostEnd)
	neigh(hh, s.info.Interface, "2001:db8:1::2", sbxEnd)
	route(ih, "2001:db8:1::/64", "2001:db8:2::1")
	must(t, inNS(w.Host, func() error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1\n"), 0o644)
	}))
	listen := func(ns netns.NsHandle, a string) {
		var ln net.Listener
		must(t, inNS(ns, func() (err error) { ln, err = net.Listen("tcp6", a); return err }))
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	listen(w.Inet, "[2001:db8:2::2]:80")
	listen(w.Host, "[::]:7434")
	// The path exists: the host reaches the internet over IPv6.
	must(t, inNS(w.Host, func() error {
		c, err := net.DialTimeout("tcp6", "[2001:db8:2::2]:80", 2*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}))
	for _, tc := range []struct{ addr, host, reason string }{
		{"[2001:db8:2::2]:80", "2001:db8:2::2", reasonIPv6},
		{"[2001:db8:1::1]:7434", "2001:db8:1::1", reasonBlocked},
	} {
		start := time.Now()
		c, err := s.dial(tc.addr)
		if err == nil {
			c.Close()
			t.Errorf("the session reached %s over IPv6", tc.addr)
			continue
		}
		if !errors.Is(err, unix.ECONNREFUSED) || time.Since(start) > time.Second {
			t.Errorf("dial %s: %v after %v; want refused at once by warren's rules", tc.addr, err, time.Since(start))
		}
		wantDenial(t, m, "sbx1", Denial{Host: tc.host, Proto: "ipv6", Reason: tc.reason})
	}
}

// TestLiveChangeEndsConnections: a policy change applies to connections
// already open too: one to a name taken off the list is reset at its next
// packet, one to a name still allowed goes on.
func TestLiveChangeEndsConnections(t *testing.T) {
	w := newWorld(t)
	m := w.manager(t)
	s := w.sandbox(t)
	s.attach(t, m, "sbx1", policy(t, m, "allowlist", []string{"allowed.test", "other.test"}, nil))
	open := func(name string) net.Conn {
		t.Helper()
		r, err := s.resolve(s.info.Gateway.String(), name, "udp")
		if err != nil || len(r.Answer) != 1 {
			t.Fatalf("resolve %s: %v %v", name, r, err)
		}
		c, err := s.dial(net.JoinHostPort(r.Answer[0].(*dns.A).A.String(), "7"))
		must(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	echo := func(c net.Conn, msg string) error {
		c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		b := make([]byte, len(msg))
		_, err := io.ReadFull(c, b)
		return err
	}
	gone, kept := open("allowed.test"), open("other.test")
	must(t, echo(gone, "a"))
	must(t, echo(kept, "a"))
	must(t, m.Update("sbx1", policy(t, m, "allowlist", []string{"other.test"}, nil)))
	if err := echo(gone, "b"); !errors.Is(err, unix.ECONNRESET) {
		t.Errorf("a connection to a name taken off the list: %v; want it reset", err)
	}
	if err := echo(kept, "b"); err != nil {
		t.Errorf("a connection to a name still allowed: %v", err)
	}
	must(t, m.Detach("sbx1"))
	checkClean(t, w)
}

// TestReconcileAfterCrash: a daemon that died without cleaning up leaves
// its table, links and rules; the next one's Reconcile removes them all,
// so no old policy stays in force without its forwarder.
func TestReconcileAfterCrash(t *testing.T) {
	w := newWorld(t)
	crashed, err := New(Config{NetNS: w.HostPath, Upstream: []string{upstreamAddr}})
	must(t, err)
	s := w.sandbox(t)
	s.attach(t, crashed, "sbx1", policy(t, crashed, "open", nil, nil))
	wantOK(t, s, "allowed.test", 80)
	// The crashed daemon's forwarder dies with it; its kernel state stays.
	crashed.mu.Lock()
	for _, ss := range crashed.sessions {
		ss.fwd.stop()
		ss.prx.stop()
	}
	crashed.dlog.close()
	crashed.lock.release() // a dead process's flock goes with it
	crashed.mu.Unlock()

	next := w.manager(t)
	must(t, next.Reconcile())
	if c, err := s.dial("198.51.100.10:80"); err == nil {
		c.Close()
		t.Errorf("the session still reaches out after the next daemon's reconcile")
	}
	h, err := netlink.NewHandleAt(w.Host)
	must(t, err)
	defer h.Close()
	links, _ := h.LinkList()
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, ifPrefix) {
			t.Errorf("link %s left after reconcile", l.Attrs().Name)
		}
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(w.Host)))
	must(t, err)
	tables, _ := c.ListTablesOfFamily(nftables.TableFamilyINet)
	for _, tb := range tables {
		if tb.Name == TableName {
			t.Errorf("table %s left after reconcile", tb.Name)
		}
	}
	crashed.nl.Close()
	crashed.ns.Close()
}

// TestICMP: pings go out in open mode (masqueraded like the rest) and are
// refused at once toward what is always blocked.
func TestICMP(t *testing.T) {
	w := newWorld(t)
	m := w.manager(t)
	s := w.sandbox(t)
	s.attach(t, m, "sbx1", policy(t, m, "open", nil, nil))
	ping := func(dst string) (reply bool, err error) {
		err = inNS(s.ns, func() error {
			c, err := icmp.ListenPacket("ip4:icmp", "0.0.0.0")
			if err != nil {
				return err
			}
			defer c.Close()
			msg := icmp.Message{Type: xipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 7, Seq: 1, Data: []byte("warren")}}
			b, _ := msg.Marshal(nil)
			if _, err := c.WriteTo(b, &net.IPAddr{IP: net.ParseIP(dst)}); err != nil {
				return err
			}
			c.SetReadDeadline(time.Now().Add(time.Second))
			buf := make([]byte, 1500)
			for {
				n, _, err := c.ReadFrom(buf)
				if err != nil {
					return err
				}
				r, err := icmp.ParseMessage(1, buf[:n])
				if err != nil {
					continue
				}
				switch r.Type {
				case xipv4.ICMPTypeEchoReply:
					reply = true
					return nil
				case xipv4.ICMPTypeDestinationUnreachable:
					return fmt.Errorf("unreachable (code %d)", r.Code)
				}
			}
		})
		return reply, err
	}
	if ok, err := ping("198.51.100.10"); !ok {
		t.Errorf("ping in open mode: %v", err)
	}
	for _, dst := range []string{"10.99.0.1", "169.254.169.254", hostAddr} {
		start := time.Now()
		ok, err := ping(dst)
		if ok {
			t.Errorf("ping %s answered", dst)
		} else if err == nil || !strings.Contains(err.Error(), "unreachable") || time.Since(start) > 500*time.Millisecond {
			t.Errorf("ping %s: %v after %v; want unreachable at once", dst, err, time.Since(start))
		}
	}
	wantDenial(t, m, "sbx1", Denial{Host: "169.254.169.254", Proto: "icmp", Reason: reasonBlocked})
}

// TestEgressInterface: with network.egress_interface set, sessions'
// traffic is masqueraded out of that interface only; out of another it
// keeps its session address, which the internet cannot answer.
func TestEgressInterface(t *testing.T) {
	for _, tc := range []struct {
		egress string
		works  bool
	}{{"up0", true}, {"other0", false}} {
		t.Run(tc.egress, func(t *testing.T) {
			w := newWorld(t)
			m, err := New(Config{NetNS: w.HostPath, Upstream: []string{upstreamAddr}, Egress: tc.egress})
			must(t, err)
			defer m.Close()
			s := w.sandbox(t)
			s.attach(t, m, "sbx1", policy(t, m, "open", nil, nil))
			if !tc.works {
				// The SYN goes out unanswerable: nothing refuses it.
				dialTimeout = 500 * time.Millisecond
				defer func() { dialTimeout = 3 * time.Second }()
			}
			c, err := s.dial("198.51.100.10:7")
			if err == nil {
				c.Close()
			}
			if (err == nil) != tc.works {
				t.Errorf("egress %s: dial: %v; want it to work: %v", tc.egress, err, tc.works)
			}
		})
	}
}
