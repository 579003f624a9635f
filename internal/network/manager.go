package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/network/nsexec"
)

// DefaultRange is where sessions' addresses come from: one /30 each (the
// host side, then the sandbox), 16,384 sessions.
var DefaultRange = netip.MustParsePrefix("10.213.0.0/16")

// Config is the daemon-wide network setup.
type Config struct {
	// Range is the IPv4 range of session links (DefaultRange if unset).
	Range netip.Prefix
	// Egress is the interface sessions' traffic is masqueraded out of;
	// "" is whichever interface the route takes (the default route's).
	Egress string
	// Upstream are the resolvers ("ip" or "ip:port") the forwarder asks;
	// none: the host's, from /etc/resolv.conf.
	Upstream []string
	// AllowPrivate are ranges taken out of the always-blocked list.
	AllowPrivate []netip.Prefix
	// NetNS is the path of the network namespace that holds the sessions'
	// uplink (host-side veths, the nft table, the forwarder's sockets);
	// "" is the daemon's own. Tests give a namespace of their own with a
	// fake internet behind it.
	NetNS string
	// MaxConnections caps each session's concurrent connections
	// (DefaultMaxConnections if 0; negative: no cap), so that one session
	// cannot fill the host's connection tracking table.
	MaxConnections int
	// StateDir is where a daemon stopping with keep saves the sessions'
	// network state for the next one (Release, Adopt); "" : nothing is
	// saved, and kept sessions lose egress at the next start.
	StateDir string
	// OnDenial, if set, hears of every denial (the daemon's audit log).
	// It must not block.
	OnDenial func(sandbox string, d Denial)
	Log      *slog.Logger
}

// DefaultMaxConnections is the default cap on a session's concurrent
// connections.
const DefaultMaxConnections = 1024

// Manager gives sessions their links, rules and forwarders.
type Manager struct {
	cfg      Config
	log      *slog.Logger
	ns       netns.NsHandle // closed (None) for the daemon's own
	nl       *netlink.Handle
	nft      *nft
	upstream []string
	dlog     *denialLog
	// lock is this daemon's claim on the namespace's egress, taken
	// before it first touches the table or links (Reconcile, the first
	// Attach) and given up at Close.
	lock *nsLock

	mu       sync.Mutex
	ready    bool
	sessions map[string]*session
	used     map[uint32]bool // /30 blocks in use, by index
	// pending are the sessions a kept daemon left, until adopted or
	// removed (FinishAdoption); nil when there are none.
	pending map[string]*savedSession
	// denied counts denials by Kind since the start (the metrics).
	denied map[string]*atomic.Uint64
	// retired are the bytes in and out of sessions detached since the
	// start, so the metrics' totals never go down.
	retired [2]atomic.Uint64
	// blocked is what is in the blocked4 set; written under mu, read
	// without it by the forwarders (an attach holds mu for milliseconds).
	blocked atomic.Pointer[[]span]
}

// session is one session's network.
type session struct {
	m    *Manager
	name string
	gw   netip.Addr
	idx  uint32
	fwd  *forwarder
	prx  *proxy
	den  ring

	mu     sync.Mutex // serializes changes to the session's nft state
	nft    *nftSession
	policy Policy
	// pins are the addresses DNS answers put in each port group's set,
	// and when they expire there.
	pins map[uint16]map[netip.Addr]time.Time
	// told is when OnDenial last heard of each kind, host and port, so a
	// client retrying in a loop does not flood the audit log.
	toldMu sync.Mutex
	told   map[string]time.Time
	// names are the names whose answers held each pinned address, so a
	// policy change keeps an address only while one of them is allowed.
	names map[netip.Addr]map[string]bool
}

