// Package daemontest runs a real warren daemon inside a test: on a free
// loopback port, with its own data directory and cgroup parent, and a check
// at the end that it left nothing behind on the host. Test binaries that use
// it must call testutil.SandboxMain first in TestMain.
package daemontest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/testutil"
)

var serial atomic.Int64

// Harness is a daemon under test.
type Harness struct {
	// Client calls the daemon with AdminKey.
	Client *client.Client
	// AdminKey is the daemon's first admin key ("" with auth off), also
	// after a restart in the same data directory.
	AdminKey string
	Daemon   *daemon.Daemon
	URL      string
	DataDir  string
	Config   config.Config
	stop     func()
}

// Authorize adds the admin key to req.
func (h *Harness) Authorize(req *http.Request) *http.Request {
	if h.AdminKey != "" {
		req.Header.Set("Authorization", "Bearer "+h.AdminKey)
	}
	return req
}

// Do sends req with the admin key.
func (h *Harness) Do(req *http.Request) (*http.Response, error) {
	return http.DefaultClient.Do(h.Authorize(req))
}

// Header is the header that authenticates as the admin (for WebSocket
// dials).
func (h *Harness) Header() http.Header {
	hd := http.Header{}
	if h.AdminKey != "" {
		hd.Set("Authorization", "Bearer "+h.AdminKey)
	}
	return hd
}

// Stop shuts the daemon down now (it also happens at cleanup).
func (h *Harness) Stop() { h.stop() }

// Start runs a daemon for the test; mutate may change its configuration.
func Start(t testing.TB, mutate func(*config.Config)) *Harness {
	t.Helper()
	return StartWithLog(t, mutate, nil)
}

// StartWithLog is Start with the daemon logging to log (nil: Start's
// default, warnings to stderr under -v and nothing otherwise).
func StartWithLog(t testing.TB, mutate func(*config.Config), log *slog.Logger) *Harness {
	t.Helper()
	testutil.RequiresRoot(t)
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = testutil.TraversableDir(t)
	cfg.CgroupParent = fmt.Sprintf("%s%d-d%d", testutil.TestCgroupPrefix, os.Getpid(), serial.Add(1))
	cfg.ShutdownGrace = 2 * time.Second
	// Tests check that a stopped daemon leaves nothing behind; those of
	// restarts ask for keep.
	cfg.Shutdown = config.ShutdownDestroy
	cfg.Session.ReapInterval = 100 * time.Millisecond
	// Host-wide and never undone by the daemon: the cgroup package's test
	// covers it and leaves the host as it found it.
	cfg.CgroupFavorDynMods = false
	if mutate != nil {
		mutate(&cfg)
	}
	switch {
	case log != nil:
	case testing.Verbose():
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	default:
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// Registered first, so it runs last: after the daemon stopped.
	testutil.CheckLeaks(t, cfg.CgroupParent, filepath.Join(cfg.DataDir, "sessions"), filepath.Join(cfg.DataDir, "layers"))
	ctx, cancel := context.WithCancel(context.Background())
	d, err := daemon.New(ctx, cfg, log)
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
	key := d.AdminKey()
	if b, err := os.ReadFile(filepath.Join(cfg.DataDir, daemon.AdminKeyFile)); key == "" && err == nil {
		key = strings.TrimSpace(string(b)) // a restart in the same data directory
	}
	return &Harness{Client: client.New(url, client.WithToken(key)), AdminKey: key, Daemon: d, URL: url,
		DataDir: cfg.DataDir, Config: cfg, stop: stop}
}
