package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/cgroup"
	"github.com/warrenhq/warren/internal/errdefs"
)

func TestIsolation(t *testing.T) {
	e := newEnv(t)
	sb := e.start()
	// Only the sandbox's own processes: PID 1 is the agent.
	res := sh(t, sb, "ls /proc | grep -c '^[0-9]*$'; cat /proc/1/comm; hostname")
	lines := strings.Fields(string(res.Stdout))
	if len(lines) != 3 {
		t.Fatalf("process view: %q", res.Stdout)
	}
	if n, _ := strconv.Atoi(lines[0]); n > 6 {
		t.Errorf("the sandbox sees %d processes; want only its own few", n)
	}
	if lines[2] != "box" {
		t.Errorf("hostname = %q, want box", lines[2])
	}
	if res := sh(t, sb, "kill -0 "+strconv.Itoa(os.Getpid())+" 2>&1; echo $?"); !strings.HasSuffix(string(res.Stdout), "1\n") {
		t.Errorf("the test process's pid is reachable from inside: %q", res.Stdout)
	}
	// Only lo.
	mustOut(t, sb, "ls /sys/class/net", "lo\n")
	mustOut(t, sb, "cat /sys/class/net/lo/operstate >/dev/null && grep -c . /proc/net/dev", "3\n")

	// Host files above the image are invisible.
	wd, _ := os.Getwd()
	for _, p := range []string{"/root/.bashrc", "/home", wd, e.rt.Dir(), "/etc/ssh", "/var/lib/warren"} {
		res := sh(t, sb, "test -e "+p+" && ls -A "+p+" | head -3")
		if p == "/home" {
			res = sh(t, sb, "ls -A /home")
			if string(res.Stdout) != "sandbox\n" {
				t.Errorf("/home shows %q, want only sandbox", res.Stdout)
			}
			continue
		}
		if len(res.Stdout) > 0 {
			t.Errorf("%s is visible inside: %q", p, res.Stdout)
		}
	}
	if host, err := os.ReadFile("/etc/shadow"); err == nil {
		res := sh(t, sb, "cat /etc/shadow 2>/dev/null")
		if len(host) > 0 && strings.Contains(string(res.Stdout), strings.SplitN(string(host), "\n", 2)[0]) {
			t.Errorf("the host's /etc/shadow leaks: %q", res.Stdout)
		}
	}

	// No host path shows in the mount table (overlay options name staged,
	// relative paths).
	mi := string(sh(t, sb, "cat /proc/self/mountinfo").Stdout)
	for _, hostPath := range []string{e.rt.Dir(), e.base.RootFS, filepath.Dir(e.rt.Dir())} {
		if strings.Contains(mi, hostPath) {
			t.Errorf("/proc/self/mountinfo names the host path %s:\n%s", hostPath, mi)
		}
	}
	if !strings.Contains(mi, "lowerdir=0") {
		t.Errorf("the root overlay's options are not staged:\n%s", mi)
	}
	// Writes land in the session's layer, never in the image or the host.
	before := treeSnapshot(t, e.base.RootFS)
	mustOut(t, sb, "echo x > /etc/newfile; rm -f /etc/hostname; echo y > /usr/warren-test-file; mkdir -p /opt/a/b; echo ok", "ok\n")
	if _, err := os.Stat("/usr/warren-test-file"); err == nil {
		os.Remove("/usr/warren-test-file")
		t.Errorf("a write to /usr inside reached the host's /usr")
	}
	if after := treeSnapshot(t, e.base.RootFS); after != before {
		t.Errorf("the image changed: %d entries before, %d after", strings.Count(before, "\n"), strings.Count(after, "\n"))
	}
	if _, err := os.Stat(filepath.Join(e.rt.Dir(), sb.Name(), "upper", "etc", "newfile")); err != nil {
		t.Errorf("the write did not land in the session's upper layer: %v", err)
	}
	// A second sandbox sees none of it.
	other := e.start()
	mustOut(t, other, "test -e /etc/newfile || test -e /usr/warren-test-file || echo clean", "clean\n")
	if res := sh(t, other, "ls /proc | grep -c '^[0-9]*$'"); strings.TrimSpace(string(res.Stdout)) == "" {
		t.Errorf("second sandbox: %q", res.Stdout)
	}
}

