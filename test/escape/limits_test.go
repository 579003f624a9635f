package escape

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/config"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func freeBytes(t testing.TB, p string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(p, &st); err != nil {
		t.Fatalf("statfs %s: %v", p, err)
	}
	return int64(st.Bavail) * st.Bsize
}

// TestForkBomb: bombs fill the session's pids limit and nothing else; the
// session, the daemon and another session keep answering.
func TestForkBomb(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "bomb", &api.CreateSessionRequest{Limits: &api.Limits{Pids: 64, MemoryMB: 256}})
	t.Run("foreground", func(t *testing.T) {
		res := b.exec(t, &api.ExecRequest{Command: "bomb() { bomb | bomb; }; bomb", TimeoutMs: 3000})
		if !res.TimedOut || res.ExitCode != 124 {
			t.Errorf("foreground bomb: %+v, want timed_out with exit 124", res)
		}
		b.alive(t, "the foreground bomb")
	})
	t.Run("background", func(t *testing.T) {
		b.exec(t, &api.ExecRequest{Command: ":(){ :|:& };:", TimeoutMs: 5000})
		time.Sleep(time.Second)
		// The shell still runs builtins; the agent still answers.
		res := b.exec(t, &api.ExecRequest{Command: "echo still-here", TimeoutMs: 20_000})
		if res.Stdout != "still-here\n" {
			t.Errorf("a builtin under a running bomb: %+v", res)
		}
		s, err := h.Client.GetSession(bg, b.id)
		if err != nil || s.Usage == nil {
			t.Fatalf("GetSession under a bomb: %+v, %v", s, err)
		}
		if s.Usage.Pids > 64 {
			t.Errorf("the bomb holds %d processes, above the limit of 64", s.Usage.Pids)
		}
		t.Logf("under the bomb: %d processes", s.Usage.Pids)
		// The daemon and another session are unaffected.
		other := newBox(t, h, "bystander", nil)
		if res := other.sh(t, "/bin/echo fine"); res.Stdout != "fine\n" {
			t.Errorf("another session during the bomb: %+v", res)
		}
		// Kill it from inside with a builtin until it is gone.
		msg := eventually(15*time.Second, func() string {
			b.exec(t, &api.ExecRequest{Command: "kill -9 -1", TimeoutMs: 5000})
			s, err := h.Client.GetSession(bg, b.id)
			if err != nil || s.Usage == nil || s.Usage.Pids > 4 {
				return fmt.Sprintf("after kill -9 -1: %+v %v", s, err)
			}
			return ""
		})
		if msg != "" {
			t.Errorf("the bomb could not be stopped from inside: %s", msg)
		}
		if res := b.exec(t, &api.ExecRequest{Command: "/bin/echo recovered", TimeoutMs: 20_000}); res.Stdout != "recovered\n" {
			t.Errorf("after the bomb: %+v", res)
		}
	})
}

// TestMemoryBomb: allocating without end is stopped by the OOM killer at
// the session's limit, reported as oom_killed, and the session answers.
func TestMemoryBomb(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "hog", &api.CreateSessionRequest{Limits: &api.Limits{MemoryMB: 64}})
	pid1 := b.out(t, "cut -d' ' -f22 /proc/1/stat")
	for _, c := range []struct{ name, cmd string }{
		{"tail /dev/zero", "tail /dev/zero"},
		{"python", `python3 -c 'a = []
while True: a.append(bytearray(1 << 20))' 2>/dev/null || tail /dev/zero`},
		{"in the background and the foreground", "(tail /dev/zero &); tail /dev/zero"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := b.exec(t, &api.ExecRequest{Command: c.cmd, TimeoutMs: 60_000})
			if !res.OOMKilled || res.TimedOut {
				t.Errorf("memory bomb %q: %+v, want oom_killed", c.cmd, res)
			}
			b.alive(t, "the memory bomb")
		})
	}
	if got := b.out(t, "cut -d' ' -f22 /proc/1/stat"); got != pid1 {
		t.Errorf("the agent (PID 1) was replaced during the memory bombs: start %q -> %q", pid1, got)
	}
	if _, err := h.Client.Stats(bg); err != nil {
		t.Errorf("the daemon after the memory bombs: %v", err)
	}
}

