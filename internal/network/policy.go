package network

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
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

// Rule is one allow or deny entry: a name (exact, or "*." and a suffix), or
// an address prefix; Port 0 means every port.
type Rule struct {
	// Text is the rule as the caller wrote it, for messages.
	Text string
	// Name is the lower-case name without a trailing dot; Wildcard means
	// it matches strict subdomains of Name ("*.example.com" matches
	// a.example.com and a.b.example.com, not example.com).
	Name     string
	Wildcard bool
	// Prefix is set for address rules.
	Prefix netip.Prefix
	Port   uint16
}

// IsName says whether the rule matches names rather than addresses.
func (r Rule) IsName() bool { return r.Name != "" }

// Matches says whether the name rule r matches name (lower case, no
// trailing dot).
func (r Rule) Matches(name string) bool {
	if !r.IsName() {
		return false
	}
	if r.Wildcard {
		return strings.HasSuffix(name, "."+r.Name)
	}
	return name == r.Name
}

// ParseRule parses one rule: "example.com", "*.example.com",
// "example.com:443", "203.0.113.7", "203.0.113.0/24", "203.0.113.7:443".
// IPv6 rules are refused: sessions have no IPv6 egress yet.
func ParseRule(s string) (Rule, error) {
	r := Rule{Text: s}
	if s == "" {
		return r, fmt.Errorf("empty rule")
	}
	if len(s) > 300 {
		return r, fmt.Errorf("rule is longer than 300 characters")
	}
	host := s
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") > 1 {
		return r, fmt.Errorf("IPv6 rules are not supported: sessions have no IPv6 egress")
	}
	if h, p, ok := strings.Cut(s, ":"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return r, fmt.Errorf("port %q must be a number from 1 to 65535", p)
		}
		host, r.Port = h, uint16(n)
	}
	if strings.Contains(host, "/") {
		p, err := netip.ParsePrefix(host)
		if err != nil {
			return r, fmt.Errorf("%q is not a valid CIDR", host)
		}
		if !p.Addr().Is4() {
			return r, fmt.Errorf("IPv6 rules are not supported: sessions have no IPv6 egress")
		}
		r.Prefix = p.Masked()
		return r, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() {
			return r, fmt.Errorf("IPv6 rules are not supported: sessions have no IPv6 egress")
		}
		r.Prefix = netip.PrefixFrom(a, 32)
		return r, nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		r.Wildcard = true
		name = rest
		if strings.Count(name, ".") < 1 {
			return r, fmt.Errorf("a wildcard needs at least two labels after \"*.\" (\"*.com\" would allow a whole top-level domain)")
		}
	}
	if err := checkName(name); err != nil {
		return r, err
	}
	r.Name = name
	return r, nil
}

// checkName accepts host names of letters, digits, hyphens and underscores
// (some service names use them), labels of 1-63 bytes, 253 bytes in all.
func checkName(name string) error {
	if name == "" || len(name) > 253 {
		return fmt.Errorf("%q is not a valid host name", name)
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("%q is not a valid host name (empty or over-long label)", name)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("%q is not a valid host name (a label starts or ends with '-')", name)
		}
		for _, c := range []byte(l) {
			ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				if c == '*' {
					return fmt.Errorf("%q: a wildcard is allowed only as the leftmost label (\"*.example.com\")", name)
				}
				return fmt.Errorf("%q is not a valid host name", name)
			}
		}
	}
	return nil
}

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
