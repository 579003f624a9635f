package agent

import (
	"strings"
	"testing"
)

// TestNameFilter: the driver's file name at a line start becomes the
// shell's name, however the reads cut the stream.
func TestNameFilter(t *testing.T) {
	cases := []struct{ in, want string }{
		{"/run/warren/cmd: line 1: nosuchcmd: command not found\n", "bash: nosuchcmd: command not found\n"},
		{"/run/warren/cmd: line 12: x: unbound variable\nok\n/run/warren/cmd: line 3: y\n", "bash: x: unbound variable\nok\nbash: y\n"},
		{"/run/warren/cmd: 1: nosuchcmd: not found\n", "bash: 1: nosuchcmd: not found\n"},
		{"say /run/warren/cmd: line 1: not at a line start\n", "say /run/warren/cmd: line 1: not at a line start\n"},
		{"/run/warren/cmdx\n", "/run/warren/cmdx\n"},
		{"/run/warren/cmd: line one\n", "bash: line one\n"},
		{"/run/war", "/run/war"},
		{"/run/warren/cmd: line 4", "bash: line 4"},
		{"", ""},
	}
	for _, c := range cases {
		for step := 1; step <= len(c.in)+1; step++ {
			f := &nameFilter{repl: "bash: "}
			var got strings.Builder
			for i := 0; i < len(c.in); i += step {
				got.Write(f.filter([]byte(c.in[i:min(i+step, len(c.in))])))
			}
			got.Write(f.flush())
			if got.String() != c.want {
				t.Errorf("%q in reads of %d: %q, want %q", c.in, step, got.String(), c.want)
				break
			}
		}
	}
}
