package escape

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/warrenhq/warren/api"
)

// fileID is what must not change about a host file.
type fileID struct {
	sum          string
	size         int64
	mtime, ctime syscall.Timespec
}

func hostFileID(t testing.TB, p string) fileID {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Skipf("host %s: %v", p, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return fileID{sum: hex.EncodeToString(h.Sum(nil)), size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
}

// TestCVE2019_5736 overwrites the runtime's binary through /proc/<pid>/exe:
// the agent's is out of reach, and writing a program's own executable
// (directly, or by reopening an O_PATH descriptor after it exited) only
// ever changes the session's copy-on-write layer, never the host's /usr.
func TestCVE2019_5736(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "runc", nil)
	b.needPython(t)
	bashPath, _ := filepath.EvalSymlinks("/usr/bin/bash")
	sleepPath, _ := filepath.EvalSymlinks("/usr/bin/sleep")
	bash0, sleep0 := hostFileID(t, bashPath), hostFileID(t, sleepPath)

	t.Run("agent's /proc/1/exe", func(t *testing.T) {
		got := b.pyKV(t, `
out("wronly", tryos(os.open, "/proc/1/exe", os.O_WRONLY))
out("rdwr", tryos(os.open, "/proc/1/exe", os.O_RDWR))
out("rdonly", tryos(os.open, "/proc/1/exe", os.O_RDONLY))
out("opath", tryos(os.open, "/proc/1/exe", os.O_PATH))
out("readlink", tryos(os.readlink, "/proc/1/exe"))
`)
		for _, k := range []string{"wronly", "rdwr", "rdonly", "opath", "readlink"} {
			if got[k] != "EACCES" && got[k] != "EPERM" {
				t.Errorf("open /proc/1/exe (%s): %q, want EACCES", k, got[k])
			}
		}
	})

	t.Run("shell overwrites its own exe", func(t *testing.T) {
		// <> opens without truncating: harmless if it were to succeed.
		res := b.sh(t, "exec 3<>/proc/$$/exe; echo $?")
		if !strings.Contains(res.Stderr, "Text file busy") && !strings.Contains(res.Stderr, "Permission denied") {
			t.Errorf("opening the shell's /proc/$$/exe read-write: %q %q, want ETXTBSY", res.Stdout, res.Stderr)
		}
		b.sh(t, "exec 3>&-")
		got := b.pyKV(t, `out("self", tryos(os.open, "/proc/self/exe", os.O_WRONLY))`)
		// EACCES where python is the host's (base): a host file is
		// nobody's inside and not writable at all (TestHostUsrAsUnprivileged).
		if got["self"] != "ETXTBSY" && got["self"] != "EACCES" {
			t.Errorf("python opening its own /proc/self/exe for writing: %q, want ETXTBSY or EACCES", got["self"])
		}
	})

	t.Run("O_PATH reopen after exit", func(t *testing.T) {
		// The real exploit: hold the exe by O_PATH, wait for the program to
		// exit, reopen it for writing through /proc/self/fd. It writes the
		// bytes the file already has, so it is harmless wherever it lands;
		// where it lands is the point.
		got := b.pyKV(t, `
import subprocess
p = subprocess.Popen(["/usr/bin/sleep", "0.3"])
fd = os.open("/proc/%d/exe" % p.pid, os.O_PATH)
p.wait()
before = os.stat("/usr/bin/sleep")
try:
    w = os.open("/proc/self/fd/%d" % fd, os.O_WRONLY)
    os.pwrite(w, b"\x7fELF", 0)
    os.close(w)
    out("reopen", "OK")
except OSError as x:
    out("reopen", ename(x.errno))
after = os.stat("/usr/bin/sleep")
out("inside_changed", before.st_mtime_ns != after.st_mtime_ns or before.st_ctime_ns != after.st_ctime_ns)
`)
		if !oneOf(got["reopen"], "OK", "EACCES", "EPERM", "ETXTBSY") {
			t.Errorf("reopening /usr/bin/sleep for writing through /proc/self/fd: %q", got["reopen"])
		}
		if got["reopen"] == "OK" {
			// It wrote: the copy must be the session's, in its layer.
			if got["inside_changed"] != "True" {
				t.Errorf("the write through the reopened descriptor succeeded but /usr/bin/sleep inside did not change: where did it go?")
			}
			uppers, _ := filepath.Glob(filepath.Join(h.DataDir, "layers", "*", "*", "upper", "bin", "sleep"))
			t.Logf("the write landed in the session's writable layer: %v", uppers)
		}
	})

	t.Run("host libraries bound for a cgo build", func(t *testing.T) {
		// A dynamically linked warren binds the host's ELF interpreter and
		// libc into /run/warren/host-lib: the host's files themselves.
		names := strings.Fields(b.sh(t, "ls /run/warren/host-lib 2>/dev/null").Stdout)
		if len(names) == 0 {
			t.Skip("no /run/warren/host-lib: the warren binary under test is static")
		}
		got := b.pyKV(t, `
d = "/run/warren/host-lib"
for n in sorted(os.listdir(d)):
    p = os.path.join(d, n)
    st = os.stat(p)
    # Every change is a no-op on the file's content and metadata, so a
    # failure of the protection would show without damaging the host.
    res = []
    res.append("wronly=" + tryos(os.open, p, os.O_WRONLY))
    res.append("rdwr=" + tryos(os.open, p, os.O_RDWR))
    res.append("chmod=" + tryos(os.chmod, p, st.st_mode & 0o7777))
    res.append("chown=" + tryos(os.chown, p, st.st_uid, st.st_gid))
    res.append("utime=" + tryos(lambda: os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))))
    x = tryos(os.setxattr, p, "user.warren-escape", b"1")
    if x == "OK": os.removexattr(p, "user.warren-escape")
    res.append("xattr=" + x)
    fd = os.open(p, os.O_PATH)
    res.append("reopen=" + tryos(os.open, "/proc/self/fd/%d" % fd, os.O_WRONLY))
    out(n, " ".join(res))
`)
		t.Logf("attempts on /run/warren/host-lib: %v", got)
		ids := map[string]fileID{}
		for _, dir := range []string{"/lib64", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/lib"} {
			for _, n := range names {
				if p, err := filepath.EvalSymlinks(filepath.Join(dir, n)); err == nil {
					ids[p] = hostFileID(t, p)
				}
			}
		}
		for _, n := range names {
			for _, r := range strings.Fields(got[n]) {
				op, errno, _ := strings.Cut(r, "=")
				if errno == "OK" {
					t.Errorf("%s on the host's %s bound into the sandbox succeeded", op, n)
				} else if !oneOf(errno, "EROFS", "EACCES", "EPERM") {
					t.Errorf("%s on the host's %s bound into the sandbox: %s, want EROFS", op, n, errno)
				}
			}
		}
		t.Cleanup(func() {
			for p, id := range ids {
				if now := hostFileID(t, p); now != id {
					t.Errorf("the host's %s changed: %+v -> %+v", p, id, now)
				}
			}
		})
	})

	// Whatever happened inside, the host's binaries are untouched.
	if bash1 := hostFileID(t, bashPath); bash1 != bash0 {
		t.Errorf("the host's %s changed: %+v -> %+v", bashPath, bash0, bash1)
	}
	if sleep1 := hostFileID(t, sleepPath); sleep1 != sleep0 {
		t.Errorf("the host's %s changed: %+v -> %+v", sleepPath, sleep0, sleep1)
	}
	// Another session still sees the image's original.
	other := newBox(t, h, "other", nil)
	if res := other.sh(t, "sleep 0.01 && echo ok"); res.Stdout != "ok\n" {
		t.Errorf("sleep in a second session: %+v", res)
	}
}

// fdTarget is what a sandboxed process may hold a descriptor to.
var fdTarget = regexp.MustCompile(`^(pipe:\[\d+\]|/dev/null|/run/warren/[a-z]+( \(deleted\))?|/proc/\d+/fd|socket:\[\d+\]|anon_inode:\[?[a-z_]+\]?)$`)

// TestCVE2024_21626 looks for descriptors leaked into the sandbox that
// point outside it (runc's leaked cgroup directory descriptor): in the
// shell, in programs it runs, in argv programs and in background processes.
func TestCVE2024_21626(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "leaky", nil)
	check := func(t *testing.T, who, listing string) {
		t.Helper()
		n := 0
		for _, l := range strings.Split(listing, "\n") {
			i := strings.Index(l, " -> ")
			if i < 0 {
				continue
			}
			n++
			target := l[i+4:]
			if !fdTarget.MatchString(target) {
				t.Errorf("%s holds a descriptor to %q (%s)", who, target, l)
			}
			if strings.Contains(target, h.DataDir) || strings.HasPrefix(target, "/sys/fs/cgroup") {
				t.Errorf("%s holds a descriptor to a HOST path %q", who, target)
			}
		}
		if n < 3 {
			t.Errorf("%s: only %d descriptors listed, the listing did not work: %q", who, n, listing)
		}
	}
	t.Run("ls -l /proc/self/fd", func(t *testing.T) {
		check(t, "ls run by the shell", b.out(t, "ls -l /proc/self/fd"))
	})
	t.Run("ls -l /proc/$$/fd", func(t *testing.T) {
		check(t, "the shell", b.out(t, "ls -l /proc/$$/fd"))
	})
	t.Run("argv program", func(t *testing.T) {
		res := b.exec(t, &api.ExecRequest{Argv: []string{"ls", "-l", "/proc/self/fd"}})
		check(t, "an argv program", res.Stdout)
	})
	t.Run("background process", func(t *testing.T) {
		b.out(t, "sleep 300 >/dev/null 2>&1 & echo $! > /tmp/bg.pid")
		check(t, "a background process", b.out(t, "ls -l /proc/$(cat /tmp/bg.pid)/fd"))
		b.sh(t, "kill $(cat /tmp/bg.pid)")
	})
	t.Run("every process", func(t *testing.T) {
		b.out(t, "sleep 300 & (sleep 301 &) ; true")
		all := b.out(t, `for p in /proc/[0-9]*; do [ "$p" = /proc/1 ] && continue; ls -l $p/fd 2>/dev/null; done`)
		check(t, "some process", all)
	})
	t.Run("directory descriptors lead outside", func(t *testing.T) {
		// The exploit itself: follow every descriptor up with .. and see
		// whether it reaches a root other than the sandbox's.
		res := b.sh(t, `for f in /proc/self/fd/* /proc/$$/fd/*; do
  if [ -d "$f/" ]; then (cd "$f/../../../../../.." 2>/dev/null && echo "$f reached $(ls | tr '\n' ' ')"); fi
done; true`)
		for _, l := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
			if l == "" || strings.Contains(l, "/proc/self/fd/3 reached") {
				continue // the loop's own glob directory, if any
			}
			if !slices.Contains(strings.Fields(l), "workspace") {
				t.Errorf("a descriptor leads to a foreign root: %s", l)
			}
		}
	})
	t.Run("cwd", func(t *testing.T) {
		if got := b.out(t, "cd /workspace && readlink /proc/self/cwd /proc/$$/cwd"); got != "/workspace\n/workspace\n" {
			t.Errorf("cwd: %q", got)
		}
		res := b.exec(t, &api.ExecRequest{Argv: []string{"readlink", "/proc/self/cwd", "/proc/self/root"}})
		if res.Stdout != "/workspace\n/\n" {
			t.Errorf("argv program cwd and root: %q", res.Stdout)
		}
	})
}

