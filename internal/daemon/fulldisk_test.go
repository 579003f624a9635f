package daemon_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestRestartOnFullDisk: a daemon restarted on a full data filesystem
// starts, serves the sessions it adopts and deletes them for good (an
// acknowledged delete survives the next restart).
// The free-space floor is off, so every refusal here comes from the
// filesystem itself.
func TestRestartOnFullDisk(t *testing.T) {
	dataDir := testutil.Tmpfs(t, 160)
	var cgroupParent string
	start := func(shutdown string) *daemontest.Harness {
		t.Helper()
		return daemontest.Start(t, func(c *config.Config) {
			c.DataDir, c.Shutdown = dataDir, shutdown
			if cgroupParent != "" {
				c.CgroupParent = cgroupParent
			}
			cgroupParent = c.CgroupParent
			c.Session.MinFreeDiskMB = 0
		})
	}
	h := start(config.ShutdownKeep)
	filler := filepath.Join(dataDir, "filler")
	// Runs before the first daemon's leak check: after a failure that left
	// sessions kept by a stopped daemon, a daemon with room destroys them.
	cfg := h.Config
	t.Cleanup(func() {
		os.Remove(filler)
		if !t.Failed() {
			return
		}
		cfg.Shutdown = config.ShutdownDestroy
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		d, err := daemon.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Errorf("start a daemon to clean up: %v", err)
			return
		}
		done := make(chan error, 1)
		go func() { done <- d.Serve(ctx) }()
		cancel()
		<-done
	})
	for _, id := range []string{"a", "b"} {
		if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	h.Stop()

	fillTo(t, dataDir, filler, 0)
	h = start(config.ShutdownKeep) // fails the test if it cannot start
	c := h.Client
	if r, err := c.Exec(bg, "a", &api.ExecRequest{Command: "echo adopted"}); err != nil || r.Stdout != "adopted\n" {
		t.Errorf("exec in an adopted session on a full disk = %+v, %v", r, err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "c"}); client.Code(err) != "unavailable" {
		t.Errorf("create on a full disk = %v, want unavailable", err)
	}
	fillTo(t, dataDir, filler, 0)
	if err := c.DeleteSession(bg, "b"); err != nil {
		t.Fatalf("delete on a full disk = %v", err)
	}
	if freeBytes(t, dataDir) == 0 {
		t.Error("deleting a session on a full disk freed nothing")
	}
	h.Stop()

	// The delete was acknowledged, so it holds after a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	h = start(config.ShutdownDestroy)
	c = h.Client
	if _, err := c.GetSession(bg, "b"); client.Code(err) != "not_found" {
		t.Errorf("a session deleted on a full disk, after a restart: %v, want not_found", err)
	}
	if r, err := c.Exec(bg, "a", &api.ExecRequest{Command: "echo again"}); err != nil || r.Stdout != "again\n" {
		t.Errorf("exec after the second restart = %+v, %v", r, err)
	}
	if err := c.DeleteSession(bg, "a"); err != nil {
		t.Errorf("delete on a full disk = %v", err)
	}
}
