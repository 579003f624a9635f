package network

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		in       string
		name     string
		wildcard bool
		prefix   string
		port     uint16
		err      string
	}{
		{in: "pypi.org", name: "pypi.org"},
		{in: "PyPI.org.", name: "pypi.org"},
		{in: "*.pythonhosted.org", name: "pythonhosted.org", wildcard: true},
		{in: "github.com:443", name: "github.com", port: 443},
		{in: "203.0.113.7", prefix: "203.0.113.7/32"},
		{in: "203.0.113.9/24", prefix: "203.0.113.0/24"},
		{in: "203.0.113.7:8080", prefix: "203.0.113.7/32", port: 8080},
		{in: "", err: "empty"},
		{in: "*.com", err: "two labels"},
		{in: "a.*.example.com", err: "leftmost"},
		{in: "*", err: "wildcard"},
		{in: "x.test:0", err: "1 to 65535"},
		{in: "x.test:65536", err: "1 to 65535"},
		{in: "x.test:http", err: "1 to 65535"},
		{in: "-x.test", err: "starts or ends"},
		{in: "a..test", err: "empty or over-long"},
		{in: strings.Repeat("a", 64) + ".test", err: "over-long"},
		{in: "2001:db8::1", err: "IPv6"},
		{in: "[2001:db8::1]:443", err: "IPv6"},
		{in: "2001:db8::/32", err: "IPv6"},
		{in: "10.0.0.0/33", err: "not a valid CIDR"},
		{in: "exa mple.com", err: "not a valid host name"},
	} {
		r, err := ParseRule(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseRule(%q) = %+v, %v; want an error saying %q", tc.in, r, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tc.in, err)
			continue
		}
		var p netip.Prefix
		if tc.prefix != "" {
			p = netip.MustParsePrefix(tc.prefix)
		}
		if r.Name != tc.name || r.Wildcard != tc.wildcard || r.Prefix != p || r.Port != tc.port {
			t.Errorf("ParseRule(%q) = %+v", tc.in, r)
		}
	}
}

func TestNameVerdict(t *testing.T) {
	p, err := ParsePolicy("", []string{"*.github.com", "github.com:443", "api.github.com:22", "x.test"}, []string{"gist.github.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != ModeAllowlist {
		t.Errorf("mode %q; allow without a mode is allowlist", p.Mode)
	}
	for _, tc := range []struct {
		name   string
		ports  string
		reason string
	}{
		{"github.com", "[443]", ""},
		{"api.github.com", "[0]", ""}, // the wildcard allows every port
		{"a.b.github.com", "[0]", ""},
		{"gist.github.com", "[]", "denied by rule"},
		{"x.test", "[0]", ""},
		{"y.test", "[]", "not on the allow-list"},
		{"notgithub.com", "[]", "not on the allow-list"},
	} {
		ports, reason := p.nameVerdict(tc.name)
		if fmt.Sprint(ports) != tc.ports || !strings.Contains(reason, tc.reason) || (tc.reason == "") != (reason == "") {
			t.Errorf("nameVerdict(%q) = %v, %q; want %s, %q", tc.name, ports, reason, tc.ports, tc.reason)
		}
	}
}

func TestParsePolicyRefuses(t *testing.T) {
	m, err := New(Config{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	many := make([]string, MaxRules+1)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.test", i)
	}
	for _, tc := range []struct {
		mode        string
		allow, deny []string
		err         string
	}{
		{"bridge", nil, nil, "not one of"},
		{"none", []string{"x.test"}, nil, "takes no allow"},
		{"open", []string{"x.test"}, nil, "use deny rules"},
		{"allowlist", many, nil, "at most 256"},
		{"allowlist", []string{"192.168.1.0/24"}, nil, "always-blocked"},
		{"allowlist", []string{"169.254.169.254"}, nil, "always-blocked"},
		{"allowlist", []string{"10.1.0.0/8"}, nil, "always-blocked"},
		{"allowlist", []string{"10.213.0.9"}, nil, "always-blocked"}, // the sessions' range
		{"allowlist", []string{"x.test"}, []string{"y.test:443"}, "take no port"},
		{"allowlist", []string{"x.test"}, []string{"*"}, "deny rule"},
	} {
		if _, err := ParsePolicy(tc.mode, tc.allow, tc.deny, m.Blocked); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParsePolicy(%q, %.3v, %v): %v; want %q", tc.mode, tc.allow, tc.deny, err, tc.err)
		}
	}
	if _, err := ParsePolicy("allowlist", []string{"10.1.2.0/24:5432"}, nil, m.Blocked); err != nil {
		t.Errorf("a range inside allow_private: %v", err)
	}
}

func TestBlockedSpans(t *testing.T) {
	s := blockedSpans([]netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("10.213.5.0/24")},
		[]netip.Prefix{netip.MustParsePrefix("10.213.0.0/16"), netip.MustParsePrefix("203.0.113.5/32")})
	for a, want := range map[string]bool{
		"10.0.255.255": true, "10.1.0.0": false, "10.1.255.255": false, "10.2.0.0": true,
		"10.213.5.1":  true, // the sessions' range stays blocked whatever allow_private says
		"203.0.113.5": true, "203.0.113.6": false, "8.8.8.8": false,
		"169.254.169.254": true, "100.64.0.1": true, "224.0.0.1": true, "255.255.255.255": true, "0.1.2.3": true,
		"::1": true, "2001:db8::1": true,
	} {
		if got := contains(s, netip.MustParseAddr(a)); got != want {
			t.Errorf("blocked(%s) = %v, want %v", a, got, want)
		}
	}
}

func TestDenialRing(t *testing.T) {
	var r ring
	for i := range MaxDenials + 10 {
		r.add(Denial{Port: uint16(i)})
	}
	l := r.list()
	if len(l) != MaxDenials || l[0].Port != 10 || l[len(l)-1].Port != MaxDenials+9 {
		t.Errorf("ring kept %d, first %d, last %d", len(l), l[0].Port, l[len(l)-1].Port)
	}
}

func TestHostResolvers(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain := write("plain", "# comment\nsearch example\nnameserver 192.0.2.53\nnameserver 2001:db8::53\nnameserver bogus\noptions edns0\n")
	stub := write("stub", "nameserver 127.0.0.53\noptions edns0 trust-ad\n")
	systemdResolvConf = write("systemd", "nameserver 198.51.100.53\nnameserver 198.51.100.54\n")
	defer func() { systemdResolvConf = "/run/systemd/resolve/resolv.conf" }()
	for _, tc := range []struct {
		path string
		want string
	}{
		{plain, "[192.0.2.53:53 [2001:db8::53]:53]"},
		{stub, "[198.51.100.53:53 198.51.100.54:53]"}, // the stub is not reachable from a session's uplink
	} {
		got, err := HostResolvers(tc.path)
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("HostResolvers(%s) = %v, %v; want %s", tc.path, got, err, tc.want)
		}
	}
	if _, err := HostResolvers(write("empty", "search x\n")); err == nil {
		t.Errorf("a resolv.conf without servers gave no error")
	}
}
