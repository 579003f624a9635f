package escape

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// pyIO has rd (read: EMPTY, DATA:n or the errno) and wr (write: OK or the
// errno) for the device and /proc cases.
const pyIO = `
def rd(p, n=65536):
    try:
        with open(p, "rb") as f: d = f.read(n)
        return "EMPTY" if len(d) == 0 else "DATA:%d" % len(d)
    except OSError as x: return ename(x.errno)
def same(p):
    # what p holds now, so that a write that should fail is harmless if it
    # does not
    try:
        with open(p, "rb") as f: return f.read() or b"\n"
    except OSError: return b"\n"
def wr(p, data):
    try:
        fd = os.open(p, os.O_WRONLY)
    except OSError as x: return ename(x.errno)
    try:
        os.write(fd, data)
        return "OK"
    except OSError as x: return ename(x.errno)
    finally: os.close(fd)
def ls(p):
    try: return "LIST:" + ",".join(sorted(os.listdir(p)))
    except OSError as x: return ename(x.errno)
`

// TestDevicesAndKernelInterfaces tries the host's devices, the kernel's
// writable knobs in /proc and /sys, and the masked /proc paths.
func TestDevicesAndKernelInterfaces(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "dev", nil)
	b.needPython(t)
	// Where the host's kernel lacks a file, inside it cannot exist either.
	hostHas := func(p string) bool { _, err := os.Stat(p); return err == nil }
	absentOr := func(p string, want ...string) []string {
		if !hostHas(p) {
			return []string{"ENOENT"}
		}
		return want
	}
	cases := []struct {
		name, expr string
		want       []string
	}{
		// Devices: the minimal /dev has none of the host's.
		{"open /dev/sda", `tryos(os.open, "/dev/sda", os.O_RDONLY)`, []string{"ENOENT"}},
		{"open /dev/vda", `tryos(os.open, "/dev/vda", os.O_RDONLY)`, []string{"ENOENT"}},
		{"open /dev/nvme0n1", `tryos(os.open, "/dev/nvme0n1", os.O_RDONLY)`, []string{"ENOENT"}},
		{"open /dev/mem", `tryos(os.open, "/dev/mem", os.O_RDONLY)`, []string{"ENOENT"}},
		{"open /dev/kmem", `tryos(os.open, "/dev/kmem", os.O_RDONLY)`, []string{"ENOENT"}},
		{"open /dev/port", `tryos(os.open, "/dev/port", os.O_RDONLY)`, []string{"ENOENT"}},
		{"open /dev/kmsg", `tryos(os.open, "/dev/kmsg", os.O_RDONLY)`, []string{"ENOENT"}},
		{"open /dev/loop-control", `tryos(os.open, "/dev/loop-control", os.O_RDWR)`, []string{"ENOENT"}},
		{"open /dev/fuse", `tryos(os.open, "/dev/fuse", os.O_RDWR)`, []string{"ENOENT"}},
		{"open /dev/net/tun", `tryos(os.open, "/dev/net/tun", os.O_RDWR)`, []string{"ENOENT"}},
		{"/dev holds only the minimal set", `(lambda l: "OK" if l <= {"fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty", "urandom", "zero", "console", "core", "mqueue"} else "EXTRA:" + ",".join(sorted(l)))(set(os.listdir("/dev")))`, []string{"OK"}},
		{"mknod block device 8:0 in /tmp", `tryos(os.mknod, "/tmp/sda", 0o600 | 0o060000, os.makedev(8, 0))`, []string{"EPERM"}},
		{"mknod block device 253:0 in /dev", `tryos(os.mknod, "/dev/vda", 0o600 | 0o060000, os.makedev(253, 0))`, []string{"EPERM"}},
		{"mknod /dev/mem char device 1:1", `tryos(os.mknod, "/tmp/mem", 0o600 | 0o020000, os.makedev(1, 1))`, []string{"EPERM"}},
		// Kernel knobs: /proc/sys is read-only, /sys too.
		{"write /proc/sys/kernel/hostname", `wr("/proc/sys/kernel/hostname", b"pwned")`, absentOr("/proc/sys/kernel/hostname", "EROFS", "EACCES")},
		{"write /proc/sys/vm/drop_caches", `wr("/proc/sys/vm/drop_caches", b"3")`, absentOr("/proc/sys/vm/drop_caches", "EROFS", "EACCES")},
		{"write /proc/sys/kernel/core_pattern", `wr("/proc/sys/kernel/core_pattern", same("/proc/sys/kernel/core_pattern"))`, absentOr("/proc/sys/kernel/core_pattern", "EROFS", "EACCES")},
		{"write /proc/sys/kernel/modprobe", `wr("/proc/sys/kernel/modprobe", same("/proc/sys/kernel/modprobe"))`, absentOr("/proc/sys/kernel/modprobe", "EROFS", "EACCES")},
		{"write /proc/sys/user/max_user_namespaces", `wr("/proc/sys/user/max_user_namespaces", b"100")`, absentOr("/proc/sys/user/max_user_namespaces", "EROFS", "EACCES")},
		{"write /proc/sysrq-trigger", `wr("/proc/sysrq-trigger", b"h")`, absentOr("/proc/sysrq-trigger", "EROFS", "EACCES")},
		{"write /sys/kernel/uevent_helper", `wr("/sys/kernel/uevent_helper", same("/sys/kernel/uevent_helper"))`, absentOr("/sys/kernel/uevent_helper", "EROFS", "EACCES")},
		{"write /sys/power/state", `wr("/sys/power/state", b"")`, absentOr("/sys/power/state", "EROFS", "EACCES")},
		// Masked paths read nothing.
		{"read /proc/kcore", `rd("/proc/kcore")`, absentOr("/proc/kcore", "EMPTY", "EACCES")},
		{"read /proc/keys", `rd("/proc/keys")`, absentOr("/proc/keys", "EMPTY", "EACCES")},
		{"read /proc/timer_list", `rd("/proc/timer_list")`, absentOr("/proc/timer_list", "EMPTY", "EACCES")},
		{"read /proc/sched_debug", `rd("/proc/sched_debug")`, absentOr("/proc/sched_debug", "EMPTY", "EACCES")},
		{"read /proc/latency_stats", `rd("/proc/latency_stats")`, absentOr("/proc/latency_stats", "EMPTY", "EACCES")},
		{"list /proc/acpi", `ls("/proc/acpi")`, absentOr("/proc/acpi", "LIST:", "EACCES")},
		{"list /sys/firmware", `ls("/sys/firmware")`, absentOr("/sys/firmware", "LIST:", "EACCES")},
		{"list /proc/scsi", `ls("/proc/scsi")`, absentOr("/proc/scsi", "LIST:", "EACCES")},
		{"read the kernel log (syslog)", `"OK" if libc.klogctl(3, ctypes.create_string_buffer(64), 64) >= 0 else ename(ctypes.get_errno())`, []string{"EPERM"}},
	}
	var prog strings.Builder
	prog.WriteString(pyIO)
	for i, c := range cases {
		fmt.Fprintf(&prog, "try:\n    out(\"c%d\", %s)\nexcept Exception as x:\n    out(\"c%d\", \"raised\", repr(x))\n", i, c.expr, i)
	}
	got := b.pyKV(t, prog.String())
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if g := got[fmt.Sprintf("c%d", i)]; !oneOf(g, c.want...) {
				t.Errorf("%s: got %q, want %s", c.name, g, strings.Join(c.want, " or "))
			}
		})
	}
	if res := b.sh(t, "ls -A /tmp/sda /tmp/mem /dev/vda 2>/dev/null"); res.Stdout != "" {
		t.Errorf("a device node was created: %q", res.Stdout)
	}
	b.alive(t, "the device and /proc attacks")
}

