package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/cgroup"
	"github.com/warrenhq/warren/internal/image"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.SandboxMain()
	os.Exit(m.Run())
}

// env is one test's runtime: a data dir, its own cgroup parent, the base
// image, and a leak check that runs after every sandbox is destroyed.
type env struct {
	t      testing.TB
	rt     *Runtime
	base   *image.Image
	images *image.Store
}

var (
	baseOnce   sync.Once
	baseDir    string
	baseStore  *image.Store
	baseImage  *image.Image
	baseErr    error
	testSerial atomic.Int64
)

// sharedBase builds the base image once per test binary.
func sharedBase(t testing.TB) (*image.Store, *image.Image) {
	baseOnce.Do(func() {
		baseDir, baseErr = os.MkdirTemp("", "warren-sandbox-test-")
		if baseErr != nil {
			return
		}
		baseStore, baseErr = image.Open(filepath.Join(baseDir, "images"))
		if baseErr == nil {
			baseImage, baseErr = baseStore.EnsureBase()
		}
	})
	if baseErr != nil {
		t.Fatalf("base image: %v", baseErr)
	}
	return baseStore, baseImage
}

func newEnv(t testing.TB) *env {
	t.Helper()
	testutil.RequiresRoot(t)
	images, base := sharedBase(t)
	dir := testutil.TraversableDir(t)
	parent := fmt.Sprintf("warren-test-%d-%d", os.Getpid(), testSerial.Add(1))
	h, err := cgroup.Detect(parent)
	if err != nil {
		t.Fatal(err)
	}
	sessions := filepath.Join(dir, "sessions")
	prog, _, err := Seccomp(true, h.Version())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := NewRuntime(sessions, h, Options{UserNS: true, Seccomp: prog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	t.Cleanup(func() {
		if err := h.Teardown(); err != nil {
			t.Errorf("remove cgroup parent: %v", err)
		}
	})
	testutil.CheckLeaks(t, parent, sessions)
	t.Cleanup(rt.Wait) // before the leak check: Destroy removes files in the background
	return &env{t: t, rt: rt, base: base, images: images}
}

type opt func(*Config)

func withLimits(l cgroup.Limits) opt { return func(c *Config) { c.Limits = l } }

var nameSerial atomic.Int64

// start starts a sandbox of the base image; it is destroyed at cleanup.
func (e *env) start(opts ...opt) *Sandbox {
	e.t.Helper()
	c := &Config{
		Name:     fmt.Sprintf("t%d", nameSerial.Add(1)),
		Hostname: "box",
		Lower:    []string{e.base.RootFS},
		BaseDir:  "/workspace",
		Env:      e.base.Env,
		Limits:   cgroup.Limits{MemoryBytes: 256 << 20, Pids: 128, CPUs: 1},
	}
	for _, d := range e.base.HostDirs {
		c.Overlays = append(c.Overlays, Overlay{Source: d, Target: d})
	}
	for _, o := range opts {
		o(c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := e.rt.Start(ctx, c)
	if err != nil {
		e.t.Fatalf("Start: %v", err)
	}
	e.t.Cleanup(func() {
		if err := sb.Destroy(context.Background()); err != nil {
			e.t.Errorf("Destroy: %v", err)
		}
	})
	return sb
}

type execOpt func(*agentproto.ExecRequest)

func timeout(d time.Duration) execOpt { return func(r *agentproto.ExecRequest) { r.Timeout = d } }
func maxOutput(n int64) execOpt       { return func(r *agentproto.ExecRequest) { r.MaxOutput = n } }

// sh runs a command through the session shell.
func sh(t *testing.T, sb *Sandbox, cmd string, opts ...execOpt) *ExecResult {
	t.Helper()
	req := &agentproto.ExecRequest{Command: cmd, Timeout: 20 * time.Second, MaxOutput: 1 << 20}
	for _, o := range opts {
		o(req)
	}
	res, err := sb.Exec(context.Background(), req, nil, nil)
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd, err)
	}
	return res
}

// argv runs a program directly.
func argv(t *testing.T, sb *Sandbox, args ...string) *ExecResult {
	t.Helper()
	res, err := sb.Exec(context.Background(), &agentproto.ExecRequest{Argv: args, Timeout: 20 * time.Second, MaxOutput: 1 << 20}, nil, nil)
	if err != nil {
		t.Fatalf("Exec(%q): %v", args, err)
	}
	return res
}

// mustOut runs cmd and checks its exit code and stdout.
func mustOut(t *testing.T, sb *Sandbox, cmd, want string) {
	t.Helper()
	res := sh(t, sb, cmd)
	if res.ExitCode != 0 || string(res.Stdout) != want {
		t.Errorf("Exec(%q) = %d, stdout %q, stderr %q; want 0, %q", cmd, res.ExitCode, res.Stdout, res.Stderr, want)
	}
}

func sha256Sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func cgroupLimitsNoCPU() cgroup.Limits { return cgroup.Limits{MemoryBytes: 256 << 20, Pids: 128} }
