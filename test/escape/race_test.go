package escape

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/config"
)

// swapper is a background program that swaps, as fast as it can and
// atomically (renameat2 RENAME_EXCHANGE), /workspace/race between a
// symlink to a harmless file and a symlink to /etc/shadow, and
// /workspace/racedir between a real directory and a symlink to /etc.
const swapper = `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
os.chdir("/workspace")
with open("harmless", "w") as f: f.write("harmless\n")
os.makedirs("realdir", exist_ok=True)
with open("realdir/inner", "w") as f: f.write("inner\n")
for name, target in [("race", "harmless"), ("race.alt", "/etc/shadow"), ("racedir", "/etc")]:
    if not os.path.lexists(name): os.symlink(target, name)
with open("swapper.ready", "w") as f: f.write("go\n")
n = 0
while True:
    if libc.renameat2(-100, b"race", -100, b"race.alt", 2) != 0: raise OSError(ctypes.get_errno(), "renameat2")
    if libc.renameat2(-100, b"racedir", -100, b"realdir", 2) != 0: raise OSError(ctypes.get_errno(), "renameat2")
    n += 1
    if n % 4096 == 0:
        with open("/tmp/swaps", "w") as f: f.write(str(n))
`

// TestSymlinkSwapRace: while the sandbox swaps a symlink between a harmless
// file and /etc/shadow (and a directory with a symlink to /etc), the file
// API reads and lists through it thousands of times. Runtimes that check a
// path on the host and then open it hand out the host's file in the window;
// not one byte of the host's /etc/shadow may come back.
func TestSymlinkSwapRace(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "race", nil)
	b.needPython(t)
	j := newShadowJudge(t, b)
	hostOnly := hostOnlyNames(t, b, "/etc")
	b.exec(t, &api.ExecRequest{Command: "nohup python3 -c '" + swapper + "' >/tmp/swapper.log 2>&1 & echo $! >/tmp/swapper.pid"})
	if msg := eventually(10*time.Second, func() string {
		if b.sh(t, "test -e /workspace/swapper.ready").ExitCode != 0 {
			return "not ready: " + b.sh(t, "cat /tmp/swapper.log").Stdout
		}
		return ""
	}); msg != "" {
		t.Fatalf("the swapper did not start: %s", msg)
	}

	const reads, lists, archives, workers = 10_000, 3_000, 200, 8
	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
		leaks    []string
		next     atomic.Int64
	)
	record := func(kind, what string, leak string) {
		mu.Lock()
		defer mu.Unlock()
		outcomes[kind+": "+what]++
		if leak != "" && len(leaks) < 10 {
			leaks = append(leaks, kind+": "+leak)
		}
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > reads+lists+archives {
					return
				}
				if i > reads+lists {
					p := "/workspace"
					if i%2 == 0 {
						p = "/workspace/racedir"
					}
					rc, err := h.Client.DownloadArchive(bg, b.id, p)
					if err != nil {
						what := codeOf(err)
						if what == "" {
							what = err.Error()
						}
						record("archive", "error "+what, "")
						continue
					}
					tarball, err := io.ReadAll(rc)
					rc.Close()
					switch {
					case j.leaks(string(tarball)) != "":
						record("archive", "HOST SHADOW", fmt.Sprintf("DownloadArchive(%s) has %q", p, j.leaks(string(tarball))))
					case err != nil:
						record("archive", "error "+err.Error(), "")
					default:
						record("archive", "ok", "")
					}
					continue
				}
				if i <= reads {
					p := "race"
					switch i % 4 {
					case 1:
						p = "/workspace/race"
					case 2:
						p = "racedir/shadow"
					case 3:
						p = "/workspace/racedir/../workspace/race"
					}
					got, err := readAPI(h, b.id, p)
					switch {
					case err != nil:
						record("read", "error "+codeOf(err), "")
					case j.leaks(got) != "":
						record("read", "HOST SHADOW", fmt.Sprintf("ReadFile(%s) = %q", p, short(got)))
					case got == "harmless\n":
						record("read", "harmless", "")
					case got == j.sandbox:
						record("read", "the sandbox's shadow", "")
					default:
						record("read", "unexpected content", fmt.Sprintf("ReadFile(%s) = %q", p, short(got)))
					}
					continue
				}
				p := "/workspace"
				if i%2 == 0 {
					p = "/workspace/racedir"
				}
				ents, err := h.Client.ListFiles(bg, b.id, p)
				if err != nil {
					record("list", "error "+codeOf(err), "")
					continue
				}
				// A swap between the agent's readdir and its lstat of each
				// entry gives a partial listing: a correctness nit, not a
				// leak, since both sides are inside the sandbox.
				kind := "partial listing (swapped mid-listing)"
				for _, e := range ents {
					if hostOnly[e.Name] {
						record("list", "HOST /etc", fmt.Sprintf("ListFiles(%s) has the host's %q", p, e.Name))
						kind = ""
						break
					}
					switch e.Name {
					case "inner":
						kind = "the real directory"
					case "shadow":
						kind = "the sandbox's /etc"
					case "race":
						kind = "/workspace"
					}
				}
				if kind != "" {
					record("list", kind, "")
				}
			}
		}()
	}
	wg.Wait()
	swaps := b.sh(t, "cat /tmp/swaps 2>/dev/null || echo 0; cat /tmp/swapper.log").Stdout
	b.sh(t, "kill $(cat /tmp/swapper.pid)")
	for _, k := range sortedKeys(outcomes) {
		t.Logf("%6d  %s", outcomes[k], k)
	}
	t.Logf("the swapper made more than %s exchanges", strings.TrimSpace(swaps))
	if len(leaks) > 0 {
		t.Fatalf("the file API followed the swapped symlink out of the sandbox %d times, e.g.:\n%s", outcomes["read: HOST SHADOW"]+outcomes["list: HOST /etc"]+outcomes["archive: HOST SHADOW"], strings.Join(leaks, "\n"))
	}
	if outcomes["read: unexpected content"] > 0 {
		t.Errorf("unexpected results: %v", outcomes)
	}
	// The race must actually have raced, or the test proves nothing.
	if outcomes["read: harmless"] == 0 || outcomes["read: the sandbox's shadow"] == 0 {
		t.Errorf("the reads never saw both sides of the swap: %v", outcomes)
	}
}