// TestTIOCSTI pushes characters into a terminal's input queue, the classic
// way to type commands into a shell outside: EPERM everywhere.
func TestTIOCSTI(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "tty", nil)
	b.needPython(t)
	got := b.pyKV(t, `
def ioc(fd, req, arg):
    try:
        fcntl.ioctl(fd, req, arg)
        return "OK"
    except OSError as x:
        return ename(x.errno)
m, s = os.openpty()
out("ptmx_path", os.ttyname(s))
out("slave", ioc(s, 0x5412, b"x"))
out("master", ioc(m, 0x5412, b"x"))
out("stdin", ioc(0, 0x5412, b"x"))
out("slave_high_bits", sc("ioctl", s, 0x100005412, ctypes.c_char_p(b"x")))
out("tioclinux", ioc(s, 0x541C, bytes([2]) + bytes(16)))
out("tioclinux_high_bits", sc("ioctl", s, 0x10000541C, ctypes.c_char_p(bytes([2]) + bytes(16))))
out("winsz", ioc(s, 0x5413, bytes(8)))
os.set_blocking(m, False)
try:
    out("injected", repr(os.read(m, 100)))
except BlockingIOError:
    out("injected", "none")
out("devtty", tryos(os.open, "/dev/tty", os.O_RDWR))
`)
	if !strings.HasPrefix(got["ptmx_path"], "/dev/pts/") {
		t.Fatalf("openpty through /dev/ptmx: %q", got["ptmx_path"])
	}
	for _, c := range []struct{ key, name, want string }{
		{"slave", "TIOCSTI on a pty from /dev/ptmx", "EPERM"},
		{"master", "TIOCSTI on the pty's master", "EPERM"},
		{"stdin", "TIOCSTI on stdin", "EPERM"},
		{"slave_high_bits", "TIOCSTI with garbage in the upper 32 bits of the request", "EPERM"},
		{"tioclinux", "TIOCLINUX", "EPERM"},
		{"tioclinux_high_bits", "TIOCLINUX with garbage in the upper 32 bits", "EPERM"},
		{"winsz", "TIOCGWINSZ (allowed: the filter is not a blanket ioctl ban)", "OK"},
		{"devtty", "open /dev/tty (no controlling terminal)", "ENXIO"},
	} {
		if got[c.key] != c.want {
			t.Errorf("%s: %q, want %s", c.name, got[c.key], c.want)
		}
	}
	if got["injected"] != "none" {
		t.Errorf("TIOCSTI injected input into the pty: %s", got["injected"])
	}
	// The shell's own stdin, from the shell.
	res := b.sh(t, `python3 -c 'import fcntl,sys
try:
    fcntl.ioctl(0, 0x5412, b"x"); print("OK")
except OSError as x: print(x.errno)' < /dev/tty 2>&1; python3 -c 'import fcntl
try:
    fcntl.ioctl(0, 0x5412, b"x"); print("OK")
except OSError as x: print(x.errno)'`)
	if !strings.HasSuffix(res.Stdout, fmt.Sprintf("%d\n", syscall.EPERM)) {
		t.Errorf("TIOCSTI on the shell's stdin: %q, want errno %d", res.Stdout, syscall.EPERM)
	}
}