// TestCgroupReleaseAgent is CVE-2022-0492: mount a cgroup v1 hierarchy,
// set release_agent and notify_on_release, and have the host run a
// program. Every step must be refused.
func TestCgroupReleaseAgent(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "cg", nil)
	b.needPython(t)
	got := b.pyKV(t, pyIO+`
os.makedirs("/tmp/cg", exist_ok=True)
out("rdma", sc("mount", "cgroup", "/tmp/cg", "cgroup", 0, "rdma"))
out("memory", sc("mount", "cgroup", "/tmp/cg", "cgroup", 0, "memory"))
out("none_name", sc("mount", "cgroup", "/tmp/cg", "cgroup", 0, "none,name=x"))
out("cgroup2", sc("mount", "none", "/tmp/cg", "cgroup2", 0, 0))
out("sysfscg", ls("/sys/fs/cgroup"))
out("sysfscg_write", tryos(os.mkdir, "/sys/fs/cgroup/x"))
out("sysfscg_file", wr("/sys/fs/cgroup/release_agent", b"/pwn"))
`)
	for _, c := range []struct{ key, name string }{
		{"rdma", "mount -t cgroup -o rdma cgroup"},
		{"memory", "mount -t cgroup -o memory cgroup"},
		{"none_name", "mount -t cgroup -o none,name=x cgroup"},
		{"cgroup2", "mount -t cgroup2 none"},
	} {
		if got[c.key] != "EPERM" {
			t.Errorf("%s: %q, want EPERM", c.name, got[c.key])
		}
	}
	if g := got["sysfscg"]; g != "LIST:" && g != "ENOENT" {
		t.Errorf("/sys/fs/cgroup: %q, want absent or empty", g)
	}
	if g := got["sysfscg_write"]; !oneOf(g, "EROFS", "ENOENT", "EACCES", "EPERM") {
		t.Errorf("mkdir /sys/fs/cgroup/x: %q, want EROFS", g)
	}
	if g := got["sysfscg_file"]; !oneOf(g, "EROFS", "ENOENT", "EACCES") {
		t.Errorf("write /sys/fs/cgroup/release_agent: %q, want EROFS or ENOENT", g)
	}
	// No release_agent anywhere the sandbox can see, and the tools agree.
	if res := b.sh(t, "find /sys /proc/self /proc/1 -name release_agent 2>/dev/null | head -3"); res.Stdout != "" {
		t.Errorf("a release_agent file is visible inside: %q", res.Stdout)
	}
	if res := b.sh(t, "mount -t cgroup -o rdma cgroup /mnt 2>&1"); res.ExitCode == 0 {
		t.Errorf("mount -t cgroup -o rdma succeeded: %q", res.Stdout)
	}
	if res := b.sh(t, "mount -t cgroup2 none /mnt 2>&1"); res.ExitCode == 0 {
		t.Errorf("mount -t cgroup2 succeeded: %q", res.Stdout)
	}
	// The sandbox's own cgroup view is rooted at its session: no host path.
	cg := b.out(t, "cat /proc/self/cgroup")
	for _, l := range strings.Split(strings.TrimSpace(cg), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 && f[2] != "/" && f[2] != "/workload" {
			t.Errorf("/proc/self/cgroup shows a path outside the session's cgroup namespace: %q", l)
		}
	}
}
