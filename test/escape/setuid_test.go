package escape

import (
	"strings"
	"testing"

	"github.com/warrenhq/warren/api"
)

// TestSetuidGivesNothing: an unprivileged user inside runs setuid-root
// binaries and binaries with file capabilities; no_new_privs keeps its
// euid at 1000 and its capabilities empty.
func TestSetuidGivesNothing(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "suid", nil)
	b.needPython(t)
	// Setuid-root copies made by root inside: of id, and of python.
	b.out(t, `cp /usr/bin/id /tmp/suid-id && chmod 4755 /tmp/suid-id &&
cp "$(readlink -f /usr/bin/python3)" /tmp/suid-py && chmod 4755 /tmp/suid-py &&
stat -c '%a %u' /tmp/suid-id /tmp/suid-py`)
	// A copy of python with file capabilities (cap_setuid and
	// cap_dac_override, both in the sandbox's bounding set: permitted and
	// effective).
	caps := b.pyKV(t, `
import shutil
shutil.copy(os.path.realpath("/usr/bin/python3"), "/tmp/cap-py")
bits = (1 << 7) | (1 << 1)
try:
    os.setxattr("/tmp/cap-py", "security.capability", struct.pack("<IIIII", 0x02000001, bits, 0, 0, 0))
    out("setcap", "OK")
except OSError as x:
    out("setcap", ename(x.errno))
`)

	// drop runs prog as uid/gid 1000 with no groups, the way a program
	// would drop root.
	drop := func(t *testing.T, argv ...string) string {
		t.Helper()
		code := `
import os, sys
os.setgroups([]); os.setgid(1000); os.setuid(1000)
assert os.geteuid() == 1000
os.execv(sys.argv[1], sys.argv[1:])
`
		res := b.exec(t, &api.ExecRequest{Argv: append([]string{"python3", "-c", code}, argv...)})
		return res.Stdout + res.Stderr
	}

	t.Run("setuid id", func(t *testing.T) {
		got := drop(t, "/tmp/suid-id", "-u")
		if got != "1000\n" {
			t.Errorf("setuid-root id run by uid 1000 prints euid %q, want 1000", got)
		}
	})
	t.Run("setuid python", func(t *testing.T) {
		got := drop(t, "/tmp/suid-py", "-c", `import os
print(os.getresuid(), os.getresgid())
print([l for l in open("/proc/self/status") if l.startswith(("CapEff", "CapPrm", "NoNewPrivs"))])`)
		if !strings.Contains(got, "(1000, 1000, 1000)") || !strings.Contains(got, `CapEff:\t0000000000000000`) || !strings.Contains(got, `CapPrm:\t0000000000000000`) || !strings.Contains(got, `NoNewPrivs:\t1`) {
			t.Errorf("setuid-root python run by uid 1000: %q, want resuid 1000 and no capabilities", got)
		}
	})
	t.Run("file capabilities", func(t *testing.T) {
		if caps["setcap"] != "OK" {
			t.Skipf("cannot set security.capability inside (%s): nothing to escalate with", caps["setcap"])
		}
		got := drop(t, "/tmp/cap-py", "-c", `import os
print([l for l in open("/proc/self/status") if l.startswith(("CapEff", "CapPrm"))])
try:
    os.setuid(0); print("setuid(0) OK")
except OSError as x: print("setuid(0)", x.errno)`)
		if !strings.Contains(got, `CapEff:\t0000000000000000`) || !strings.Contains(got, `CapPrm:\t0000000000000000`) || !strings.Contains(got, "setuid(0) 1") {
			t.Errorf("python with file capabilities run by uid 1000: %q, want no capabilities and setuid(0) EPERM", got)
		}
	})
	t.Run("setpriv", func(t *testing.T) {
		b.needTool(t, "setpriv")
		res := b.sh(t, "setpriv --reuid=1000 --regid=1000 --clear-groups /tmp/suid-id -u 2>&1")
		if res.Stdout != "1000\n" {
			t.Errorf("setpriv --reuid=1000 ... /tmp/suid-id -u: %q, want 1000", res.Stdout)
		}
		// The image's own setuid su, without a password (stdin is empty).
		if b.sh(t, "test -u /usr/bin/su").ExitCode == 0 {
			res := b.sh(t, "setpriv --reuid=1000 --regid=1000 --clear-groups su -c 'id -u' root </dev/null 2>&1; echo exit=$?")
			if strings.Contains(res.Stdout, "\n0\n") || strings.HasPrefix(res.Stdout, "0\n") || strings.Contains(res.Stdout, "exit=0") {
				t.Errorf("su as uid 1000 reached uid 0: %q", res.Stdout)
			}
		}
	})
	t.Run("inheritable set is empty", func(t *testing.T) {
		// Docker clears it since CVE-2022-24769: an inheritable set
		// survives setuid and execve, and with a file's inheritable
		// capabilities a non-root program would get them back.
		if got := b.out(t, "grep CapInh /proc/self/status"); got != "CapInh:\t0000000000000000\n" {
			t.Errorf("root's inheritable set: %q, want empty", got)
		}
		if got := drop(t, "/bin/grep", "CapInh", "/proc/self/status"); got != "CapInh:\t0000000000000000\n" {
			t.Errorf("uid 1000's inheritable set: %q, want empty", got)
		}
	})
	t.Run("no_new_privs cannot be cleared", func(t *testing.T) {
		got := b.pyKV(t, `
out("clear", "OK" if libc.prctl(38, 0, 0, 0, 0) == 0 and open("/proc/self/status").read().find("NoNewPrivs:\t0") >= 0 else "kept")
`)
		if got["clear"] != "kept" {
			t.Errorf("prctl(PR_SET_NO_NEW_PRIVS, 0) cleared no_new_privs")
		}
	})
}
