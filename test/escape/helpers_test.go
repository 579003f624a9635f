package escape

import (
	"bufio"
	"context"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

var bg = context.Background()

// box is one session of a daemon under attack.
type box struct {
	h  *daemontest.Harness
	id string
}

// startDaemon runs a daemon for the test (one per test function).
func startDaemon(t testing.TB, mutate func(*config.Config)) *daemontest.Harness {
	t.Helper()
	// Attacks run as fast as the daemon answers; the rate limit has its
	// own tests.
	return daemontest.Start(t, func(c *config.Config) {
		c.Auth.RateLimit = 0
		if mutate != nil {
			mutate(c)
		}
	})
}

// newBox creates session id on h; req may be nil.
func newBox(t testing.TB, h *daemontest.Harness, id string, req *api.CreateSessionRequest) *box {
	t.Helper()
	if req == nil {
		req = &api.CreateSessionRequest{}
	}
	req.ID = id
	if _, err := h.Client.CreateSession(bg, req); err != nil {
		t.Fatalf("create session %s: %v", id, err)
	}
	return &box{h: h, id: id}
}

// exec runs req in the box and fails the test if the call itself fails.
func (b *box) exec(t testing.TB, req *api.ExecRequest) *api.ExecResult {
	t.Helper()
	if req.TimeoutMs == 0 {
		req.TimeoutMs = 60_000
	}
	res, err := b.h.Client.Exec(bg, b.id, req)
	if err != nil {
		t.Fatalf("exec %q in %s: %v", short(req.Command+strings.Join(req.Argv, " ")), b.id, err)
	}
	return res
}

// sh runs a command in the session's persistent shell.
func (b *box) sh(t testing.TB, cmd string) *api.ExecResult {
	t.Helper()
	return b.exec(t, &api.ExecRequest{Command: cmd})
}

// out runs cmd and returns its stdout; it fails the test if cmd exits non-zero.
func (b *box) out(t testing.TB, cmd string) string {
	t.Helper()
	res := b.sh(t, cmd)
	if res.ExitCode != 0 {
		t.Fatalf("%q exited %d: stdout %q stderr %q", short(cmd), res.ExitCode, short(res.Stdout), short(res.Stderr))
	}
	return res.Stdout
}

// alive checks that the session still runs commands.
func (b *box) alive(t testing.TB, after string) {
	t.Helper()
	res, err := b.h.Client.Exec(bg, b.id, &api.ExecRequest{Command: "echo alive", TimeoutMs: 30_000})
	if err != nil || res.Stdout != "alive\n" {
		t.Fatalf("after %s the session no longer answers: %+v, %v", after, res, err)
	}
}

// needPython skips the test unless the image has python3 with ctypes.
func (b *box) needPython(t testing.TB) {
	t.Helper()
	res := b.sh(t, "python3 -c 'import ctypes, fcntl, socket' 2>&1")
	if res.ExitCode != 0 {
		t.Skipf("python3 with ctypes is not in the image (host's /usr): %q", short(res.Stdout))
	}
}

// needTool skips the test unless the image has each named program.
func (b *box) needTool(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if b.sh(t, "command -v "+n+" >/dev/null").ExitCode != 0 {
			t.Skipf("%s is not in the image (host's /usr)", n)
		}
	}
}

// py runs a Python program (after pyPrelude) directly, not through the
// shell, and returns its stdout; stderr is reported on failure.
func (b *box) py(t testing.TB, code string) string {
	t.Helper()
	res := b.exec(t, &api.ExecRequest{Argv: []string{"python3", "-c", pyPrelude + code}})
	if res.ExitCode != 0 {
		t.Fatalf("python exited %d (signal %q): stdout %q stderr %q", res.ExitCode, res.Signal, short(res.Stdout), short(res.Stderr))
	}
	return res.Stdout
}

// pyKV runs code with py and parses its "key value..." lines.
func (b *box) pyKV(t testing.TB, code string) map[string]string {
	t.Helper()
	return parseKV(b.py(t, code))
}

func parseKV(s string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		m[k] = v
	}
	return m
}

