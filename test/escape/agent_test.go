package escape

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentControlChannel: a sandboxed process tries to reach the agent's
// control socket (by its host path, through PID 1's descriptors, by
// scanning for sockets) and the agent's process state.
func TestAgentControlChannel(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "ctl", nil)
	b.needPython(t)
	socks, _ := filepath.Glob(filepath.Join(h.DataDir, "sessions", "*", "agent.sock"))
	if len(socks) == 0 {
		// The layout changed: take any socket under the state directory.
		filepath.WalkDir(h.DataDir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type()&os.ModeSocket != 0 {
				socks = append(socks, p)
			}
			return nil
		})
	}
	if len(socks) == 0 {
		t.Fatalf("no agent socket found on the host under %s", h.DataDir)
	}

	t.Run("host socket path", func(t *testing.T) {
		for _, s := range socks {
			got := b.pyKV(t, fmt.Sprintf(`
out("stat", tryos(os.stat, %q))
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
out("connect", tryos(c.connect, %q))
out("dir", tryos(os.listdir, %q))
`, s, s, filepath.Dir(s)))
			for _, k := range []string{"stat", "connect", "dir"} {
				if got[k] != "ENOENT" {
					t.Errorf("%s of the agent's host socket %s from inside: %q, want ENOENT", k, s, got[k])
				}
			}
		}
	})

	t.Run("PID 1's descriptors", func(t *testing.T) {
		got := b.pyKV(t, `
try:
    fds = os.listdir("/proc/1/fd")
    out("list", "OK", len(fds))
except OSError as x:
    fds = [str(n) for n in range(64)]
    out("list", ename(x.errno))
res = set()
for n in fds:
    res.add("readlink:" + tryos(os.readlink, "/proc/1/fd/" + n))
    res.add("open:" + tryos(os.open, "/proc/1/fd/" + n, os.O_RDONLY))
    res.add("opath:" + tryos(os.open, "/proc/1/fd/" + n, os.O_PATH))
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    res.add("connect:" + tryos(c.connect, "/proc/1/fd/" + n))
    c.close()
out("results", ",".join(sorted(res)))
tids = os.listdir("/proc/1/task")
out("task_fd", tryos(os.readlink, "/proc/1/task/%s/fd/0" % tids[-1]))
`)
		t.Logf("listing /proc/1/fd from inside: %s (fd numbers only)", got["list"])
		for _, r := range strings.Split(got["results"], ",") {
			_, errno, _ := strings.Cut(r, ":")
			if errno != "EACCES" && (errno != "ENOENT" || got["list"] == "OK") {
				t.Errorf("a descriptor of the agent (PID 1) is reachable: %s (all: %s)", r, got["results"])
			}
		}
		if got["task_fd"] != "EACCES" {
			t.Errorf("readlink /proc/1/task/<tid>/fd/0: %q, want EACCES", got["task_fd"])
		}
	})

	t.Run("PID 1's state", func(t *testing.T) {
		got := b.pyKV(t, `
def rd(p):
    try:
        with open(p, "rb") as f: f.read(1)
        return "OK"
    except OSError as x: return ename(x.errno)
for k in ["environ", "maps", "mem", "auxv", "stack", "syscall", "pagemap", "fdinfo/0", "timers", "io"]:
    out(k.replace("/", "_"), rd("/proc/1/" + k))
for k in ["root", "cwd", "exe", "ns/mnt", "ns/user", "ns/net", "ns/pid"]:
    out(k.replace("/", "_"), tryos(os.readlink, "/proc/1/" + k))
out("map_files", tryos(os.listdir, "/proc/1/map_files"))
`)
		for _, k := range []string{"environ", "maps", "mem", "auxv", "stack", "syscall", "pagemap", "fdinfo_0", "timers", "io", "root", "cwd", "exe", "ns_mnt", "ns_user", "ns_net", "ns_pid", "map_files"} {
			if !oneOf(got[k], "EACCES", "EPERM", "ENOENT") {
				t.Errorf("/proc/1/%s of the agent from inside: %q, want EACCES", strings.Replace(k, "_", "/", 1), got[k])
			}
		}
	})

	t.Run("no socket visible inside", func(t *testing.T) {
		unix := b.out(t, "cat /proc/net/unix")
		if strings.Contains(unix, "agent.sock") || strings.Contains(unix, "warren") || strings.Contains(unix, h.DataDir) {
			t.Errorf("/proc/net/unix inside shows warren's socket: %q", unix)
		}
		if lines := strings.Split(strings.TrimSpace(unix), "\n"); len(lines) > 1 {
			t.Errorf("/proc/net/unix inside lists sockets the sandbox did not make: %q", unix)
		}
		if b.sh(t, "command -v ss >/dev/null").ExitCode == 0 {
			if ss := b.out(t, "ss -xa"); strings.Contains(ss, "agent") || strings.Contains(ss, "warren") {
				t.Errorf("ss -xa inside shows warren's socket: %q", ss)
			}
		}
		if res := b.sh(t, "find / -xdev -type s 2>/dev/null; find /run /dev /tmp -type s 2>/dev/null"); strings.TrimSpace(res.Stdout) != "" {
			t.Errorf("socket files inside the sandbox: %q", res.Stdout)
		}
		for _, n := range strings.Fields(b.out(t, "ls -A /run/warren")) {
			if !oneOf(n, "cmd", "in", "out", "err", "host-lib") {
				t.Errorf("/run/warren holds %q; want only the shell's FIFOs and command file (and host-lib for a cgo build)", n)
			}
		}
	})
	b.alive(t, "the control-channel attacks")
}