func treeSnapshot(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			b.WriteString(p + " " + fi.Mode().String() + " " + strconv.FormatInt(fi.Size(), 10) + " " + fi.ModTime().String() + "\n")
		}
		return nil
	})
	return b.String()
}

func TestPrivilegesAndDescriptors(t *testing.T) {
	sb := newEnv(t).start()
	res := sh(t, sb, "grep -E '^(CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status; grep -E '^(CapEff|NoNewPrivs)' /proc/1/status 2>&1")
	out := string(res.Stdout)
	for _, want := range []string{"NoNewPrivs:\t1", "CapAmb:\t0000000000000000"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	// cap_sys_admin (bit 21) must be gone from every set.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "Cap") {
			f := strings.Fields(line)
			v, _ := strconv.ParseUint(f[1], 16, 64)
			if v&(1<<21) != 0 || v&(1<<27) != 0 {
				t.Errorf("%s still holds CAP_SYS_ADMIN or CAP_MKNOD", line)
			}
		}
	}
	// The agent is not dumpable: nothing inside can read its descriptors.
	res = sh(t, sb, "ls /proc/1/fd 2>&1; cat /proc/1/environ 2>&1")
	if !strings.Contains(string(res.Stdout), "Permission denied") {
		t.Errorf("/proc/1 of the agent is readable: %q", res.Stdout)
	}
	// The shell and its programs hold only stdio (and the shell's own
	// script/saved descriptors, which are close-on-exec).
	mustOut(t, sb, "ls /proc/self/fd | sort -n | tr '\\n' ' '", "0 1 2 3 ")
	res = sh(t, sb, "for f in /proc/$$/fd/*; do readlink $f; done")
	for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		if !strings.HasPrefix(l, "/run/warren/") && !strings.HasPrefix(l, "pipe:") && l != "/dev/null" {
			t.Errorf("the shell holds a descriptor to %q", l)
		}
	}
	res = sh(t, sb, "mount -t tmpfs none /mnt 2>&1; unshare -n true 2>&1; echo $?")
	if !strings.Contains(string(res.Stdout), "ermission denied") && !strings.Contains(string(res.Stdout), "not permitted") {
		t.Errorf("mount/unshare inside did not fail with EPERM: %q", res.Stdout)
	}
}

func TestMemoryLimit(t *testing.T) {
	sb := newEnv(t).start(withLimits(cgroup.Limits{MemoryBytes: 64 << 20, Pids: 64, CPUs: 1}))
	res := sh(t, sb, "tail /dev/zero", timeout(20*time.Second))
	if !res.OOMKilled || res.TimedOut {
		t.Errorf("memory hog: exit %d oom_killed %v stderr %q, want oom_killed", res.ExitCode, res.OOMKilled, res.Stderr)
	}
	mustOut(t, sb, "echo still-alive", "still-alive\n")
	st, err := sb.Stats()
	if err != nil || st.OOMKills == 0 {
		t.Errorf("Stats() = %+v, %v; want OOM kills counted", st, err)
	}
}

func TestForkBombContained(t *testing.T) {
	sb := newEnv(t).start(withLimits(cgroup.Limits{MemoryBytes: 256 << 20, Pids: 64, CPUs: 1}))
	// A bomb in the foreground fills the pids limit until its timeout, which
	// kills every process it started.
	res := sh(t, sb, "bomb() { bomb | bomb; }; bomb", timeout(2*time.Second))
	if !res.TimedOut {
		t.Errorf("foreground bomb: timed_out false, exit %d", res.ExitCode)
	}
	mustOut(t, sb, "echo alive", "alive\n")
	if st, _ := sb.Stats(); st.Pids > 3 {
		t.Errorf("after the bomb's timeout %d processes remain", st.Pids)
	}
	// The classic bomb forks into the background and keeps the pids limit
	// full. The agent, outside the workload's limits, still answers, and
	// the shell runs builtins.
	sh(t, sb, ":(){ :|:& };:")
	time.Sleep(500 * time.Millisecond)
	if st, _ := sb.Stats(); st.Pids > 64 {
		t.Errorf("pids = %d, above the limit of 64", st.Pids)
	}
	res = sh(t, sb, "echo still-here", timeout(5*time.Second))
	if string(res.Stdout) != "still-here\n" {
		t.Errorf("builtin under a running bomb: %+v", res)
	}
	// Deleting the session (at cleanup) must still leave nothing behind.
}