// TestDiskFiller: writing until the disk is full stops at the session's
// limits.disk_mb; the host's disk, the daemon and other sessions do not
// notice.
func TestDiskFiller(t *testing.T) {
	h := startDaemon(t, nil)
	const limitMB = 64
	b := newBox(t, h, "filler", &api.CreateSessionRequest{Limits: &api.Limits{DiskMB: limitMB}})
	b.needPython(t)
	free0 := freeBytes(t, h.DataDir)

	t.Run("python write loop", func(t *testing.T) {
		got := b.pyKV(t, `
n = 0
buf = bytes(1 << 20)
try:
    with open("/big", "wb") as f:
        while n < (1 << 30):
            n += f.write(buf)
            f.flush()
            os.fsync(f.fileno())
    out("errno", "none")
except OSError as x:
    out("errno", ename(x.errno))
out("bytes", n)
`)
		n, _ := strconv.ParseInt(got["bytes"], 10, 64)
		t.Logf("the write loop stopped with %s after %d MiB", got["errno"], n>>20)
		if !oneOf(got["errno"], "ENOSPC", "EDQUOT") {
			t.Errorf("filling the disk ended with %q after %d bytes, want ENOSPC or EDQUOT", got["errno"], n)
		}
		if n > (limitMB+8)<<20 || n < (limitMB/2)<<20 {
			t.Errorf("the disk filled up after %d MiB, want about %d MiB (limits.disk_mb)", n>>20, limitMB)
		}
		if s, err := h.Client.GetSession(bg, b.id); err != nil || s.Usage == nil || s.Usage.DiskBytes < (limitMB/2)<<20 {
			t.Errorf("GetSession usage after filling the disk: %+v, %v", s, err)
		}
	})
	t.Run("dd", func(t *testing.T) {
		res := b.sh(t, "dd if=/dev/zero of=/big2 bs=1M 2>&1; echo exit=$?")
		if !strings.Contains(res.Stdout, "No space left on device") && !strings.Contains(res.Stdout, "Disk quota exceeded") {
			t.Errorf("dd until full: %q, want ENOSPC or EDQUOT", res.Stdout)
		}
	})
	t.Run("file API upload into a full disk", func(t *testing.T) {
		_, err := h.Client.WriteFile(bg, b.id, "/workspace/upload", io.LimitReader(zeros{}, 16<<20), 0)
		if codeOf(err) != "resource_exhausted" {
			t.Errorf("WriteFile of 16 MiB into a full layer: %v, want resource_exhausted", err)
		}
		if res := b.sh(t, "ls -A /workspace"); strings.Contains(res.Stdout, ".warren-upload") {
			t.Errorf("a failed upload left its temporary file: %q", res.Stdout)
		}
	})
	t.Run("tmpfs mounts are bounded too", func(t *testing.T) {
		for _, dir := range []string{"/dev/shm", "/run"} {
			got := b.pyKV(t, fmt.Sprintf(`
n = 0
buf = bytes(1 << 20)
try:
    with open(%q, "wb") as f:
        while n < (1 << 30):
            n += f.write(buf)
            f.flush()
    out("errno", "none")
except OSError as x:
    out("errno", ename(x.errno))
out("bytes", n)
os.unlink(%q)
`, dir+"/fill", dir+"/fill"))
			n, _ := strconv.ParseInt(got["bytes"], 10, 64)
			if got["errno"] != "ENOSPC" || n > 128<<20 {
				t.Errorf("filling %s: %s after %d MiB, want ENOSPC at its small size", dir, got["errno"], n>>20)
			}
		}
	})
	// The host's disk barely moved (the layer is at most 64 MiB; other
	// programs on the host may write too, so the bound is loose).
	if used := free0 - freeBytes(t, h.DataDir); used > 512<<20 {
		t.Errorf("the host's free space dropped by %d MiB while one session filled a %d MiB layer", used>>20, limitMB)
	} else {
		t.Logf("the host's free space moved by %d MiB", used>>20)
	}
	// The daemon and a second session work; the first recovers after rm.
	other := newBox(t, h, "neighbour", nil)
	if _, err := h.Client.WriteFile(bg, other.id, "f", io.LimitReader(zeros{}, 8<<20), 0); err != nil {
		t.Errorf("a second session cannot write 8 MiB while the first is full: %v", err)
	}
	if got := other.out(t, "stat -c %s /workspace/f"); got != fmt.Sprintln(8<<20) {
		t.Errorf("the second session's file: %q", got)
	}
	b.alive(t, "filling the disk")
	if res := b.sh(t, "rm -f /big /big2 && head -c 1048576 /dev/zero > /small && echo ok"); res.Stdout != "ok\n" {
		t.Errorf("writing after freeing the layer: %+v", res)
	}
}

