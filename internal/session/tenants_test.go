package session

import (
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestProgram(t *testing.T) {
	tests := []struct {
		command string
		argv    []string
		want    string
	}{
		{"ls -la", nil, "ls"},
		{"FOO=1 BAR=2 python3 x.py", nil, "python3"},
		{"/usr/bin/curl http://x", nil, "curl"},
		{"  npm   install", nil, "npm"},
		{"", []string{"/bin/rm", "-rf"}, "rm"},
		{"(cd /tmp && make)", nil, "cd"},
		{"", nil, ""},
	}
	for _, tc := range tests {
		if got := program(tc.command, tc.argv); got != tc.want {
			t.Errorf("program(%q, %q) = %q, want %q", tc.command, tc.argv, got, tc.want)
		}
	}
}

func TestCheckPolicy(t *testing.T) {
	allow := TenantLimits{Allow: []string{"python3", "ls"}}
	deny := TenantLimits{Deny: []string{"curl"}}
	tests := []struct {
		tl      TenantLimits
		command string
		ok      bool
	}{
		{TenantLimits{}, "anything", true},
		{allow, "python3 -c 1", true},
		{allow, "bash -c x", false},
		{deny, "curl http://x", false},
		{deny, "wget x", true},
	}
	for _, tc := range tests {
		err := checkPolicy("t", tc.tl, tc.command, nil)
		if (err == nil) != tc.ok || (err != nil && !errdefs.Is(err, errdefs.ErrPermissionDenied)) {
			t.Errorf("checkPolicy(%+v, %q) = %v, want ok=%v", tc.tl, tc.command, err, tc.ok)
		}
	}
}