// New prepares a manager; nothing on the host changes until the first
// Attach (or Reconcile).
func New(cfg Config) (*Manager, error) {
	if !cfg.Range.IsValid() {
		cfg.Range = DefaultRange
	}
	if !cfg.Range.Addr().Is4() || cfg.Range.Bits() > 29 {
		return nil, fmt.Errorf("network range %s must be IPv4 and hold at least two /30 blocks", cfg.Range)
	}
	cfg.Range = cfg.Range.Masked()
	for _, p := range cfg.AllowPrivate {
		if !p.Addr().Is4() {
			return nil, fmt.Errorf("allow_private range %s: IPv6 egress is not supported", p)
		}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, log: cfg.Log, ns: netns.None(), sessions: map[string]*session{}, used: map[uint32]bool{}, denied: map[string]*atomic.Uint64{}}
	for _, k := range Kinds {
		m.denied[k] = new(atomic.Uint64)
	}
	nsfd := 0
	if cfg.NetNS != "" {
		ns, err := netns.GetFromPath(cfg.NetNS)
		if err != nil {
			return nil, fmt.Errorf("open network namespace %s: %w", cfg.NetNS, err)
		}
		m.ns, nsfd = ns, int(ns)
	}
	// Route netlink only: a handle of every family would also open
	// XFRM and netfilter sockets, and a kernel without those modules
	// loaded refuses the whole handle (EPROTONOSUPPORT, seen on Debian
	// 12's kernel in test/vm).
	nl, err := netlink.NewHandleAt(m.ns, unix.NETLINK_ROUTE)
	if err != nil {
		m.ns.Close()
		return nil, fmt.Errorf("netlink: %w", err)
	}
	m.nl = nl
	m.nft = newNFT(nsfd)
	switch {
	case cfg.MaxConnections == 0:
		m.nft.maxConns = DefaultMaxConnections
	case cfg.MaxConnections > 0:
		m.nft.maxConns = uint32(cfg.MaxConnections)
	}
	for _, u := range cfg.Upstream {
		if _, _, err := net.SplitHostPort(u); err != nil {
			u = net.JoinHostPort(u, "53")
		}
		m.upstream = append(m.upstream, u)
	}
	return m, nil
}

// Blocked says whether any of p is always blocked: the check for address
// rules, which may not name what no session can reach.
func (m *Manager) Blocked(p netip.Prefix) bool {
	return overlaps(blockedSpans(m.cfg.AllowPrivate, []netip.Prefix{m.cfg.Range}), p)
}

func (m *Manager) isBlocked(a netip.Addr) bool {
	b := m.blocked.Load()
	return b == nil || contains(*b, a)
}

// Reconcile removes what an earlier daemon left: warren's table and every
// session link (wrn*), so that nothing of an old policy stays in force
// (fail closed). Sessions it had keep running without egress. A host
// without nf_tables has no table to remove: that is not an error here
// (a session that asks for a network is then refused).
func (m *Manager) Reconcile() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	had, err := m.nft.exists()
	if err != nil {
		return nil
	}
	if err := m.lockLocked(); err != nil {
		return err
	}
	saved, err := m.loadStateLocked()
	if err != nil {
		m.log.Warn("the sessions' network state a kept daemon saved cannot be read; their network is removed", "error", err)
	}
	if had && len(saved) > 0 && m.tableIntact() {
		// Kept sessions keep their rules, and their addresses, until
		// adopted or removed.
		m.pending = saved
		for _, sv := range saved {
			m.used[sv.Index] = true
		}
		return nil
	}
	return m.sweepLocked()
}

// lockLocked claims the namespace's egress for this daemon, once.
func (m *Manager) lockLocked() error {
	if m.lock != nil {
		return nil
	}
	l, err := lockNS(m.cfg.NetNS)
	if err != nil {
		return err
	}
	m.lock = l
	return nil
}

func (m *Manager) sweepLocked() error {
	var errs []error
	if err := m.nft.remove(); err != nil {
		errs = append(errs, fmt.Errorf("remove nftables table: %w", err))
	}
	links, err := m.nl.LinkList()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, l := range links {
		if name := l.Attrs().Name; strings.HasPrefix(name, ifPrefix) && m.sessions[nameOfLink(name)] == nil {
			if err := m.nl.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("delete link %s: %w", name, err))
			}
		}
	}
	m.ready = false
	return errors.Join(errs...)
}

// nameOfLink is a key no session has unless its link matches.
func nameOfLink(ifname string) string { return "link:" + ifname }