// pyPrelude gives Python programs exact syscalls: sc("name", args...) returns
// "OK" or the errno's name, tryos(f, args...) the same for os functions.
const pyPrelude = `
import ctypes, errno, fcntl, os, platform, socket, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {
 "x86_64": dict(io_uring_setup=425, bpf=321, userfaultfd=323, keyctl=250, add_key=248, request_key=249,
   perf_event_open=298, open_by_handle_at=304, name_to_handle_at=303, kexec_load=246, kexec_file_load=320,
   unshare=272, clone=56, clone3=435, personality=135, setns=308, pivot_root=155, mount=165, umount2=166,
   chroot=161, ptrace=101, kill=62, fsopen=430, open_tree=428, move_mount=429, fsmount=432, fsconfig=431,
   ioctl=16, mknodat=259, mount_setattr=442),
 "aarch64": dict(io_uring_setup=425, bpf=280, userfaultfd=282, keyctl=219, add_key=217, request_key=218,
   perf_event_open=241, open_by_handle_at=265, name_to_handle_at=264, kexec_load=104, kexec_file_load=294,
   unshare=97, clone=220, clone3=435, personality=92, setns=268, pivot_root=41, mount=40, umount2=39,
   chroot=51, ptrace=117, kill=129, fsopen=430, open_tree=428, move_mount=429, fsmount=432, fsconfig=431,
   ioctl=29, mknodat=33, mount_setattr=442),
}[platform.machine()]
def _arg(a):
    if isinstance(a, int): return ctypes.c_long(a)
    if isinstance(a, str): return ctypes.c_char_p(a.encode())
    if isinstance(a, bytes): return ctypes.c_char_p(a)
    return a
def call(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(NR[name]), *[_arg(a) for a in args])
    return r, ctypes.get_errno()
def ename(e): return errno.errorcode.get(e, "E%d" % e)
def sc(name, *args):
    r, e = call(name, *args)
    return "OK" if r >= 0 else ename(e)
def tryos(f, *a):
    try:
        f(*a)
        return "OK"
    except OSError as x:
        return ename(x.errno)
def out(key, *vals): print(key, *vals, flush=True)
`

// hostShadow returns the host's /etc/shadow lines, skipping the test if the
// host has none to steal.
func hostShadow(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile("/etc/shadow")
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		t.Skipf("the host has no readable /etc/shadow to steal: %v", err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// shadowJudge tells the host's /etc/shadow from the sandbox's own.
type shadowJudge struct {
	hostFirst string
	hostOnly  []string // host lines the sandbox's shadow does not have
	sandbox   string   // the sandbox's own /etc/shadow
}

func newShadowJudge(t testing.TB, b *box) *shadowJudge {
	t.Helper()
	host := hostShadow(t)
	own := b.out(t, "cat /etc/shadow")
	j := &shadowJudge{hostFirst: host[0], sandbox: own}
	ownLines := map[string]bool{}
	for _, l := range strings.Split(own, "\n") {
		ownLines[strings.TrimSpace(l)] = true
	}
	for _, l := range host {
		if !ownLines[l] {
			j.hostOnly = append(j.hostOnly, l)
		}
	}
	if ownLines[host[0]] || len(j.hostOnly) == 0 {
		t.Skipf("the sandbox's synthesized /etc/shadow equals the host's; cannot tell them apart (%q)", host[0])
	}
	return j
}

// leaks returns the host /etc/shadow line s contains, or "".
func (j *shadowJudge) leaks(s string) string {
	if strings.Contains(s, j.hostFirst) {
		return j.hostFirst
	}
	for _, l := range j.hostOnly {
		if len(l) >= 6 && strings.Contains(s, l) {
			return l
		}
	}
	return ""
}

// readAPI reads a file through the file API.
func readAPI(h *daemontest.Harness, id, path string) (string, error) {
	rc, err := h.Client.ReadFile(bg, id, path)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// codeOf is the API error code of err ("" for nil).
func codeOf(err error) string {
	if err == nil {
		return ""
	}
	return client.Code(err)
}

func short(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return s
}

// statusField returns a field of a /proc/<pid>/status text.
func statusField(status, name string) string {
	for _, l := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && k == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// vmHWM is this test process's peak resident memory in KiB (the daemon
// under test runs in it).
func vmHWM(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSuffix(statusField(string(b), "VmHWM"), " kB")
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		t.Fatalf("VmHWM %q: %v", v, err)
	}
	return n
}

func sortedKeys(m map[string]int) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// eventually retries f until it returns "" or the deadline passes; it
// returns f's last complaint.
func eventually(d time.Duration, f func() string) string {
	deadline := time.Now().Add(d)
	for {
		msg := f()
		if msg == "" || time.Now().After(deadline) {
			return msg
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// oneOf reports whether got is one of want.
func oneOf(got string, want ...string) bool {
	for _, w := range want {
		if got == w {
			return true
		}
	}
	return false
}
