package daemon_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestNewFailsClean: a New that fails at its last step (the address is
// taken) undoes every step before it: the data directory's lock is free
// for the next daemon, and no cgroup, mount or session directory is left.
func TestNewFailsClean(t *testing.T) {
	busy := daemontest.Start(t, nil)
	cfg := config.Default()
	cfg.DataDir = testutil.TraversableDir(t)
	cfg.CgroupParent = fmt.Sprintf("%s%d-new", testutil.TestCgroupPrefix, os.Getpid())
	cfg.Shutdown = config.ShutdownDestroy
	cfg.CgroupFavorDynMods = false
	cfg.Listen = strings.TrimPrefix(busy.URL, "http://")
	testutil.CheckLeaks(t, cfg.CgroupParent, filepath.Join(cfg.DataDir, "sessions"), filepath.Join(cfg.DataDir, "layers"))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	d, err := daemon.New(context.Background(), cfg, log)
	if err == nil {
		d.Shutdown()
		t.Fatalf("New on a taken address succeeded")
	}
	if !strings.Contains(err.Error(), "listen on") {
		t.Fatalf("New on a taken address: %v, want the listen error", err)
	}

	cfg.Listen = "127.0.0.1:0"
	d, err = daemon.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("New after a failed New on the same data directory: %v", err)
	}
	if err := d.Shutdown(); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
