package escape

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/api"
)

// hog takes every inotify instance and POSIX message queue it can and
// holds them, reporting how far it got and the errno that stopped it.
const hog = `
fds = []
ino = "none"
for _ in range(400):
    fd = libc.inotify_init1(0)
    if fd < 0:
        ino = errno.errorcode[ctypes.get_errno()]
        break
    fds.append(fd)
libc.mq_open.restype = ctypes.c_int
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
q, mq = 0, "none"
for i in range(400):
    fd = libc.mq_open(b"/warren-hog-%d" % i, os.O_CREAT | os.O_RDWR, 0o600, None)
    if fd < 0:
        mq = errno.errorcode[ctypes.get_errno()]
        break
    q += 1
open("/tmp/held.tmp", "w").write("inotify %d %s\nmq %d %s\n" % (len(fds), ino, q, mq))
os.rename("/tmp/held.tmp", "/tmp/held")
time.sleep(1000)
`

// canInotifyAndMQ reports, from a session, whether one more inotify
// instance and one more message queue can be had.
const canInotifyAndMQ = `
fd = libc.inotify_init1(0)
print("inotify", "ok" if fd >= 0 else errno.errorcode[ctypes.get_errno()])
libc.mq_open.restype = ctypes.c_int
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
q = libc.mq_open(b"/warren-probe", os.O_CREAT | os.O_RDWR, 0o600, None)
print("mq", "ok" if q >= 0 else errno.errorcode[ctypes.get_errno()])
libc.mq_unlink(b"/warren-probe")
`

// hostMQOpen creates and removes a POSIX message queue in the host's IPC
// namespace, as root: the default size (10 messages of 8 KiB) counts
// against root's RLIMIT_MSGQUEUE.
func hostMQOpen() error {
	name, _ := unix.BytePtrFromString("warren-escape-probe")
	fd, _, e := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(name)), uintptr(unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC), 0o600, 0, 0, 0)
	if e != 0 {
		return e
	}
	unix.Close(int(fd))
	unix.Syscall(unix.SYS_MQ_UNLINK, uintptr(unsafe.Pointer(name)), 0, 0)
	return nil
}

// TestSessionCannotExhaustHostRootsCounters (issue 20, hole 1): the
// daemon, host root, created every sandbox's user namespace, so the kernel
// charged the per-user counters of everything inside (inotify instances,
// message queue bytes, queued signals) to host uid 0: one session took all
// 128 of root's inotify instances and its message queue allowance, and
// inotify_init1 and mq_open by root on the host failed with EMFILE. The
// namespace is now owned by the session's own host uid, which bears them.
func TestSessionCannotExhaustHostRootsCounters(t *testing.T) {
	h := startDaemon(t, nil)
	a := newBox(t, h, "hog", nil)
	b := newBox(t, h, "neighbour", nil)
	a.needPython(t)
	a.out(t, "nohup python3 -c '"+strings.ReplaceAll(pyPrelude+hog, "'", `'"'"'`)+"' >/tmp/hog.log 2>&1 &")
	var held string
	if eventually(20*time.Second, func() string {
		held = a.sh(t, "cat /tmp/held 2>/dev/null").Stdout
		if held == "" {
			return "not yet"
		}
		return ""
	}) != "" {
		t.Fatalf("the hog did not report: %q", a.sh(t, "cat /tmp/hog.log").Stdout)
	}
	got := parseKV(held)
	// It gets what one user gets, then EMFILE: its own limit, not the host's.
	if !strings.HasSuffix(got["inotify"], " EMFILE") || !strings.HasSuffix(got["mq"], " EMFILE") {
		t.Errorf("the hog inside the session: %q; want it stopped by EMFILE on both", held)
	}
	t.Logf("the session got %q", held)
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Errorf("inotify_init1 by root on the host while a session holds all it can: %v; want it to work", err)
	} else {
		unix.Close(fd)
	}
	if err := hostMQOpen(); err != nil {
		t.Errorf("mq_open by root on the host while a session holds all it can: %v; want it to work", err)
	}
	if got := parseKV(b.py(t, canInotifyAndMQ)); got["inotify"] != "ok" || got["mq"] != "ok" {
		t.Errorf("another session while the hog holds its all: %v; want inotify and mq ok", got)
	}
	a.alive(t, "the hog")
}

// TestSessionLimitsIndependentOfTheDaemons (issue 20, hole 1): a session's
// message queues and queued signals were bounded, as a whole, by whatever
// limits the daemon started with (the kernel takes a user namespace's
// per-namespace maxima from its creator), and its users' inotify counts by
// nothing inside the namespace. A daemon started with `ulimit -q unlimited`
// now still gives each session the kernel's default, each user inside the
// host's per-user inotify limits, and the session as a whole no more than
// one host user: once its root holds all the instances it can, another user
// of the same session gets none, while host root still does.
func TestSessionLimitsIndependentOfTheDaemons(t *testing.T) {
	var saved unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MSGQUEUE, &saved); err != nil {
		t.Fatal(err)
	}
	inf := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	if err := unix.Setrlimit(unix.RLIMIT_MSGQUEUE, &inf); err != nil {
		// Raising a hard limit takes CAP_SYS_RESOURCE, which some CI
		// containers drop: the daemon then starts with the limit it has.
		t.Logf("the daemon keeps RLIMIT_MSGQUEUE %d: raising it: %v", saved.Max, err)
	} else {
		t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_MSGQUEUE, &saved) })
	}
	h := startDaemon(t, nil)
	b := newBox(t, h, "limits", nil)
	b.needPython(t)

	hostInotify, _ := os.ReadFile("/proc/sys/fs/inotify/max_user_instances")
	got := b.out(t, "ulimit -q; ulimit -i; cat /proc/sys/user/max_inotify_instances")
	if want := "819200\n8192\n" + string(hostInotify); got != want {
		t.Errorf("ulimit -q, ulimit -i and max_inotify_instances inside: %q, want %q", got, want)
	}

	// Root takes every inotify instance and queue the session may have...
	b.out(t, "nohup python3 -c '"+strings.ReplaceAll(pyPrelude+hog, "'", `'"'"'`)+"' >/tmp/hog.log 2>&1 &")
	var held string
	if eventually(20*time.Second, func() string {
		if held = b.sh(t, "cat /tmp/held 2>/dev/null").Stdout; held == "" {
			return "not yet"
		}
		return ""
	}) != "" {
		t.Fatalf("the hog did not report: %q", b.sh(t, "cat /tmp/hog.log").Stdout)
	}
	kv := parseKV(held)
	if n, _ := strconv.Atoi(strings.Fields(kv["mq"])[0]); n > 10 || !strings.HasSuffix(kv["mq"], " EMFILE") {
		t.Errorf("message queues a session got from a daemon with an unlimited RLIMIT_MSGQUEUE: %q, want at most 10 (819200 bytes), then EMFILE", kv["mq"])
	}
	// ...and another user of the same session gets none of either.
	res := b.exec(t, &api.ExecRequest{Argv: []string{"python3", "-c", pyPrelude + `
os.setgroups([]); os.setgid(1000); os.setuid(1000)
` + canInotifyAndMQ}})
	if other := parseKV(res.Stdout); other["inotify"] != "EMFILE" || other["mq"] != "EMFILE" {
		t.Errorf("uid 1000 of the session while its root holds the session's all: %q %q, want EMFILE for both", res.Stdout, res.Stderr)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Errorf("inotify_init1 by root on the host: %v", err)
	} else {
		unix.Close(fd)
	}
	if err := hostMQOpen(); err != nil {
		t.Errorf("mq_open by root on the host: %v", err)
	}
}
