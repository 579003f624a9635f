package rules

import (
	"strings"
	"testing"
)

func TestCeiling(t *testing.T) {
	parse := func(ss ...string) []Rule {
		var out []Rule
		for _, s := range ss {
			r, err := Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	c, err := ParseCeiling("", []string{"*.github.com", "pypi.org:443", "203.0.113.0/24"})
	if err != nil || c.MaxMode != "allowlist" {
		t.Fatalf("ParseCeiling: %+v %v", c, err)
	}
	for _, tc := range []struct {
		mode  string
		allow []string
		want  string // "" or a fragment of the reason
	}{
		{"allowlist", []string{"api.github.com", "*.x.github.com", "pypi.org:443", "203.0.113.7:80", "203.0.113.128/25"}, ""},
		{"allowlist", nil, ""},
		{"none", nil, ""},
		{"open", nil, "beyond the tenant's ceiling"},
		{"allowlist", []string{"github.com"}, `"github.com" is outside`},    // *.github.com is strict subdomains
		{"allowlist", []string{"pypi.org"}, `"pypi.org" is outside`},        // every port is more than 443
		{"allowlist", []string{"pypi.org:80"}, `outside`},                   // another port
		{"allowlist", []string{"203.0.112.0/23"}, `outside`},                // wider than the ceiling's range
		{"allowlist", []string{"*.githubusercontent.com"}, `outside`},       // a suffix that is not a label boundary
		{"allowlist", []string{"*.com.github.com", "x.api.github.com"}, ""}, // deeper is narrower
		{"allowlist", []string{"198.51.100.1"}, `outside`},                  // another address
		{"allowlist", []string{"203.0.113.9:443", "evil.example"}, `"evil.example"`},
	} {
		got := c.Permits(tc.mode, parse(tc.allow...))
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("Permits(%s, %v) = %q; want %q", tc.mode, tc.allow, got, tc.want)
		}
	}
	none, err := ParseCeiling("none", nil)
	if err != nil || none.Permits("allowlist", nil) == "" || none.Permits("none", nil) != "" {
		t.Errorf("max_mode none: %+v %v", none, err)
	}
	open, _ := ParseCeiling("", nil)
	if open.Permits("open", parse("x.test")) != "" {
		t.Errorf("no ceiling refused")
	}
	for _, bad := range []struct {
		mode  string
		allow []string
	}{{"wide", nil}, {"open", []string{"a.test"}}, {"none", []string{"a.test"}}, {"", []string{"*.com"}}, {"", []string{"a.test:70000"}}} {
		if _, err := ParseCeiling(bad.mode, bad.allow); err == nil {
			t.Errorf("ParseCeiling(%q, %v) accepted", bad.mode, bad.allow)
		}
	}
}