// TestParallelSessionsHardened creates 50 sessions at once and checks every
// process in each (the shell, a child, python, an argv program) from inside
// and from the host: no_new_privs, seccomp filter mode, no CAP_SYS_ADMIN or
// CAP_MKNOD, and its own block of host ids.
func TestParallelSessionsHardened(t *testing.T) {
	const n = 50
	h := startDaemon(t, func(c *config.Config) {
		c.Session.MaxSessions = n + 10
		// 50 layers at once, each granted only disk the host can back
		// (disk.overcommit off): small ones, so that any CI machine's free
		// space holds them; this test is about isolation, not disk.
		c.Session.DefaultLimits.DiskMB = 64
	})
	hasPython := newBox(t, h, "probe", nil).sh(t, "command -v python3 >/dev/null").ExitCode == 0
	if err := h.Client.DeleteSession(bg, "probe"); err != nil {
		t.Fatal(err)
	}
	type report struct {
		id, inside, argv string
		err              error
	}
	reports := make([]report, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &reports[i]
			r.id = fmt.Sprintf("p%02d", i)
			if _, r.err = h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: r.id}); r.err != nil {
				return
			}
			py := ""
			if hasPython {
				py = `python3 -c 'import time; time.sleep(120)' & P=$!
for i in $(seq 100); do [ "$(cat /proc/$P/comm 2>/dev/null)" = python3 ] && break; sleep 0.05; done`
			}
			cmd := `sleep 120 & S=$!
` + py + `
for p in $$ $S $P; do echo "== $p $(cat /proc/$p/comm)"; grep -E '^(NoNewPrivs|Seccomp|Seccomp_filters|CapEff|CapBnd|CapPrm|CapAmb):' /proc/$p/status; done
echo "== map"; cat /proc/self/uid_map; echo "== gidmap"; cat /proc/self/gid_map`
			res, err := h.Client.Exec(bg, r.id, &api.ExecRequest{Command: cmd, TimeoutMs: 60_000})
			if err != nil {
				r.err = err
				return
			}
			r.inside = res.Stdout
			res, err = h.Client.Exec(bg, r.id, &api.ExecRequest{Argv: []string{"grep", "-E", "^(NoNewPrivs|Seccomp|Seccomp_filters|CapEff|CapBnd|CapPrm|CapAmb):", "/proc/self/status"}})
			if err != nil {
				r.err = err
				return
			}
			r.argv = "== argv\n" + res.Stdout
		}()
	}
	wg.Wait()
	t.Logf("50 sessions created and probed in %v", time.Since(start))

	hostIDs := map[string]string{}
	for _, r := range reports {
		if r.err != nil {
			t.Errorf("session %s: %v", r.id, r.err)
			continue
		}
		blocks := strings.Split(r.inside+r.argv, "== ")
		procs := 0
		for _, blk := range blocks[1:] {
			head, body, _ := strings.Cut(blk, "\n")
			switch {
			case head == "map" || head == "gidmap":
				f := strings.Fields(body)
				if len(f) < 3 || f[0] != "0" {
					t.Errorf("session %s: %s %q, want 0 mapped to a host id", r.id, head, body)
					continue
				}
				host, _ := strconv.ParseUint(f[1], 10, 64)
				if host < 1_000_000_000 {
					t.Errorf("session %s: root inside is host id %d, want >= 1000000000", r.id, host)
				}
				if other, dup := hostIDs[head+f[1]]; dup {
					t.Errorf("sessions %s and %s share host id %s (%s)", r.id, other, f[1], head)
				}
				hostIDs[head+f[1]] = r.id
			default:
				procs++
				for _, msg := range checkStatus(body) {
					t.Errorf("session %s, process %s: %s", r.id, head, msg)
				}
			}
		}
		want := 4
		if !hasPython {
			want = 3
		}
		if procs != want {
			t.Errorf("session %s: checked %d processes, want %d:\n%s", r.id, procs, want, r.inside+r.argv)
		}
	}
	if len(hostIDs) != 2*n && !t.Failed() {
		t.Errorf("%d distinct uid/gid maps for %d sessions", len(hostIDs), n)
	}

	// From the host: every process in every session's workload cgroup.
	t.Run("host view", func(t *testing.T) {
		procsFiles, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/pids", h.Config.CgroupParent, "*", "workload", "cgroup.procs"))
		if len(procsFiles) == 0 {
			procsFiles, _ = filepath.Glob(filepath.Join("/sys/fs/cgroup", h.Config.CgroupParent, "*", "workload", "cgroup.procs"))
		}
		if len(procsFiles) == 0 {
			t.Skipf("no workload cgroups found under %s on the host", h.Config.CgroupParent)
		}
		seen := 0
		uids := map[string]string{}
		for _, f := range procsFiles {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			for _, pid := range strings.Fields(string(b)) {
				st, err := os.ReadFile("/proc/" + pid + "/status")
				if err != nil {
					continue // exited
				}
				seen++
				for _, msg := range checkStatus(string(st)) {
					t.Errorf("host pid %s (%s): %s", pid, f, msg)
				}
				uid := strings.Fields(statusField(string(st), "Uid"))
				if len(uid) < 4 {
					t.Errorf("host pid %s: Uid %v", pid, uid)
					continue
				}
				for _, u := range uid {
					if v, _ := strconv.ParseUint(u, 10, 64); v < 1_000_000_000 {
						t.Errorf("host pid %s (%s) runs as host uid %s, want >= 1000000000", pid, f, u)
					}
				}
				if other, ok := uids[uid[0]]; ok && other != filepath.Dir(f) {
					t.Errorf("host uid %s runs in two sessions: %s and %s", uid[0], other, filepath.Dir(f))
				}
				uids[uid[0]] = filepath.Dir(f)
			}
		}
		if seen < n {
			t.Errorf("saw only %d sandboxed processes from the host, want at least %d", seen, n)
		}
		t.Logf("checked %d sandboxed processes from the host", seen)
	})
}

