package escape

import (
	"testing"

	"github.com/warrenhq/warren/api"
)

// TestShellErrorsNameTheShell: the session shell sources each command from
// a driver file; its errors must read as `bash -c` would print them, not
// name that file (issue 19, item 11).
func TestShellErrorsNameTheShell(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "errname", nil)
	for _, c := range []struct{ cmd, want string }{
		{"nosuchcmd", "bash: nosuchcmd: command not found\n"},
		{"echo ok >&2; nosuchcmd", "ok\nbash: nosuchcmd: command not found\n"},
		{"cd /nonexistent", "bash: cd: /nonexistent: No such file or directory\n"},
	} {
		res := b.sh(t, c.cmd)
		if res.Stderr != c.want {
			t.Errorf("%q: stderr %q, want %q", c.cmd, res.Stderr, c.want)
		}
	}
	// Streamed output goes through the same rewrite.
	res := b.exec(t, &api.ExecRequest{Command: "nosuchcmd", Env: map[string]string{"X": "1"}})
	if res.Stderr != "bash: nosuchcmd: command not found\n" {
		t.Errorf("with a per-call env: stderr %q", res.Stderr)
	}
}
