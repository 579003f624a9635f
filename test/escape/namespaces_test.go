package escape

import (
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/warrenhq/warren/api"
)

// TestNamespaceEscapes tries to leave the sandbox's namespaces: new mounts,
// unmasking /proc, new or foreign namespaces, pivot_root and chroot tricks,
// ptrace and signals to the agent, and signals to the host.
func TestNamespaceEscapes(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "jail", nil)
	b.needPython(t)

	t.Run("syscalls", func(t *testing.T) {
		cases := []struct{ name, expr, want string }{
			{"mount -t tmpfs none /mnt", `sc("mount", "none", "/mnt", "tmpfs", 0, 0)`, "EPERM"},
			{"bind mount / onto /mnt", `sc("mount", "/", "/mnt", 0, 0x1000|0x4000, 0)`, "EPERM"},
			{"remount / read-write with suid", `sc("mount", "none", "/", 0, 0x20, 0)`, "EPERM"},
			{"mount proc again", `sc("mount", "proc", "/mnt", "proc", 0, 0)`, "EPERM"},
			{"umount2 /proc", `sc("umount2", "/proc", 0)`, "EPERM"},
			{"umount2 /proc MNT_DETACH", `sc("umount2", "/proc", 2)`, "EPERM"},
			{"umount2 the /proc/sys read-only mask", `sc("umount2", "/proc/sys", 2)`, "EPERM"},
			{"umount2 the /proc/keys mask", `sc("umount2", "/proc/keys", 2)`, "EPERM"},
			{"unshare(CLONE_NEWUSER)", `sc("unshare", 0x10000000)`, "EPERM"},
			{"unshare(CLONE_NEWNS)", `sc("unshare", 0x00020000)`, "EPERM"},
			{"unshare(CLONE_NEWNET)", `sc("unshare", 0x40000000)`, "EPERM"},
			{"unshare(CLONE_NEWPID)", `sc("unshare", 0x20000000)`, "EPERM"},
			{"unshare(CLONE_NEWCGROUP)", `sc("unshare", 0x02000000)`, "EPERM"},
			{"open /proc/1/ns/mnt (the agent's)", `tryos(os.open, "/proc/1/ns/mnt", os.O_RDONLY)`, "EACCES"},
			{"setns into our own mount ns", `sc("setns", os.open("/proc/self/ns/mnt", os.O_RDONLY), 0x00020000)`, "EPERM"},
			{"setns into our own user ns", `sc("setns", os.open("/proc/self/ns/user", os.O_RDONLY), 0x10000000)`, "EPERM"},
			{"pivot_root . .", `(os.chdir("/"), sc("pivot_root", ".", "."))[1]`, "EPERM"},
			{"fsopen tmpfs", `sc("fsopen", "tmpfs", 0)`, "EPERM"},
			{"open_tree / OPEN_TREE_CLONE", `sc("open_tree", -100, "/", 1)`, "EPERM"},
			{"move_mount", `sc("move_mount", -100, "/proc", -100, "/mnt", 0)`, "EPERM"},
			{"mount_setattr /", `sc("mount_setattr", -100, "/", 0, 0, 0)`, "EPERM"},
			{"ptrace(PTRACE_ATTACH, 1)", `sc("ptrace", 16, 1, 0, 0)`, "EPERM"},
			{"ptrace(PTRACE_SEIZE, 1)", `sc("ptrace", 0x4206, 1, 0, 0)`, "EPERM"},
			{"process_vm_readv of the agent", `(lambda b: "OK" if libc.process_vm_readv(1, ctypes.byref(b), 1, ctypes.byref(b), 1, 0) >= 0 else ename(ctypes.get_errno()))((ctypes.c_void_p * 2)(0, 8))`, "EPERM"},
			{"open /proc/1/mem", `tryos(os.open, "/proc/1/mem", os.O_RDONLY)`, "EACCES"},
			{"kill the host test process", fmt.Sprintf(`sc("kill", %d, 0) if not os.path.exists("/proc/%d") else "pid-exists-inside"`, os.Getpid(), os.Getpid()), "ESRCH"},
			{"kill host pid 1 (number far outside)", `sc("kill", 4000000, 9)`, "ESRCH"},
		}
		var prog strings.Builder
		for i, c := range cases {
			fmt.Fprintf(&prog, "try:\n    out(\"c%d\", %s)\nexcept OSError as x:\n    out(\"c%d\", \"raised\", ename(x.errno))\n", i, c.expr, i)
		}
		got := b.pyKV(t, prog.String())
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if g := got[fmt.Sprintf("c%d", i)]; g != c.want {
					t.Errorf("%s: got %q, want %s", c.name, g, c.want)
				}
			})
		}
	})

	t.Run("tools", func(t *testing.T) {
		b.needTool(t, "mount", "umount", "unshare", "nsenter", "mountpoint")
		for _, c := range []struct{ cmd, want string }{
			{"mount -t tmpfs none /mnt", "permission denied"},
			{"umount /proc", "must be superuser"},
			{"umount -l /proc/sys", "must be superuser"},
			{"unshare -U true", "Operation not permitted"},
			{"unshare -m true", "Operation not permitted"},
			{"unshare -Ur true", "Operation not permitted"},
			{"nsenter -t 1 -m -u -i -n -p true", "Permission denied"},
		} {
			res := b.sh(t, c.cmd+" 2>&1")
			if res.ExitCode == 0 || !strings.Contains(res.Stdout, c.want) {
				t.Errorf("%s: exit %d %q, want a failure with %q", c.cmd, res.ExitCode, res.Stdout, c.want)
			}
		}
		// Nothing got mounted and /proc is still there.
		mi := b.out(t, "cat /proc/self/mountinfo")
		if strings.Contains(mi, " /mnt ") {
			t.Errorf("/mnt got mounted: %s", mi)
		}
		if res := b.sh(t, "test -r /proc/self/status && mountpoint -q /proc && grep -c ' /proc/sys ' /proc/self/mountinfo"); res.Stdout != "1\n" {
			t.Errorf("/proc or its read-only /proc/sys mask is gone: %q %q", res.Stdout, res.Stderr)
		}
	})

	t.Run("chroot escape classic", func(t *testing.T) {
		// chroot keeps its classic weakness (the cwd stays outside the new
		// root): inside a sandbox that can only reach the sandbox's own /.
		j := newShadowJudge(t, b)
		hostOnly := hostOnlyNames(t, b, "/etc")
		for _, variant := range []string{"chdir up", "fchdir to a saved fd"} {
			t.Run(variant, func(t *testing.T) {
				escape := `
for i in range(64): os.chdir("..")
`
				if variant == "fchdir to a saved fd" {
					escape = `
os.fchdir(saved)
for i in range(64): os.chdir("..")
`
				}
				got := b.pyKV(t, `
import base64
os.makedirs("/tmp/jail/a/b", exist_ok=True)
saved = os.open("/", os.O_RDONLY)
os.chdir("/tmp/jail")
os.chroot("a")
out("in_jail", ",".join(sorted(os.listdir("/"))))
`+escape+`
os.chroot(".")
out("root", ",".join(sorted(os.listdir("/"))))
out("etc", ",".join(sorted(os.listdir("/etc"))))
out("shadow", base64.b64encode(open("/etc/shadow", "rb").read()).decode())
out("hostname", open("/etc/hostname").read().strip())
`)
				if got["in_jail"] != "b" {
					t.Fatalf("chroot into /tmp/jail/a did not take: / lists %q", got["in_jail"])
				}
				shadow, _ := base64.StdEncoding.DecodeString(got["shadow"])
				if l := j.leaks(string(shadow)); l != "" {
					t.Fatalf("the chroot escape reached the HOST's root: /etc/shadow has %q", l)
				}
				for _, n := range strings.Split(got["etc"], ",") {
					if hostOnly[n] {
						t.Errorf("the chroot escape reached the HOST's /etc: it lists %q", n)
					}
				}
				if string(shadow) != j.sandbox || got["hostname"] != "sandbox" || !strings.Contains(","+got["root"]+",", ",workspace,") {
					t.Errorf("the chroot escape reached an unexpected root: / = %q, hostname %q, shadow %q; want the sandbox's own", got["root"], got["hostname"], shadow)
				}
			})
		}
	})

	t.Run("signals to the agent", func(t *testing.T) {
		before := b.out(t, "cut -d' ' -f22 /proc/1/stat")
		// kill -9 1: PID 1 of a namespace ignores signals from inside that
		// it has no handler for; the agent handles or ignores the rest.
		res := b.sh(t, "kill -9 1; echo $?")
		if res.Stdout != "0\n" && res.Stdout != "1\n" {
			t.Errorf("kill -9 1: %q %q", res.Stdout, res.Stderr)
		}
		b.alive(t, "kill -9 1")
		// Every other signal too, one by one.
		// Several rounds: a signal left at its default disposition kills
		// PID 1 only when it lands while a Go thread blocks signals.
		res = b.sh(t, "for r in $(seq 1 20); do for s in $(seq 1 64); do kill -s $s 1 2>/dev/null; done; done; echo sent")
		if res.Stdout != "sent\n" {
			t.Errorf("sending every signal to PID 1: %+v", res)
		}
		b.alive(t, "every signal to PID 1")
		if after := b.out(t, "cut -d' ' -f22 /proc/1/stat"); after != before {
			t.Errorf("PID 1 changed after the signals: start time %q, now %q", before, after)
		}
		// kill -9 -1 kills everything the shell may signal: only the
		// sandbox's own processes.
		b.exec(t, &api.ExecRequest{Command: "kill -9 -1"})
		b.alive(t, "kill -9 -1")
		if after := b.out(t, "cut -d' ' -f22 /proc/1/stat"); after != before {
			t.Errorf("kill -9 -1 took PID 1 down: start time %q, now %q", before, after)
		}
		if _, err := h.Client.GetSession(bg, b.id); err != nil {
			t.Errorf("the session is gone after the signals: %v", err)
		}
	})

	t.Run("host pid not visible", func(t *testing.T) {
		pid := os.Getpid()
		res := b.sh(t, fmt.Sprintf("test -e /proc/%d && echo visible; kill -0 %d 2>&1; echo $?", pid, pid))
		if !strings.Contains(res.Stdout, "No such process") || !strings.HasSuffix(res.Stdout, "1\n") {
			t.Errorf("kill -0 %d (the test process's host pid) from inside: %q; want ESRCH", pid, res.Stdout)
		}
	})
}