func linkName(sandbox string) string {
	short := sandbox
	if len(short) > 12 {
		short = short[:12]
	}
	return ifPrefix + short
}

// readyLocked installs the table and turns on forwarding once.
func (m *Manager) readyLocked() error {
	if m.ready {
		return nil
	}
	if m.pending != nil {
		// Kept sessions wait for adoption: the table stays.
		return m.adoptReadyLocked()
	}
	if len(m.upstream) == 0 {
		up, err := HostResolvers("/etc/resolv.conf")
		if err != nil {
			return fmt.Errorf("find the host's resolvers: %w", err)
		}
		m.upstream = up
	}
	if err := m.lockLocked(); err != nil {
		return err
	}
	if err := m.sweepLocked(); err != nil {
		return err
	}
	blocked, err := m.blockedNowLocked()
	if err != nil {
		return err
	}
	if err := m.nft.install(m.cfg.Range, m.cfg.Egress, blocked); err != nil {
		return err
	}
	m.blocked.Store(&blocked)
	if err := inNS(m.ns, enableForwarding(m.log)); err != nil {
		return err
	}
	if m.dlog == nil {
		l, err := openDenialLog(m.nft.nsfd)
		if err != nil {
			return err
		}
		m.dlog = l
		go l.run(m)
	}
	m.ready = true
	return nil
}

// enableForwarding turns on IPv4 forwarding, which sessions' egress needs;
// it is host-wide (for the namespace), so it is logged.
func enableForwarding(log *slog.Logger) func() error {
	return func() error {
		const p = "/proc/sys/net/ipv4/ip_forward"
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(b)) == "1" {
			return nil
		}
		log.Warn("turning on IPv4 forwarding (net.ipv4.ip_forward=1) for sessions' egress")
		return os.WriteFile(p, []byte("1\n"), 0o644)
	}
}

// blockedNowLocked is the always-blocked list with the host's current
// addresses (every interface of the uplink's namespace) and the range.
func (m *Manager) blockedNowLocked() ([]span, error) {
	addrs, err := m.nl.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("list the host's addresses: %w", err)
	}
	never := []netip.Prefix{m.cfg.Range}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok {
			never = append(never, netip.PrefixFrom(ip, 32))
		}
	}
	return blockedSpans(m.cfg.AllowPrivate, never), nil
}

// Info is what Attach gave a session.
type Info struct {
	// Interface is the host side's name.
	Interface string
	// Address is the sandbox's; Gateway the host side's, which is also
	// the session's name server.
	Address, Gateway netip.Addr
}

// Attach gives the sandbox whose network namespace is at nsPath (such as
// /proc/PID/ns/net) a link out under policy p, and a forwarder. name is
// the sandbox's host-unique name. On error nothing of it remains.
func (m *Manager) Attach(name, nsPath string, p Policy) (*Info, error) {
	if p.Mode == ModeNone {
		return nil, fmt.Errorf("network mode none needs no attachment")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions[name] != nil {
		return nil, fmt.Errorf("sandbox %s already has a network", name)
	}
	if err := m.readyLocked(); err != nil {
		return nil, err
	}
	idx, ok := m.allocLocked()
	if !ok {
		return nil, fmt.Errorf("the session network range %s is full", m.cfg.Range)
	}
	s := &session{m: m, name: name, idx: idx, policy: p, pins: map[uint16]map[netip.Addr]time.Time{}, names: map[netip.Addr]map[string]bool{}}
	base := m.blockBase(idx)
	s.gw, s.nft = base.Next(), &nftSession{name: name, ifname: linkName(name), short: linkName(name)[len(ifPrefix):]}
	s.nft.gw, s.nft.addr = s.gw, s.gw.Next()
	undo := []func(){func() { delete(m.used, idx) }}
	fail := func(err error) (*Info, error) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		return nil, err
	}
	// The host's addresses may have changed since the table was made.
	if blocked, err := m.blockedNowLocked(); err != nil {
		return fail(err)
	} else if !slices.Equal(blocked, *m.blocked.Load()) {
		if err := m.nft.setBlocked(blocked); err != nil {
			return fail(fmt.Errorf("update the always-blocked set: %w", err))
		}
		m.blocked.Store(&blocked)
	}
	if err := m.linkUp(s, nsPath); err != nil {
		return fail(err)
	}
	undo = append(undo, func() { m.linkDown(s.nft.ifname) })
	// The proxy listens first: the rules redirect to its port.
	s.prx = &proxy{m: m, s: s}
	if err := s.prx.start(); err != nil {
		return fail(err)
	}
	undo = append(undo, s.prx.stop)
	s.nft.proxyPort = s.prx.port
	if err := m.nft.addSession(s.nft, p); err != nil {
		return fail(err)
	}
	undo = append(undo, func() { m.nft.removeSession(s.nft) })
	s.fwd = &forwarder{m: m, s: s}
	if err := s.fwd.start(); err != nil {
		return fail(err)
	}
	m.sessions[name] = s
	m.sessions[nameOfLink(s.nft.ifname)] = s
	return &Info{Interface: s.nft.ifname, Address: s.nft.addr, Gateway: s.gw}, nil
}

