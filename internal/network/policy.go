package network

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/warrenhq/warren/internal/network/rules"
)

// Mode is what a session may reach.
type Mode string

const (
	// ModeNone is loopback only: the sandbox gets no interface but lo.
	ModeNone Mode = "none"
	// ModeOpen is the internet minus the always-blocked ranges.
	ModeOpen Mode = "open"
	// ModeAllowlist is the addresses that allowed names resolve to through
	// the session's forwarder, and the allowed addresses and CIDRs.
	ModeAllowlist Mode = "allowlist"
)

// MaxRules bounds allow plus deny rules of one policy: each rule costs nft
// rules or set lookups on every new connection of the session.
const MaxRules = 256

// Policy is a session's egress policy.
type Policy struct {
	Mode  Mode
	Allow []Rule
	Deny  []Rule
}

// Rule is one allow or deny entry (package rules, which the tenant
// settings' validation uses without the rest of this package).
type Rule = rules.Rule

// ParseRule parses one rule (rules.Parse).
var ParseRule = rules.Parse

// ParsePolicy validates a policy given as text. blocked says whether a
// prefix overlaps what is always blocked (given the operator's
// allow_private); an address rule that does is refused.
func ParsePolicy(mode string, allow, deny []string, blocked func(netip.Prefix) bool) (Policy, error) {
	p := Policy{Mode: Mode(mode)}
	if p.Mode == "" {
		p.Mode = ModeNone
		if len(allow) > 0 {
			p.Mode = ModeAllowlist
		}
	}
	switch p.Mode {
	case ModeNone, ModeOpen, ModeAllowlist:
	default:
		return p, fmt.Errorf("network mode %q is not one of none, open, allowlist", mode)
	}
	if p.Mode == ModeNone && (len(allow) > 0 || len(deny) > 0) {
		return p, fmt.Errorf("network mode none takes no allow or deny rules")
	}
	if p.Mode == ModeOpen && len(allow) > 0 {
		return p, fmt.Errorf("network mode open allows everything not always blocked; use deny rules for exceptions, or mode allowlist")
	}
	if n := len(allow) + len(deny); n > MaxRules {
		return p, fmt.Errorf("network policy has %d rules; at most %d are allowed", n, MaxRules)
	}
	for _, s := range allow {
		r, err := ParseRule(s)
		if err != nil {
			return p, fmt.Errorf("allow rule %q: %w", s, err)
		}
		if !r.IsName() && blocked != nil && blocked(r.Prefix) {
			return p, fmt.Errorf("allow rule %q: overlaps an always-blocked range (private, loopback, link-local, CGNAT, multicast or the host); an operator may open private ranges with network.allow_private", s)
		}
		p.Allow = append(p.Allow, r)
	}
	for _, s := range deny {
		r, err := ParseRule(s)
		if err != nil {
			return p, fmt.Errorf("deny rule %q: %w", s, err)
		}
		if r.Port != 0 {
			return p, fmt.Errorf("deny rule %q: deny rules take no port (they deny a name or range whole)", s)
		}
		p.Deny = append(p.Deny, r)
	}
	return p, nil
}

// Strings returns the rules' texts, as the caller wrote them.
func Strings(rs []Rule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Text
	}
	return out
}

// nameVerdict decides a DNS question. It returns the ports the name's
// addresses may be reached on (0: every port), or a reason for refusing it.
func (p Policy) nameVerdict(name string) (ports []uint16, reason string) {
	for _, r := range p.Deny {
		if r.Matches(name) {
			return nil, "denied by rule " + strconv.Quote(r.Text)
		}
	}
	switch p.Mode {
	case ModeOpen:
		return []uint16{0}, ""
	case ModeAllowlist:
		for _, r := range p.Allow {
			if r.Matches(name) {
				if !slices.Contains(ports, r.Port) {
					ports = append(ports, r.Port)
				}
			}
		}
		if len(ports) == 0 {
			return nil, "not on the allow-list"
		}
		if slices.Contains(ports, 0) {
			ports = []uint16{0}
		}
		slices.Sort(ports)
		return ports, ""
	}
	return nil, "the session has no network"
}

// portGroups lists the ports the policy's allow rules name (0: every
// port), each getting its own pair of nft sets.
func (p Policy) portGroups() []uint16 {
	var out []uint16
	for _, r := range p.Allow {
		if !slices.Contains(out, r.Port) {
			out = append(out, r.Port)
		}
	}
	slices.Sort(out)
	return out
}
