package network

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// What a daemon stopping with keep leaves for the next one. Sessions'
// links, chains and sets stay in the kernel, so they keep the egress their
// policy allows while no daemon runs; the forwarder and the name check
// stop with the daemon (DNS then fails at once, and so do new connections
// to ports 80 and 443: nothing listens where they are redirected). The
// policies, the pins and who asked for them are saved to a file in
// Config.StateDir, which the next daemon reads (Reconcile), then re-attaches
// each session it adopts (Adopt) and removes the rest (FinishAdoption).

// stateFile is the saved state's name in Config.StateDir.
const stateFile = "sessions.json"

type savedSession struct {
	Name  string     `json:"name"`
	Index uint32     `json:"index"`
	Gen   int        `json:"gen"`
	Mode  Mode       `json:"mode"`
	Allow []string   `json:"allow,omitempty"`
	Deny  []string   `json:"deny,omitempty"`
	Pins  []savedPin `json:"pins,omitempty"`
	Den   []Denial   `json:"denials,omitempty"`
}

type savedPin struct {
	Port  uint16     `json:"port"`
	Addr  netip.Addr `json:"addr"`
	Until time.Time  `json:"until"`
	Names []string   `json:"names"`
}

// Release stops this daemon's part of the sessions' network (forwarders,
// name checks, the denial log) and saves their state for the next daemon,
// leaving links, rules and sets in the kernel: for a shutdown that keeps
// sessions running. Without Config.StateDir it is Close.
func (m *Manager) Release() error {
	if m.cfg.StateDir == "" {
		return m.Close()
	}
	m.mu.Lock()
	var saved []savedSession
	for k, s := range m.sessions {
		if k != s.name {
			continue
		}
		s.fwd.stop()
		s.prx.stop()
		saved = append(saved, s.save())
	}
	m.sessions = map[string]*session{}
	var errs []error
	if len(saved) > 0 {
		errs = append(errs, writeState(m.cfg.StateDir, saved))
	} else if m.ready {
		// Nothing to keep: leave nothing behind either.
		errs = append(errs, m.nft.remove())
	}
	m.ready = false
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

func (s *session) save() savedSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	sv := savedSession{Name: s.name, Index: s.idx, Gen: s.nft.gen, Mode: s.policy.Mode, Allow: Strings(s.policy.Allow), Deny: Strings(s.policy.Deny), Den: s.den.list()}
	now := time.Now()
	for port, pins := range s.pins {
		for a, until := range pins {
			if until.After(now) {
				var names []string
				for n := range s.names[a] {
					names = append(names, n)
				}
				sv.Pins = append(sv.Pins, savedPin{Port: port, Addr: a, Until: until, Names: names})
			}
		}
	}
	return sv
}

func writeState(dir string, saved []savedSession) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(saved)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, stateFile))
}