func (m *Manager) allocLocked() (uint32, bool) {
	n := uint32(1) << (30 - m.cfg.Range.Bits())
	for i := range n {
		if !m.used[i] {
			m.used[i] = true
			return i, true
		}
	}
	return 0, false
}

func (m *Manager) blockBase(idx uint32) netip.Addr {
	b := m.cfg.Range.Addr().As4()
	v := binary.BigEndian.Uint32(b[:]) + idx*4
	return u32addr(v)
}

// linkUp creates the veth pair, the sandbox's end as eth0 in its
// namespace with the default route through the host side.
func (m *Manager) linkUp(s *session, nsPath string) error {
	sns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("open the sandbox's network namespace: %w", err)
	}
	defer sns.Close()
	ifname := s.nft.ifname
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: ifname}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(sns))}
	if err := m.nl.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth %s: %w", ifname, err)
	}
	ok := false
	defer func() {
		if !ok {
			m.linkDown(ifname)
		}
	}()
	host, err := m.nl.LinkByName(ifname)
	if err != nil {
		return err
	}
	// No IPv6 on either end (no link-local address, no router
	// solicitations): sessions have no IPv6 egress, and the rules refuse
	// IPv6 too, should the sandbox turn it back on.
	if err := inNS(m.ns, disableIPv6(ifname)); err != nil {
		return err
	}
	if err := inNS(sns, disableIPv6("eth0")); err != nil {
		return err
	}
	if err := m.nl.AddrAdd(host, &netlink.Addr{IPNet: ipnet(s.gw, 30)}); err != nil {
		return fmt.Errorf("address %s: %w", ifname, err)
	}
	if err := m.nl.LinkSetUp(host); err != nil {
		return err
	}
	h, err := netlink.NewHandleAt(sns, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer h.Close()
	peer, err := h.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("find the sandbox's eth0: %w", err)
	}
	if err := h.AddrAdd(peer, &netlink.Addr{IPNet: ipnet(s.nft.addr, 30)}); err != nil {
		return fmt.Errorf("address the sandbox's eth0: %w", err)
	}
	if err := h.LinkSetUp(peer); err != nil {
		return err
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: peer.Attrs().Index, Gw: net.IP(s.gw.AsSlice())}); err != nil {
		return fmt.Errorf("default route in the sandbox: %w", err)
	}
	// A packet sent before both ends are operational is dropped (the
	// first SYN then waits a second for its retransmission): wait the
	// tens of microseconds that takes.
	if err := nsexec.WaitUp(m.nl, ifname, h, "eth0"); err != nil {
		return err
	}
	ok = true
	return nil
}

// linkDown deletes the host side, which takes the sandbox's end with it;
// a link already gone (its namespace died with the sandbox) is fine.
func (m *Manager) linkDown(ifname string) error {
	l, err := m.nl.LinkByName(ifname)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return err
	}
	// A link whose sandbox's namespace is being torn down may vanish
	// between the lookup and the delete.
	if err := m.nl.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
		return err
	}
	return nil
}

