// Package rules parses the allow and deny rules of sessions' network
// policies and the ceilings tenants are held to. It is pure (no kernel,
// no I/O): the tenant settings' validation uses it without the network
// machinery.
package rules

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

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

// Parse parses one rule: "example.com", "*.example.com",
// "example.com:443", "203.0.113.7", "203.0.113.0/24", "203.0.113.7:443".
// IPv6 rules are refused: sessions have no IPv6 egress yet.
func Parse(s string) (Rule, error) {
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

// Modes, from least to most reach.
var modeRank = map[string]int{"none": 0, "allowlist": 1, "open": 2}

// Ceiling is the most a tenant's sessions may ask of the network.
type Ceiling struct {
	// MaxMode is the widest mode: "none", "allowlist" or "open" (no
	// ceiling).
	MaxMode string
	// Allow, when not empty, is the maximum allow-list: every allow rule
	// of a session must fall within one of these (MaxMode is then
	// allowlist).
	Allow []Rule
}

// ParseCeiling validates a tenant's network ceiling. An empty maxMode is
// open, or allowlist when allow is given.
func ParseCeiling(maxMode string, allow []string) (Ceiling, error) {
	c := Ceiling{MaxMode: maxMode}
	if c.MaxMode == "" {
		c.MaxMode = "open"
		if len(allow) > 0 {
			c.MaxMode = "allowlist"
		}
	}
	if _, ok := modeRank[c.MaxMode]; !ok {
		return c, fmt.Errorf("network max_mode %q is not one of none, allowlist, open", maxMode)
	}
	if len(allow) > 0 && c.MaxMode != "allowlist" {
		return c, fmt.Errorf("a maximum allow-list holds sessions to allowlist; max_mode %s takes none", c.MaxMode)
	}
	if len(allow) > 256 {
		return c, fmt.Errorf("the maximum allow-list has %d rules; at most 256 are allowed", len(allow))
	}
	for _, s := range allow {
		r, err := Parse(s)
		if err != nil {
			return c, fmt.Errorf("maximum allow-list rule %q: %w", s, err)
		}
		c.Allow = append(c.Allow, r)
	}
	return c, nil
}

// Permits says why a session's mode and allow rules exceed c ("" when they
// do not). Deny rules only narrow a policy and are always within it.
func (c Ceiling) Permits(mode string, allow []Rule) string {
	if modeRank[mode] > modeRank[c.MaxMode] {
		return fmt.Sprintf("network mode %s is beyond the tenant's ceiling (at most %s)", mode, c.MaxMode)
	}
	if len(c.Allow) == 0 {
		return ""
	}
	for _, r := range allow {
		covered := false
		for _, cr := range c.Allow {
			if cr.covers(r) {
				covered = true
				break
			}
		}
		if !covered {
			return fmt.Sprintf("allow rule %q is outside the tenant's maximum allow-list", r.Text)
		}
	}
	return ""
}

// covers says whether every name or address and port r allows, c allows.
func (c Rule) covers(r Rule) bool {
	if c.Port != 0 && c.Port != r.Port {
		return false
	}
	switch {
	case r.IsName() && !r.Wildcard:
		return c.Matches(r.Name)
	case r.IsName():
		return c.Wildcard && (r.Name == c.Name || strings.HasSuffix(r.Name, "."+c.Name))
	case c.IsName():
		return false
	default:
		return c.Prefix.Bits() <= r.Prefix.Bits() && c.Prefix.Contains(r.Prefix.Addr())
	}
}