// TestManyFiles: 100,000 small files either fit the quota or fail cleanly;
// listing them answers or gives a clean error.
func TestManyFiles(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "many", nil)
	b.needPython(t)
	const n = 100_000
	got := b.pyKV(t, fmt.Sprintf(`
os.makedirs("/workspace/many", exist_ok=True)
i = 0
try:
    while i < %d:
        fd = os.open("/workspace/many/f%%06d" %% i, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"x")
        os.close(fd)
        i += 1
    out("errno", "none")
except OSError as x:
    out("errno", ename(x.errno))
out("files", i)
`, n))
	created, _ := strconv.Atoi(got["files"])
	t.Logf("created %d files (%s)", created, got["errno"])
	if got["errno"] != "none" && !oneOf(got["errno"], "ENOSPC", "EDQUOT") {
		t.Errorf("creating %d files failed with %q after %d, want success or ENOSPC/EDQUOT", n, got["errno"], created)
	}
	start := time.Now()
	ents, err := h.Client.ListFiles(bg, b.id, "/workspace/many")
	t.Logf("ListFiles: %d entries, %v, in %v", len(ents), err, time.Since(start))
	if err != nil {
		if !oneOf(codeOf(err), "too_large", "resource_exhausted") {
			t.Errorf("ListFiles of %d files: %v, want the list or a clean too_large", created, err)
		}
	} else if len(ents) != created {
		t.Errorf("ListFiles returned %d entries, want %d", len(ents), created)
	}
	if got := b.out(t, "ls -f /workspace/many | wc -l"); strings.TrimSpace(got) != strconv.Itoa(created+2) {
		t.Errorf("ls counts %s entries, want %d", strings.TrimSpace(got), created+2)
	}
	if _, err := h.Client.Stats(bg); err != nil {
		t.Errorf("the daemon after 100,000 files: %v", err)
	}
}

// TestHugeUpload writes 1 GiB through the file API with the default
// --max-file-bytes: it is refused (413) or hits the disk quota, cleanly,
// and the daemon (in this process) never holds it in memory.
func TestHugeUpload(t *testing.T) {
	h := startDaemon(t, func(c *config.Config) {})
	b := newBox(t, h, "huge", nil)
	hwm0 := vmHWM(t)
	start := time.Now()
	w, err := h.Client.WriteFile(bg, b.id, "/workspace/huge", io.LimitReader(zeros{}, 1<<30), 0)
	hwm1 := vmHWM(t)
	t.Logf("1 GiB upload: %+v, %v in %v; peak RSS of the test process (daemon inside) %d MiB before, %d MiB after", w, err, time.Since(start), hwm0>>10, hwm1>>10)
	switch code := codeOf(err); {
	case err == nil:
		// It fit (the layer's limit is 1 GiB plus rounding): that is
		// clean too, as long as it is all there.
		if w.Size != 1<<30 {
			t.Errorf("the upload reported %d bytes, want %d", w.Size, 1<<30)
		}
	case code == "too_large" || code == "resource_exhausted":
	default:
		t.Errorf("1 GiB upload: %v, want success, too_large (413) or resource_exhausted", err)
	}
	if hwm1-hwm0 > 256<<10 || hwm1 > 768<<10 {
		t.Errorf("the daemon's memory grew with the upload: peak RSS %d MiB -> %d MiB", hwm0>>10, hwm1>>10)
	}
	if err != nil {
		if res := b.sh(t, "ls -A /workspace"); strings.Contains(res.Stdout, ".warren-upload") || strings.Contains(res.Stdout, "huge") {
			t.Errorf("a failed upload left data behind: %q", res.Stdout)
		}
	}
	b.alive(t, "the 1 GiB upload")
	if _, err := h.Client.WriteFile(bg, b.id, "/workspace/small", strings.NewReader("ok"), 0); err != nil {
		t.Errorf("a small upload after the huge one: %v", err)
	}
}
