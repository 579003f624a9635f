package network

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// flowFilter selects a session's connections (by their original source,
// the sandbox's address) that keep says may not go on.
type flowFilter struct {
	src  netip.Addr
	keep func(dst netip.Addr, proto uint8, port uint16) bool
}

func (f flowFilter) MatchConntrackFlow(fl *netlink.ConntrackFlow) bool {
	src, _ := netip.AddrFromSlice(fl.Forward.SrcIP.To4())
	if src != f.src {
		return false
	}
	dst, _ := netip.AddrFromSlice(fl.Forward.DstIP.To4())
	return f.keep == nil || !f.keep(dst, fl.Forward.Protocol, fl.Forward.DstPort)
}

// dropFlows deletes the conntrack entries of a session's connections that
// keep refuses (nil: all of them). The next packet of such a connection
// meets the session's rules as a new one and is refused there with a
// reset, so a policy change applies to connections already open, not only
// to new ones; allowed connections keep their entries and go on.
func (m *Manager) dropFlows(src netip.Addr, keep func(dst netip.Addr, proto uint8, port uint16) bool) error {
	// A netfilter netlink handle of its own: the manager's is route only
	// (New says why), and egress needs nfnetlink anyway for its table.
	h, err := netlink.NewHandleAt(m.ns, unix.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("conntrack: %w", err)
	}
	defer h.Close()
	_, err = h.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, flowFilter{src: src, keep: keep})
	return err
}

// allows says whether policy p, with the pinned addresses pins per port
// group, lets the session reach dst on proto/port: the nft rules'
// decision, for connections already open.
func (s *session) allows(p Policy, pins map[uint16]map[netip.Addr]time.Duration, dst netip.Addr, proto uint8, port uint16) bool {
	if dst == s.gw {
		return proto == unix.IPPROTO_UDP || proto == unix.IPPROTO_TCP // DNS to its forwarder
	}
	if s.m.isBlocked(dst) {
		return false
	}
	for _, r := range p.Deny {
		if !r.IsName() && r.Prefix.Contains(dst) {
			return false
		}
	}
	switch p.Mode {
	case ModeOpen:
		return !slices.Contains([]uint16{53, 853}, port)
	case ModeAllowlist:
		l4 := proto == unix.IPPROTO_TCP || proto == unix.IPPROTO_UDP
		for _, g := range p.portGroups() {
			if g != 0 && (!l4 || port != g) {
				continue
			}
			if _, ok := pins[g][dst]; ok {
				return true
			}
			for _, r := range p.Allow {
				if !r.IsName() && r.Port == g && r.Prefix.Contains(dst) {
					return true
				}
			}
		}
	}
	return false
}