var hexCaps = regexp.MustCompile(`^[0-9a-f]{16}$`)

// checkStatus returns what is wrong with a /proc/<pid>/status.
func checkStatus(st string) []string {
	var bad []string
	if v := statusField(st, "NoNewPrivs"); v != "1" {
		bad = append(bad, "NoNewPrivs: "+v+", want 1")
	}
	if v := statusField(st, "Seccomp"); v != "2" {
		bad = append(bad, "Seccomp: "+v+", want 2 (filter)")
	}
	if v, err := strconv.Atoi(statusField(st, "Seccomp_filters")); err != nil || v < 1 {
		bad = append(bad, "Seccomp_filters: "+statusField(st, "Seccomp_filters")+", want >= 1")
	}
	for _, set := range []string{"CapEff", "CapBnd", "CapPrm", "CapAmb"} {
		v := statusField(st, set)
		if !hexCaps.MatchString(v) {
			bad = append(bad, fmt.Sprintf("%s: %q", set, v))
			continue
		}
		c, _ := strconv.ParseUint(v, 16, 64)
		if c&(1<<21) != 0 {
			bad = append(bad, set+" holds CAP_SYS_ADMIN: "+v)
		}
		if c&(1<<27) != 0 {
			bad = append(bad, set+" holds CAP_MKNOD: "+v)
		}
		if set == "CapAmb" && c != 0 {
			bad = append(bad, "CapAmb: "+v+", want none")
		}
	}
	return bad
}
