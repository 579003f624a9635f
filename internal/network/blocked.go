package network

import (
	"encoding/binary"
	"net/netip"
	"slices"
)

// AlwaysBlocked are the IPv4 ranges no session reaches in any mode, unless
// the operator lists a range in network.allow_private: "this network",
// RFC 1918, CGNAT (100.64/10), loopback, link-local (cloud metadata at
// 169.254.169.254 included), the IETF protocol block, benchmarking,
// multicast, reserved and broadcast. The host's own addresses and the
// sessions' range are added to these at run time and cannot be opened.
// IPv6 is blocked whole (docs/NETWORKING.md).
var AlwaysBlocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// span is an inclusive range of IPv4 addresses as numbers.
type span struct{ lo, hi uint32 }

func spanOf(p netip.Prefix) span {
	p = p.Masked()
	a := p.Addr().As4()
	lo := binary.BigEndian.Uint32(a[:])
	size := uint64(1) << (32 - p.Bits())
	return span{lo, uint32(uint64(lo) + size - 1)}
}

func u32addr(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// merge sorts spans and joins the ones that overlap or touch.
func merge(in []span) []span {
	s := slices.Clone(in)
	slices.SortFunc(s, func(a, b span) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	var out []span
	for _, x := range s {
		if n := len(out); n > 0 && (x.lo <= out[n-1].hi || out[n-1].hi != ^uint32(0) && x.lo == out[n-1].hi+1) {
			if x.hi > out[n-1].hi {
				out[n-1].hi = x.hi
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

// subtract removes cut from every span of in.
func subtract(in []span, cut span) []span {
	var out []span
	for _, x := range in {
		if cut.hi < x.lo || cut.lo > x.hi {
			out = append(out, x)
			continue
		}
		if cut.lo > x.lo {
			out = append(out, span{x.lo, cut.lo - 1})
		}
		if cut.hi < x.hi {
			out = append(out, span{cut.hi + 1, x.hi})
		}
	}
	return out
}

// blockedSpans is AlwaysBlocked minus allowPrivate, plus the ranges that
// can never be opened (the host's addresses and the sessions' range).
func blockedSpans(allowPrivate, never []netip.Prefix) []span {
	var s []span
	for _, p := range AlwaysBlocked {
		s = append(s, spanOf(p))
	}
	s = merge(s)
	for _, p := range allowPrivate {
		if p.Addr().Is4() {
			s = subtract(s, spanOf(p))
		}
	}
	for _, p := range never {
		if p.Addr().Is4() {
			s = append(s, spanOf(p))
		}
	}
	return merge(s)
}

func overlaps(spans []span, p netip.Prefix) bool {
	x := spanOf(p)
	for _, s := range spans {
		if x.lo <= s.hi && x.hi >= s.lo {
			return true
		}
	}
	return false
}

func contains(spans []span, a netip.Addr) bool {
	if !a.Is4() {
		return true // no IPv6 egress: every IPv6 address is blocked
	}
	b := a.As4()
	v := binary.BigEndian.Uint32(b[:])
	for _, s := range spans {
		if v >= s.lo && v <= s.hi {
			return true
		}
	}
	return false
}
