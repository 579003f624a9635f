package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.SandboxMain()
	os.Exit(m.Run())
}

var serial atomic.Int64

type harness struct {
	c       *client.Client
	d       *Daemon
	url     string
	dataDir string
	stop    func()
}

// startDaemon runs a daemon on a free loopback port with its own data dir
// and cgroup parent, checks at the end that it left nothing behind, and
// returns a client of it.
func startDaemon(t testing.TB, mutate func(*config.Config)) *harness {
	t.Helper()
	testutil.RequiresRoot(t)
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = testutil.TraversableDir(t)
	cfg.CgroupParent = fmt.Sprintf("warren-test-%d-d%d", os.Getpid(), serial.Add(1))
	cfg.ShutdownGrace = 2 * time.Second
	cfg.Session.ReapInterval = 100 * time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	var log *slog.Logger
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	} else {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// Registered first, so it runs last: after the daemon stopped.
	testutil.CheckLeaks(t, cfg.CgroupParent, filepath.Join(cfg.DataDir, "sessions"))
	ctx, cancel := context.WithCancel(context.Background())
	d, err := New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatalf("start daemon: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon stopped with: %v", err)
		}
	}
	t.Cleanup(stop)
	url := "http://" + d.Addr().String()
	return &harness{c: client.New(url), d: d, url: url, dataDir: cfg.DataDir, stop: stop}
}
