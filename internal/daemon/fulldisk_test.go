package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestRestartOnFullDisk: a daemon restarted on a full data filesystem
// starts, serves the sessions it adopts and deletes them for good (an
// acknowledged delete survives the next restart), and without a stored
// base image answers creates from it with unavailable, naming the disk.
// The free-space floor is off, so every refusal here comes from the
// filesystem itself (with it on, the daemon refuses creates sooner).
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
			c.Session.MinFreeDiskMB = -1
			// Limits are backed by free space (disk.overcommit off): the
			// default 1 GiB does not fit on this filesystem.
			c.Session.DefaultLimits.DiskMB = 16
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
	fillTo(t, dataDir, filler, 0)
	if err := c.DeleteSession(bg, "b"); err != nil {
		t.Fatalf("delete on a full disk = %v", err)
	}
	if freeBytes(t, dataDir) == 0 {
		t.Error("deleting a session on a full disk freed nothing")
	}

	// With room again (a fresh session's sparse layer frees little) the
	// readiness probe's write remakes the store's reserve, which this start
	// spent opening the database and the delete spent too.
	if fi, err := os.Stat(filler); err != nil || os.Truncate(filler, fi.Size()-4<<20) != nil {
		t.Fatalf("shrink the filler: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := readyz(h)
		_, err0 := os.Stat(filepath.Join(dataDir, "warren.db.reserve.0"))
		_, err1 := os.Stat(filepath.Join(dataDir, "warren.db.reserve.1"))
		if got == http.StatusOK && err0 == nil && err1 == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store's reserve was not remade once there was room: /readyz %d, %v, %v; %d bytes free", got, err0, err1, freeBytes(t, dataDir))
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.Stop()

	// The next start finds the disk full again, and no base image stored.
	dropName(t, filepath.Join(dataDir, "images", "names.json"), "base")
	fillTo(t, dataDir, filler, 0)
	h = start(config.ShutdownDestroy)
	c = h.Client
	if _, err := c.GetSession(bg, "b"); client.Code(err) != "not_found" {
		t.Errorf("a session deleted on a full disk, after a restart: %v, want not_found", err)
	}
	if r, err := c.Exec(bg, "a", &api.ExecRequest{Command: "echo again"}); err != nil || r.Stdout != "again\n" {
		t.Errorf("exec after the second restart on a full disk = %+v, %v", r, err)
	}
	_, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "c"})
	if client.Code(err) != "unavailable" || !strings.Contains(err.Error(), "disk is full") {
		t.Errorf("create without a base image on a full disk = %v, want unavailable naming the disk", err)
	}
	if err := c.DeleteSession(bg, "a"); err != nil {
		t.Errorf("delete on a full disk = %v", err)
	}
}

// dropName removes name from an image store's names.json, as if that
// image had never been stored.
func dropName(t *testing.T, path, name string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	delete(f["names"].(map[string]any), name)
	if b, err = json.Marshal(f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestFullDiskUnavailable: with the free-space floor off, what a full
// filesystem refuses (a session, a snapshot, a workspace) answers
// unavailable (503), never internal.
func TestFullDiskUnavailable(t *testing.T) {
	dataDir := testutil.Tmpfs(t, 160)
	h := daemontest.Start(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.Session.MinFreeDiskMB = -1
		c.Session.DefaultLimits.DiskMB = 16 // backed by the 160 MiB (disk.overcommit off)
	})
	c := h.Client
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	sh(t, c, "a", "head -c 4M /dev/urandom > /root/data && sync")
	filler := filepath.Join(dataDir, "filler")
	t.Cleanup(func() { os.Remove(filler) })
	fillTo(t, dataDir, filler, 0)

	want := func(what string, err error) {
		t.Helper()
		t.Logf("%s on a full disk: %v", what, err)
		if client.Code(err) != "unavailable" {
			t.Errorf("%s on a full disk = %v, want unavailable", what, err)
		}
	}
	for i := range 3 {
		id := fmt.Sprintf("n%d", i)
		_, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: id})
		want("create", err)
		if err == nil {
			c.DeleteSession(bg, id)
		}
	}
	_, err := c.Snapshot(bg, "a", "snap")
	want("snapshot", err)
	if err == nil {
		c.DeleteSnapshot(bg, "snap")
	}
	_, err = c.CreateWorkspace(bg, &api.CreateWorkspaceRequest{Name: "w", SizeMB: 32})
	want("workspace", err)
	if err == nil {
		c.DeleteWorkspace(bg, "w")
	}
}
