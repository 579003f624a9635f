package daemon_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
)

// TestBusyPortCreatesNothing starts a daemon on a port another program
// holds: it must fail on the bind before it creates the data directory,
// and so before it makes (and the CLI prints) a first admin key that no
// daemon would ever serve.
func TestBusyPortCreatesNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := config.Default()
	cfg.Listen = busy.Addr().String()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.CgroupParent = "warren-test-busyport"
	cfg.CgroupFavorDynMods = false
	d, err := daemon.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		d.Shutdown()
		t.Fatal("New on a busy port succeeded")
	}
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "listen on "+cfg.Listen) {
		t.Errorf("New on a busy port: %v, want listen on %s: ...address already in use", err, cfg.Listen)
	}
	if _, err := os.Stat(cfg.DataDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the failed start left its data directory (stat: %v); it must bind before it writes anything", err)
	}
}