func withUser(u string) opt { return func(c *Config) { c.User = u } }

func TestUser(t *testing.T) {
	e := newEnv(t)
	sb := e.start(withUser("sandbox"))
	mustOut(t, sb, "id -u; id -g; echo $HOME $USER; touch /workspace/mine && stat -c %u /workspace/mine; touch /etc/x 2>&1 | grep -c 'Permission denied'", "1000\n1000\n/home/sandbox sandbox\n1000\n1\n")
	if _, err := sb.WriteFile(context.Background(), "api.txt", 0, 1<<20, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	mustOut(t, sb, "stat -c %u:%g /workspace/api.txt", "1000:1000\n")
	res := argv(t, sb, "id", "-u")
	if string(res.Stdout) != "1000\n" {
		t.Errorf("argv runs as %q, want 1000", res.Stdout)
	}
	// Privileges are gone for the user even though the sandbox's root has
	// some: no capabilities at all.
	mustOut(t, sb, "grep CapEff /proc/self/status | tr -d '\\t'", "CapEff:0000000000000000\n")

	_, err := e.rt.Start(context.Background(), &Config{Name: "baduser", Hostname: "x", Lower: []string{e.base.RootFS}, BaseDir: "/workspace",
		Limits: cgroup.Limits{MemoryBytes: 64 << 20, Pids: 32, CPUs: 1}, User: "nobody-like-this"})
	if !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Start with an unknown user = %v, want invalid_argument", err)
	}
}

func TestUserNamespace(t *testing.T) {
	e := newEnv(t)
	a, b := e.start(), e.start()
	ua := string(sh(t, a, "awk '{print $2}' /proc/self/uid_map").Stdout)
	ub := string(sh(t, b, "awk '{print $2}' /proc/self/uid_map").Stdout)
	if ua == ub || !strings.HasPrefix(ua, "1") || len(strings.TrimSpace(ua)) < 10 {
		t.Errorf("host ids of two sandboxes' roots: %q and %q; want two different high ids", ua, ub)
	}
	// Image files are root's inside, the host's /usr is nobody's (see
	// TestHostDirsAsUnprivileged); what the sandbox writes is its own
	// root's on the host, never the host's root.
	mustOut(t, a, "stat -c %u /etc/passwd; stat -L -c %u /usr/bin/bash; echo x > /etc/mine", "0\n65534\n")
	fi, err := os.Stat(filepath.Join(e.rt.Dir(), a.Name(), "upper", "etc", "mine"))
	if err != nil {
		t.Fatal(err)
	}
	host := fi.Sys().(*syscall.Stat_t).Uid
	if want := strings.TrimSpace(ua); strconv.FormatUint(uint64(host), 10) != want {
		t.Errorf("a file written inside is uid %d on the host, want %s", host, want)
	}
	// The sandbox's root owns its user namespace: the kernel charges the
	// per-user counters of everything inside to it, not to host root.
	if got, want := nsOwner(t, a.Pid()), a.ids.HostID; got != want {
		t.Errorf("the sandbox's user namespace is owned by host uid %d, want its root's %d", got, want)
	}
	// No further user namespace inside.
	res := sh(t, a, "unshare -U true 2>&1; cat /proc/sys/user/max_user_namespaces")
	if !strings.Contains(string(res.Stdout), "0") || !strings.Contains(string(res.Stdout), "unshare") {
		t.Errorf("nested user namespace: %q", res.Stdout)
	}
}

// nsOwner returns the host uid that owns pid's user namespace.
func nsOwner(t *testing.T, pid int) uint32 {
	t.Helper()
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	const nsGetOwnerUID = 0xb704 // NS_GET_OWNER_UID, _IO(0xb7, 0x4): writes a uid_t
	var uid uint32
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, ns.Fd(), nsGetOwnerUID, uintptr(unsafe.Pointer(&uid))); e != 0 {
		t.Fatalf("NS_GET_OWNER_UID: %v", e)
	}
	return uid
}