// loadStateLocked reads and removes the saved state: it is good for the
// one daemon start after the shutdown that wrote it.
func (m *Manager) loadStateLocked() (map[string]*savedSession, error) {
	if m.cfg.StateDir == "" {
		return nil, nil
	}
	p := filepath.Join(m.cfg.StateDir, stateFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	os.Remove(p)
	var saved []savedSession
	if err := json.Unmarshal(b, &saved); err != nil {
		return nil, fmt.Errorf("read the sessions' network state %s: %w", p, err)
	}
	out := map[string]*savedSession{}
	for i := range saved {
		out[saved[i].Name] = &saved[i]
	}
	return out, nil
}

// tableIntact says whether the table holds every shared chain and set
// this version uses (one left by an older version is swept instead).
func (m *Manager) tableIntact() bool {
	c, err := m.nft.conn()
	if err != nil {
		return false
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return false
	}
	want := map[string]bool{"forward": false, "input": false, "postrouting": false, "prerouting": false}
	for _, ch := range chains {
		if ch.Table.Name == TableName {
			if _, ok := want[ch.Name]; ok {
				want[ch.Name] = true
			}
		}
	}
	for _, ok := range want {
		if !ok {
			return false
		}
	}
	return true
}

// Adopt re-attaches the network an earlier daemon left for the sandbox
// name (now at nsPath): its forwarder and name check start again, and its
// rules and sets are replaced by this daemon's in one transaction, with
// the saved pins. A sandbox with nothing saved is an error: its remains,
// if any, go at FinishAdoption.
func (m *Manager) Adopt(name, nsPath string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	sv := m.pending[name]
	if sv == nil {
		return fmt.Errorf("sandbox %s has no network to adopt", name)
	}
	if m.sessions[name] != nil {
		return fmt.Errorf("sandbox %s already has a network", name)
	}
	p, err := ParsePolicy(string(sv.Mode), sv.Allow, sv.Deny, m.Blocked)
	if err != nil {
		return fmt.Errorf("the saved policy of sandbox %s: %w", name, err)
	}
	if err := m.adoptReadyLocked(); err != nil {
		return err
	}
	s := &session{m: m, name: name, idx: sv.Index, policy: p, pins: map[uint16]map[netip.Addr]time.Time{}, names: map[netip.Addr]map[string]bool{}}
	base := m.blockBase(sv.Index)
	s.gw, s.nft = base.Next(), &nftSession{name: name, ifname: linkName(name), short: linkName(name)[len(ifPrefix):], gen: sv.Gen + 1}
	s.nft.gw, s.nft.addr = s.gw, s.gw.Next()
	if _, err := m.nl.LinkByName(s.nft.ifname); err != nil {
		return fmt.Errorf("the link of sandbox %s is gone: %w", name, err)
	}
	if err := m.checkPeer(s, nsPath); err != nil {
		return err
	}
	now := time.Now()
	pins := map[uint16]map[netip.Addr]time.Duration{}
	groups := p.portGroups()
	for _, pin := range sv.Pins {
		left := pin.Until.Sub(now)
		if left < time.Second || !containsPort(groups, pin.Port) {
			continue
		}
		if pins[pin.Port] == nil {
			pins[pin.Port], s.pins[pin.Port] = map[netip.Addr]time.Duration{}, map[netip.Addr]time.Time{}
		}
		pins[pin.Port][pin.Addr], s.pins[pin.Port][pin.Addr] = left, pin.Until
		if s.names[pin.Addr] == nil {
			s.names[pin.Addr] = map[string]bool{}
		}
		for _, n := range pin.Names {
			s.names[pin.Addr][n] = true
		}
	}
	for _, d := range sv.Den {
		s.den.add(d)
	}
	s.prx = &proxy{m: m, s: s}
	if err := s.prx.start(); err != nil {
		return err
	}
	s.nft.proxyPort = s.prx.port
	if err := m.nft.adoptSession(s.nft, p, pins); err != nil {
		s.prx.stop()
		return err
	}
	s.fwd = &forwarder{m: m, s: s}
	if err := s.fwd.start(); err != nil {
		s.prx.stop()
		return err
	}
	delete(m.pending, name)
	m.used[sv.Index] = true
	m.sessions[name] = s
	m.sessions[nameOfLink(s.nft.ifname)] = s
	return nil
}

// checkPeer makes sure the sandbox at nsPath holds the other end of the
// session's link (its eth0 with the session's address), so that a
// sandbox is never given another's network.
func (m *Manager) checkPeer(s *session, nsPath string) error {
	var found bool
	err := withLinkAddrs(nsPath, "eth0", func(addrs []netip.Addr) {
		for _, a := range addrs {
			if a == s.nft.addr {
				found = true
			}
		}
	})
	if err != nil {
		return fmt.Errorf("read the sandbox's eth0: %w", err)
	}
	if !found {
		return fmt.Errorf("the sandbox's eth0 does not have the session's address %s", s.nft.addr)
	}
	return nil
}

// adoptReadyLocked is readyLocked for a table a kept daemon left: the
// table stays (sweeping it would lapse every kept session's policy), the
// denial log opens.
func (m *Manager) adoptReadyLocked() error {
	if m.ready {
		return nil
	}
	if len(m.upstream) == 0 {
		up, err := HostResolvers("/etc/resolv.conf")
		if err != nil {
			return fmt.Errorf("find the host's resolvers: %w", err)
		}
		m.upstream = up
	}
	blocked, err := m.blockedNowLocked()
	if err != nil {
		return err
	}
	if err := m.nft.setBlocked(blocked); err != nil {
		return fmt.Errorf("update the always-blocked set: %w", err)
	}
	m.blocked.Store(&blocked)
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

// FinishAdoption removes what an earlier daemon left of sessions that
// were not adopted (their sandboxes are gone, or failed to come back), and
// any session link nothing owns.
func (m *Manager) FinishAdoption() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending == nil {
		return nil
	}
	var errs []error
	for name, sv := range m.pending {
		short := linkName(name)[len(ifPrefix):]
		errs = append(errs, m.nft.purgeSession(name, short), m.linkDown(linkName(name)))
		addr := m.blockBase(sv.Index).Next().Next()
		errs = append(errs, m.dropFlows(addr, nil))
		delete(m.used, sv.Index)
	}
	m.pending = nil
	links, err := m.nl.LinkList()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, l := range links {
		if name := l.Attrs().Name; strings.HasPrefix(name, ifPrefix) && m.sessions[nameOfLink(name)] == nil {
			errs = append(errs, m.nl.LinkDel(l))
		}
	}
	if len(m.sessions) == 0 && !m.ready {
		// Nothing adopted: the table goes, as after any other start.
		errs = append(errs, m.nft.remove())
	}
	return errors.Join(errs...)
}

// withLinkAddrs calls fn with the IPv4 addresses of link ifname in the
// network namespace at nsPath.
func withLinkAddrs(nsPath, ifname string, fn func([]netip.Addr)) error {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return err
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(ifname)
	if err != nil {
		return err
	}
	addrs, err := h.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return err
	}
	var out []netip.Addr
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok {
			out = append(out, ip)
		}
	}
	fn(out)
	return nil
}
