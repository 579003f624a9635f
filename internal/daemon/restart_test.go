package daemon_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/cgroup"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/store"
)

// restartAt starts a daemon in the data directory and cgroup parent of an
// earlier one.
func restartAt(t *testing.T, h *daemontest.Harness, shutdown string) *daemontest.Harness {
	t.Helper()
	return daemontest.Start(t, func(c *config.Config) {
		c.DataDir, c.CgroupParent, c.Shutdown = h.DataDir, h.Config.CgroupParent, shutdown
	})
}

// storedPid reads the host pid of a session's PID 1 from a stopped daemon's
// store.
func storedPid(t *testing.T, dataDir, id string) int {
	t.Helper()
	st, err := store.Open(filepath.Join(dataDir, "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := st.GetSession(bg, "default", id)
	if err != nil {
		t.Fatal(err)
	}
	return s.Pid
}

// TestRestartKeepsSessions: a daemon that stops with --shutdown=keep leaves
// its sessions running, and the next one carries on with them: processes,
// output, files, cwd and environment. A session that died meanwhile comes
// back as failed and can be deleted; debris no session owns is removed.
func TestRestartKeepsSessions(t *testing.T) {
	h1 := daemontest.Start(t, func(c *config.Config) { c.Shutdown = config.ShutdownKeep })
	c := h1.Client
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "keep", Limits: &api.Limits{DiskMB: 64}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "dies"}); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Exec(bg, "keep", &api.ExecRequest{Command: "cd /tmp && export KEPT=yes && echo data > /workspace/f && (sleep 300 &) && echo ok"}); err != nil || res.Stdout != "ok\n" {
		t.Fatalf("exec: %+v %v", res, err)
	}
	p, err := c.StartProcess(bg, "keep", &api.StartProcessRequest{Command: "i=0; while :; do i=$((i+1)); echo tick$i; sleep 0.05; done"})
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.GetSession(bg, "keep")
	if err != nil {
		t.Fatal(err)
	}
	h1.Stop()

	// While no daemon runs: one sandbox dies, and debris appears.
	pid := storedPid(t, h1.DataDir, "dies")
	if pid <= 1 || syscall.Kill(pid, syscall.SIGKILL) != nil {
		t.Fatalf("the kept sandbox of dies (pid %d) is not running", pid)
	}
	for i := 0; i < 200 && syscall.Kill(pid, 0) == nil; i++ {
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, syscall.WNOHANG, nil) // it is this test's child
		time.Sleep(10 * time.Millisecond)
	}
	stray := filepath.Join(h1.DataDir, "sessions", "feedfacefeedface")
	if err := os.MkdirAll(filepath.Join(stray, "rootfs"), 0o700); err != nil {
		t.Fatal(err)
	}
	hier, err := cgroup.Detect(h1.Config.CgroupParent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hier.NewSession("feedfacefeedface", cgroup.Limits{}); err != nil {
		t.Fatal(err)
	}

	h2 := restartAt(t, h1, config.ShutdownDestroy)
	c = h2.Client
	got, err := c.GetSession(bg, "keep")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "running" || got.Cwd != "/tmp" || !got.CreatedAt.Equal(before.CreatedAt) || got.ExpiresAt.Before(before.ExpiresAt) {
		t.Errorf("after the restart: %+v\nbefore: %+v", got, before)
	}
	res, err := c.Exec(bg, "keep", &api.ExecRequest{Command: "pwd; echo $KEPT; cat /workspace/f; pgrep -fc '^sleep 300'"})
	if err != nil || res.Stdout != "/tmp\nyes\ndata\n1\n" {
		t.Errorf("state after the restart: %+v, %v; want /tmp, yes, data and the background sleep", res, err)
	}
	pr, err := c.GetProcess(bg, "keep", p.ID)
	if err != nil || pr.State != "running" {
		t.Fatalf("the process after the restart: %+v, %v", pr, err)
	}
	// Its output went on, and still starts at offset 0.
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	rc, start, err := c.ReadProcessOutput(ctx, "keep", p.ID, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	n, _ := rc.Read(buf)
	rc.Close()
	if start != 0 || !strings.HasPrefix(string(buf[:n]), "tick1\ntick2\n") || pr.OutputBytes < int64(len("tick1\n")) {
		t.Errorf("output after the restart from %d: %q", start, buf[:min(n, 40)])
	}
	// The session that died is failed, says why, and can be deleted.
	dead, err := c.GetSession(bg, "dies")
	if err != nil || dead.State != "failed" || !strings.Contains(dead.Reason, "did not survive") {
		t.Errorf("the session that died: %+v, %v", dead, err)
	}
	if err := c.DeleteSession(bg, "dies"); err != nil {
		t.Errorf("delete the failed session: %v", err)
	}
	// The debris is gone.
	if _, err := os.Stat(stray); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stray sandbox directory survived the reconciler: %v", err)
	}
	names, _ := hier.Sessions()
	for _, n := range names {
		if n == "feedfacefeedface" {
			t.Errorf("stray cgroup survived the reconciler")
		}
	}
	// New sessions still work beside the adopted one.
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "new"}); err != nil {
		t.Errorf("create after the restart: %v", err)
	}
}

// TestReconcilerWhileRunning: debris that appears while the daemon runs (a
// delete that failed half-way, say) goes on the reconciler's second pass;
// live sessions are left alone.
func TestReconcilerWhileRunning(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "live"}); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(h.DataDir, "sessions", "deadbeefdeadbeef")
	if err := os.MkdirAll(stray, 0o700); err != nil {
		t.Fatal(err)
	}
	hier, err := cgroup.Detect(h.Config.CgroupParent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hier.NewSession("deadbeefdeadbeef", cgroup.Limits{}); err != nil {
		t.Fatal(err)
	}
	m := h.Daemon.Manager()
	m.Reconcile()
	if _, err := os.Stat(stray); err != nil {
		t.Fatalf("the first pass removed the debris already (it must look twice): %v", err)
	}
	m.Reconcile()
	if _, err := os.Stat(stray); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stray directory after two passes: %v", err)
	}
	names, _ := hier.Sessions()
	if slices.Contains(names, "deadbeefdeadbeef") {
		t.Errorf("stray cgroup after two passes")
	}
	if res, err := h.Client.Exec(bg, "live", &api.ExecRequest{Command: "echo fine"}); err != nil || res.Stdout != "fine\n" {
		t.Errorf("the live session after the reconciler: %+v, %v", res, err)
	}
}

// TestPprof: --pprof-listen serves Go's profiler on loopback; it is off by
// default and refused anywhere but loopback.
func TestPprof(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.PprofListen = "127.0.0.1:0" })
	for h.Daemon.PprofAddr() == "" {
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Get("http://" + h.Daemon.PprofAddr() + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "goroutine profile") {
		t.Errorf("profiler: %d %.100s", resp.StatusCode, b)
	}
	c := config.Default()
	c.PprofListen = "0.0.0.0:6060"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("a non-loopback profiler address: %v", err)
	}
}

// TestKeepWithNothingToKeep: a daemon stopped with --shutdown=keep that
// holds no session leaves nothing behind, not even its parent cgroup (the
// leak check counts the parent).
func TestKeepWithNothingToKeep(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) {
		c.Shutdown = config.ShutdownKeep
		c.Session.PoolSize = 1
	})
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "gone"}); err != nil {
		t.Fatal(err)
	}
	if err := h.Client.DeleteSession(bg, "gone"); err != nil {
		t.Fatal(err)
	}
	h.Stop()
}