// disableIPv6 turns IPv6 off on the link ifname of the calling thread's
// namespace; a kernel without IPv6 has nothing to turn off.
func disableIPv6(ifname string) func() error {
	return func() error {
		err := os.WriteFile("/proc/sys/net/ipv6/conf/"+ifname+"/disable_ipv6", []byte("1\n"), 0o644)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
}

func ipnet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, 32)}
}

// Update changes a session's policy live, in one nft transaction; the
// addresses its forwarder pinned stay only for names p still allows.
// Mode none is refused: detach instead.
func (m *Manager) Update(name string, p Policy) error {
	if p.Mode == ModeNone {
		return fmt.Errorf("a live session cannot change to mode none; delete and create it")
	}
	m.mu.Lock()
	s := m.sessions[name]
	m.mu.Unlock()
	if s == nil {
		return fmt.Errorf("sandbox %s has no network", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	keep := map[uint16]map[netip.Addr]time.Duration{}
	pins := map[uint16]map[netip.Addr]time.Time{}
	if p.Mode == ModeAllowlist {
		groups := p.portGroups()
		for a, exp := range s.pinnedLocked(now) {
			var ports []uint16
			for n := range exp.names {
				if ps, reason := p.nameVerdict(n); reason == "" {
					ports = append(ports, ps...)
				}
			}
			for _, port := range ports {
				if !slices.Contains(groups, port) {
					continue
				}
				if keep[port] == nil {
					keep[port], pins[port] = map[netip.Addr]time.Duration{}, map[netip.Addr]time.Time{}
				}
				keep[port][a], pins[port][a] = exp.at.Sub(now), exp.at
			}
		}
	}
	if err := m.nft.updateSession(s.nft, p, keep); err != nil {
		return err
	}
	for a := range s.names {
		if _, ok := keepAny(keep, a); !ok {
			delete(s.names, a)
		}
	}
	s.policy, s.pins = p, pins
	s.prx.recheck(p, func(dst netip.Addr, port uint16) bool {
		return s.allows(p, keep, dst, unix.IPPROTO_TCP, port)
	})
	if err := m.dropFlows(s.nft.addr, func(dst netip.Addr, proto uint8, port uint16) bool {
		return s.allows(p, keep, dst, proto, port)
	}); err != nil {
		// The new policy is in force for every new connection; only
		// connections already open to what it refuses may go on.
		m.log.Warn("end a session's connections its new network policy refuses", "sandbox", name, "error", err)
	}
	return nil
}

type pinned struct {
	names map[string]bool
	at    time.Time
}

// pinnedLocked lists unexpired pins with the name that put them there.
func (s *session) pinnedLocked(now time.Time) map[netip.Addr]pinned {
	out := map[netip.Addr]pinned{}
	for _, m := range s.pins {
		for a, at := range m {
			if at.After(now.Add(time.Second)) && at.After(out[a].at) {
				out[a] = pinned{s.names[a], at}
			}
		}
	}
	return out
}

// Detach removes a session's link, rules and forwarder.
func (m *Manager) Detach(name string) error {
	m.mu.Lock()
	s := m.sessions[name]
	if s != nil {
		// Its bytes move to the retired totals as it leaves the map,
		// both under mu, so the metrics' totals never go down.
		if in, out, err := m.traffic(s); err == nil {
			m.retired[0].Add(in)
			m.retired[1].Add(out)
		}
		delete(m.sessions, name)
		delete(m.sessions, nameOfLink(s.nft.ifname))
	}
	m.mu.Unlock()
	if s == nil {
		return nil
	}
	s.fwd.stop()
	s.prx.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	err := errors.Join(m.nft.removeSession(s.nft), m.linkDown(s.nft.ifname), m.dropFlows(s.nft.addr, nil))
	m.mu.Lock()
	delete(m.used, s.idx)
	m.mu.Unlock()
	return err
}

// Close detaches every session and removes the table.
func (m *Manager) Close() error {
	m.mu.Lock()
	var names []string
	for k, s := range m.sessions {
		if k == s.name {
			names = append(names, k)
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, n := range names {
		errs = append(errs, m.Detach(n))
	}
	m.mu.Lock()
	if m.ready || m.pending != nil {
		errs = append(errs, m.nft.remove())
		m.ready, m.pending = false, nil
	}
	if m.dlog != nil {
		m.dlog.close()
		m.dlog = nil
	}
	m.lock.release()
	m.lock = nil
	m.mu.Unlock()
	m.nl.Close()
	if m.ns.IsOpen() {
		m.ns.Close()
	}
	return errors.Join(errs...)
}

// Denials returns what a session's policy refused lately, oldest first.
func (m *Manager) Denials(name string) ([]Denial, bool) {
	m.mu.Lock()
	s := m.sessions[name]
	m.mu.Unlock()
	if s == nil {
		return nil, false
	}
	return s.den.list(), true
}

// Policy returns a session's current policy.
func (m *Manager) Policy(name string) (Policy, bool) {
	m.mu.Lock()
	s := m.sessions[name]
	m.mu.Unlock()
	if s == nil {
		return Policy{}, false
	}
	return s.currentPolicy(), true
}

func (s *session) currentPolicy() Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.policy
}

func (s *session) deny(d Denial) {
	if d.Time.IsZero() {
		d.Time = time.Now().UTC()
	}
	s.den.add(d)
	if c := s.m.denied[d.Kind]; c != nil {
		c.Add(1)
	}
	if s.m.cfg.OnDenial != nil && s.firstLately(d) {
		s.m.cfg.OnDenial(s.name, d)
	}
	s.m.log.Info("session network denial", "sandbox", s.name, "host", d.Host, "port", d.Port, "proto", d.Proto, "reason", d.Reason)
}

// pin puts addrs in the sets of ports for ttl, under the current policy
// (ports were decided under it, or a later one that still allows them:
// a set that no longer exists is skipped).
func (s *session) pin(ports []uint16, addrs []netip.Addr, ttl time.Duration, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	exp := now.Add(ttl)
	for _, port := range ports {
		set := s.nft.dyn[port]
		if set == nil {
			continue
		}
		have := s.pins[port]
		if have == nil {
			have = map[netip.Addr]time.Time{}
			s.pins[port] = have
		}
		var add, refresh []netip.Addr
		for _, a := range addrs {
			at, ok := have[a]
			switch {
			case ok && !at.After(exp):
				if at.After(now.Add(time.Second)) {
					refresh = append(refresh, a)
				}
				add = append(add, a)
			case !ok:
				add = append(add, a)
			}
		}
		if len(add) == 0 {
			continue
		}
		if err := s.m.nft.pin(set, add, refresh, ttl); err != nil {
			// The kernel's view of an element near its timeout may
			// differ from ours: try the other way once.
			if err2 := s.m.nft.pin(set, add, nil, ttl); err2 != nil {
				if err3 := s.m.nft.pin(set, add, add, ttl); err3 != nil {
					return err
				}
			}
		}
		for _, a := range add {
			have[a] = exp
		}
	}
	for _, a := range addrs {
		if s.names[a] == nil {
			s.names[a] = map[string]bool{}
		}
		s.names[a][name] = true
	}
	return nil
}

// retellAfter is how long a repeated denial (same kind, host and port)
// goes untold to OnDenial; the ring and the metrics count every one.
const retellAfter = 10 * time.Second

// firstLately says whether d is the first of its kind, host and port in
// retellAfter.
func (s *session) firstLately(d Denial) bool {
	s.toldMu.Lock()
	defer s.toldMu.Unlock()
	if s.told == nil || len(s.told) > 1024 {
		s.told = map[string]time.Time{}
	}
	k := fmt.Sprintf("%s %s %d", d.Kind, d.Host, d.Port)
	if t, ok := s.told[k]; ok && time.Since(t) < retellAfter {
		return false
	}
	s.told[k] = time.Now()
	return true
}

func keepAny(keep map[uint16]map[netip.Addr]time.Duration, a netip.Addr) (time.Duration, bool) {
	for _, m := range keep {
		if d, ok := m[a]; ok {
			return d, true
		}
	}
	return 0, false
}
