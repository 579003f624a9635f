package session_test

// Tests of the manager's own logic against the fake runtime of package
// sessiontest: no root, no kernel, milliseconds. What the real runtime
// does (isolation, limits, adoption of real processes) is tested on the
// real kernel in internal/sandbox, internal/daemon and test/.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/image"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/session/sessiontest"
)

var bg = context.Background()

// fixture is a manager over fakes.
type fixture struct {
	m      *session.Manager
	rt     *sessiontest.Runtime
	store  *sessiontest.Store
	images *sessiontest.Images
	obs    *observer
	// tenants and layers, if set before start, are the manager's.
	tenants session.Tenants
	layers  *session.LayersConfig
}

// fakes returns a fixture of fresh fakes, for start.
func fakes(t *testing.T) *fixture {
	return &fixture{rt: sessiontest.NewRuntime(t.TempDir()), store: sessiontest.NewStore(), images: sessiontest.NewImages()}
}

// start builds a manager over fresh fakes (or f's, to play a restarted
// daemon), recovers it and closes it when the test ends.
func start(t *testing.T, cfg session.Config, f *fixture) *fixture {
	t.Helper()
	if f == nil {
		f = fakes(t)
	}
	if cfg.MinFreeDiskMB == 0 {
		cfg.MinFreeDiskMB = -1 // the test machine's disk is not the point
	}
	f.obs = &observer{}
	f.m = session.NewManager(cfg, session.Deps{Store: f.store, Runtime: f.rt, Images: f.images, Tenants: f.tenants,
		Observer: f.obs, Layers: f.layers, Log: slog.New(slog.DiscardHandler)})
	if err := f.m.Recover(bg); err != nil {
		t.Fatalf("Recover() = %v", err)
	}
	m := f.m
	t.Cleanup(func() { m.Close(bg) })
	return f
}

// observer records what the manager reports.
type observer struct {
	mu         sync.Mutex
	created    int
	reaped     []string
	reconciled []string
}

func (o *observer) Created(d time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		o.created++
	}
}
func (o *observer) Deleted(error)                   {}
func (o *observer) Op(string, time.Duration, error) {}
func (o *observer) Reaped(why string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reaped = append(o.reaped, why)
}
func (o *observer) Reconciled(action string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reconciled = append(o.reconciled, action)
}

func (o *observer) get() (created int, reaped, reconciled []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.created, slices.Clone(o.reaped), slices.Clone(o.reconciled)
}

func mustCreate(t *testing.T, m *session.Manager, tenant string, req *session.CreateRequest) *session.Info {
	t.Helper()
	info, created, err := m.Create(bg, tenant, req)
	if err != nil || !created {
		t.Fatalf("Create(%s, %+v) = %v, created %v", tenant, req, err, created)
	}
	return info
}

func wantClass(t *testing.T, call string, err error, want *errdefs.Class) {
	t.Helper()
	if got := errdefs.ClassOf(err); err == nil || got != want {
		t.Errorf("%s = %v (%v), want %v", call, err, got, want)
	}
}

func TestCreateGetDelete(t *testing.T) {
	f := start(t, session.Config{}, nil)
	info := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "a", Env: map[string]string{"FOO": "bar"}, Labels: map[string]string{"k": "v"}})
	if info.State != session.StateRunning || info.Cwd != "/workspace" || info.Usage == nil || info.Pid == 0 {
		t.Errorf("Create = %+v, want running in /workspace with usage and a pid", info)
	}
	sb := f.rt.Sandbox(info.Name)
	if sb == nil {
		t.Fatalf("no sandbox %q runs; running: %v", info.Name, f.rt.Running())
	}
	cfg := sb.Config()
	if cfg.Hostname != "a" || cfg.MemoryBytes != 512<<20 || cfg.DiskBytes != 1024<<20 || cfg.Deferred {
		t.Errorf("sandbox config = %+v, want hostname a, default limits, not deferred", cfg)
	}
	if !slices.Contains(cfg.Env, "FOO=bar") || !slices.Contains(cfg.Env, "HOSTNAME=a") || !slices.Contains(cfg.Env, "PATH=/usr/bin:/bin") {
		t.Errorf("sandbox env = %v, want the image's, the request's and HOSTNAME", cfg.Env)
	}
	if rec, err := f.store.GetSession(bg, "t1", "a"); err != nil || rec.State != session.StateRunning || rec.Pid != info.Pid {
		t.Errorf("stored record = %+v, %v; want running with pid %d", rec, err, info.Pid)
	}
	if got := f.images.Leases()[info.Name]; got != "sha256:b1" {
		t.Errorf("image lease of %s = %q, want sha256:b1", info.Name, got)
	}
	// Another tenant's session is not found, exactly like a missing one.
	if _, err := f.m.Get(bg, "t2", "a"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get(t2, a) = %v, want not_found", err)
	}
	if got := f.m.List(bg, "t1"); len(got) != 1 || got[0].ID != "a" {
		t.Errorf("List(t1) = %v, want [a]", got)
	}
	if err := f.m.Delete(bg, "t1", "a"); err != nil {
		t.Fatalf("Delete = %v", err)
	}
	if _, err := f.m.Get(bg, "t1", "a"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get after Delete = %v, want not_found", err)
	}
	if _, err := f.store.GetSession(bg, "t1", "a"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("stored record after Delete: %v, want not_found", err)
	}
	if len(f.rt.Running()) != 0 {
		t.Errorf("sandboxes running after Delete: %v", f.rt.Running())
	}
	if _, ok := f.images.Leases()[info.Name]; ok {
		t.Errorf("the image lease of %s outlived its session", info.Name)
	}
	wantClass(t, "Delete again", f.m.Delete(bg, "t1", "a"), errdefs.ErrNotFound)
}

func TestCreateValidation(t *testing.T) {
	f := start(t, session.Config{}, nil)
	for _, tc := range []struct {
		name string
		req  session.CreateRequest
	}{
		{"bad id", session.CreateRequest{ID: "Not Valid"}},
		{"relative cwd", session.CreateRequest{Cwd: "tmp"}},
		{"bad env name", session.CreateRequest{Env: map[string]string{"1X": "y"}}},
		{"network", session.CreateRequest{Network: "host"}},
		{"negative memory", session.CreateRequest{Limits: session.Limits{MemoryMB: -1}}},
		{"too little memory", session.CreateRequest{Limits: session.Limits{MemoryMB: 8}}},
		{"too much memory", session.CreateRequest{Limits: session.Limits{MemoryMB: 1 << 20}}},
		{"too many cpus", session.CreateRequest{Limits: session.Limits{CPUs: 1000}}},
		{"too little disk", session.CreateRequest{Limits: session.Limits{DiskMB: 1}}},
		{"negative ttl", session.CreateRequest{IdleTTL: -time.Second}},
		{"ttl over max", session.CreateRequest{IdleTTL: 365 * 24 * time.Hour}},
		{"lifetime over max", session.CreateRequest{MaxLifetime: 365 * 24 * time.Hour}},
		{"reserved label", session.CreateRequest{Labels: map[string]string{"warren.dev/x": "1"}}},
		{"bad user", session.CreateRequest{User: "no such user!"}},
		{"unknown image", session.CreateRequest{Image: "nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := f.m.Create(bg, "t1", &tc.req)
			wantClass(t, "Create", err, errdefs.ErrInvalidArgument)
		})
	}
	if n := f.rt.Starts(); n != 0 {
		t.Errorf("%d sandboxes started for invalid requests", n)
	}
}

func TestCreateWithoutFeatures(t *testing.T) {
	f := fakes(t)
	f.rt.Feat = session.Features{}
	start(t, session.Config{}, f)
	_, _, err := f.m.Create(bg, "t1", &session.CreateRequest{Limits: session.Limits{DiskMB: 100}})
	wantClass(t, "Create(disk_mb without quotas)", err, errdefs.ErrInvalidArgument)
	_, _, err = f.m.Create(bg, "t1", &session.CreateRequest{User: "1000"})
	wantClass(t, "Create(user without userns)", err, errdefs.ErrInvalidArgument)
	info := mustCreate(t, f.m, "t1", &session.CreateRequest{})
	if info.Limits.DiskMB != 0 || f.rt.Sandbox(info.Name).Config().DiskBytes != 0 {
		t.Errorf("a session without disk quotas got disk limit %d MiB", info.Limits.DiskMB)
	}
}

func TestCreateIdempotent(t *testing.T) {
	f := start(t, session.Config{}, nil)
	// Concurrent creates of one id make one session; all return it.
	var wg sync.WaitGroup
	infos := make([]*session.Info, 8)
	created := make([]bool, 8)
	for i := range infos {
		wg.Go(func() {
			var err error
			infos[i], created[i], err = f.m.Create(bg, "t1", &session.CreateRequest{ID: "same"})
			if err != nil {
				t.Errorf("Create #%d = %v", i, err)
			}
		})
	}
	wg.Wait()
	if n := f.rt.Starts(); n != 1 {
		t.Errorf("%d sandboxes started for one id, want 1", n)
	}
	if n := len(slices.DeleteFunc(slices.Clone(created), func(c bool) bool { return !c })); n != 1 {
		t.Errorf("%d creates report created, want 1", n)
	}
	for i, info := range infos {
		if info == nil || info.Name != infos[0].Name || info.State != session.StateRunning {
			t.Errorf("Create #%d = %+v, want the one running session", i, info)
		}
	}
	if c, _, _ := f.obs.get(); c != 1 {
		t.Errorf("observer heard %d creates, want 1 (a create that returns an existing session is not one)", c)
	}
	// The same id in another tenant is another session.
	other := mustCreate(t, f.m, "t2", &session.CreateRequest{ID: "same"})
	if other.Name == infos[0].Name {
		t.Errorf("two tenants' sessions share sandbox %s", other.Name)
	}
}

func TestCreateFailure(t *testing.T) {
	f := start(t, session.Config{}, nil)
	f.rt.StartErr = func(*session.SandboxConfig) error { return errors.New("clone: no memory") }
	_, _, err := f.m.Create(bg, "t1", &session.CreateRequest{ID: "a"})
	wantClass(t, "Create(start fails)", err, errdefs.ErrUnavailable)
	if _, err := f.store.GetSession(bg, "t1", "a"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a failed create left a record: %v", err)
	}
	if l := f.images.Leases(); len(l) != 0 {
		t.Errorf("a failed create left image leases %v", l)
	}
	if f.m.Count() != 0 {
		t.Errorf("Count() = %d after a failed create, want 0", f.m.Count())
	}
	// The request's own fault keeps its class.
	f.rt.StartErr = func(*session.SandboxConfig) error {
		return errdefs.New(errdefs.ErrInvalidArgument, "user nobody2 is not in the image")
	}
	_, _, err = f.m.Create(bg, "t1", &session.CreateRequest{ID: "a", User: "nobody2"})
	wantClass(t, "Create(unknown user)", err, errdefs.ErrInvalidArgument)
	// The id is free again.
	f.rt.StartErr = nil
	mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "a"})

	// A store that cannot record the running session: the sandbox goes.
	f.store.Fail = func(op string, s *session.Session) error {
		if op == "update" && s.State == session.StateRunning {
			return errors.New("disk full")
		}
		return nil
	}
	if _, _, err := f.m.Create(bg, "t1", &session.CreateRequest{ID: "b"}); err == nil {
		t.Errorf("Create with a failing store = nil error")
	}
	if got := f.rt.Running(); len(got) != 1 {
		t.Errorf("sandboxes running = %v, want only a's", got)
	}
}

func TestQuotas(t *testing.T) {
	tl := &tenants{limits: map[string]session.TenantLimits{
		"small": {MaxSessions: 1},
		"mem":   {MaxMemoryMB: 1000},
		"cpu":   {MaxCPUs: 1.5},
		"life":  {MaxLifetime: time.Hour},
	}}
	f := fakes(t)
	f.tenants = tl
	start(t, session.Config{MaxSessions: 3}, f)
	mustCreate(t, f.m, "small", &session.CreateRequest{})
	_, _, err := f.m.Create(bg, "small", &session.CreateRequest{})
	wantClass(t, "Create(over max_sessions)", err, errdefs.ErrResourceExhausted)

	mustCreate(t, f.m, "mem", &session.CreateRequest{Limits: session.Limits{MemoryMB: 600}})
	_, _, err = f.m.Create(bg, "mem", &session.CreateRequest{Limits: session.Limits{MemoryMB: 600}})
	wantClass(t, "Create(over max_memory_mb)", err, errdefs.ErrResourceExhausted)

	_, _, err = f.m.Create(bg, "cpu", &session.CreateRequest{Limits: session.Limits{CPUs: 2}})
	wantClass(t, "Create(over max_cpus)", err, errdefs.ErrResourceExhausted)

	_, _, err = f.m.Create(bg, "life", &session.CreateRequest{MaxLifetime: 2 * time.Hour})
	wantClass(t, "Create(over max_lifetime)", err, errdefs.ErrResourceExhausted)
	// The tenant's ceiling is its default.
	info := mustCreate(t, f.m, "life", &session.CreateRequest{})
	if info.MaxLifetime != time.Hour {
		t.Errorf("MaxLifetime = %v, want the tenant's ceiling of 1h", info.MaxLifetime)
	}
	// The daemon's maximum counts every tenant.
	_, _, err = f.m.Create(bg, "other", &session.CreateRequest{})
	wantClass(t, "Create(over --max-sessions)", err, errdefs.ErrResourceExhausted)
	tl.err = errors.New("tenant store down")
	refused := false
	ctx := session.OnNodeRefusal(bg, func() { refused = true })
	_, _, err = f.m.Create(ctx, "small", &session.CreateRequest{})
	if err == nil || !strings.Contains(err.Error(), "tenant store down") || refused {
		t.Errorf("Create with the tenant store broken = %v (a refusal of the node: %v, want not)", err, refused)
	}
	// Unreachable (a fleet node cut off from its registry): the node's
	// own refusal, which a fleet places elsewhere.
	tl.err = errdefs.New(errdefs.ErrUnavailable, "fleet registry unavailable")
	if _, _, err = f.m.Create(ctx, "small", &session.CreateRequest{}); !errdefs.Is(err, errdefs.ErrUnavailable) || !refused {
		t.Errorf("Create with the tenant store unreachable = %v (a refusal of the node: %v, want one)", err, refused)
	}
}

type tenants struct {
	limits map[string]session.TenantLimits
	err    error
}

func (tn *tenants) Limits(ctx context.Context, tenant string) (session.TenantLimits, error) {
	return tn.limits[tenant], tn.err
}

func TestExec(t *testing.T) {
	f := fakes(t)
	f.tenants = &tenants{limits: map[string]session.TenantLimits{
		"strict": {MaxExecTimeout: 10 * time.Second, Deny: []string{"rm"}},
	}}
	start(t, session.Config{MaxTimeout: time.Minute}, f)
	info := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "a"})
	res, err := f.m.Exec(bg, "t1", "a", &session.ExecRequest{Command: "cd /tmp"}, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec(cd /tmp) = %+v, %v", res, err)
	}
	if got, _ := f.m.Get(bg, "t1", "a"); got.Cwd != "/tmp" {
		t.Errorf("Cwd after cd = %q, want /tmp", got.Cwd)
	}
	// Streaming: output goes to the stream on stdout.
	var streamed []string
	_, err = f.m.Exec(bg, "t1", "a", &session.ExecRequest{Argv: []string{"echo", "hi"}}, func(ch byte, p []byte) error {
		if ch != session.ChanStdout {
			t.Errorf("output on channel %d, want stdout", ch)
		}
		streamed = append(streamed, string(p))
		return nil
	})
	if err != nil || strings.Join(streamed, "") != "hi\n" {
		t.Errorf("streamed Exec = %v, output %q", err, streamed)
	}
	for _, tc := range []struct {
		name string
		req  session.ExecRequest
	}{
		{"nothing", session.ExecRequest{}},
		{"both", session.ExecRequest{Command: "ls", Argv: []string{"ls"}}},
		{"nul", session.ExecRequest{Command: "ls\x00"}},
		{"empty argv0", session.ExecRequest{Argv: []string{""}}},
		{"negative timeout", session.ExecRequest{Command: "ls", Timeout: -1}},
		{"timeout over max", session.ExecRequest{Command: "ls", Timeout: time.Hour}},
		{"negative output", session.ExecRequest{Command: "ls", MaxOutput: -1}},
		{"relative cwd", session.ExecRequest{Command: "ls", Cwd: "x"}},
	} {
		_, err := f.m.Exec(bg, "t1", "a", &tc.req, nil)
		wantClass(t, "Exec("+tc.name+")", err, errdefs.ErrInvalidArgument)
	}
	// The tenant's exec timeout is a ceiling and a default; its policy
	// refuses programs.
	mustCreate(t, f.m, "strict", &session.CreateRequest{ID: "s"})
	var got time.Duration
	f.rt.ExecFunc = func(ctx context.Context, sb *sessiontest.Sandbox, req *session.ExecRequest) (*session.ExecResult, error) {
		got = req.Timeout
		return &session.ExecResult{}, nil
	}
	if _, err := f.m.Exec(bg, "strict", "s", &session.ExecRequest{Command: "ls"}, nil); err != nil || got != 10*time.Second {
		t.Errorf("Exec for a tenant with a 10s ceiling = %v, ran with timeout %v", err, got)
	}
	_, err = f.m.Exec(bg, "strict", "s", &session.ExecRequest{Command: "ls", Timeout: 20 * time.Second}, nil)
	wantClass(t, "Exec(over the tenant's timeout)", err, errdefs.ErrResourceExhausted)
	_, err = f.m.Exec(bg, "strict", "s", &session.ExecRequest{Command: "rm -rf /"}, nil)
	wantClass(t, "Exec(denied program)", err, errdefs.ErrPermissionDenied)
	_, err = f.m.Exec(bg, "t1", "nope", &session.ExecRequest{Command: "ls"}, nil)
	wantClass(t, "Exec(missing session)", err, errdefs.ErrNotFound)
	if n := f.rt.Sandbox(info.Name).Execs(); n != 2 {
		t.Errorf("%d commands reached the sandbox, want 2", n)
	}
}

func TestRun(t *testing.T) {
	f := start(t, session.Config{}, nil)
	res, err := f.m.Run(bg, "t1", &session.RunRequest{Exec: session.ExecRequest{Command: "echo ran"}})
	if err != nil || string(res.Stdout) != "ran\n" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if n := f.rt.Starts(); n != 1 {
		t.Errorf("Run started %d sandboxes, want 1", n)
	}
	if f.m.Count() != 0 || len(f.rt.Running()) != 0 {
		t.Errorf("Run left %d sessions and sandboxes %v", f.m.Count(), f.rt.Running())
	}
	if _, err := f.m.Run(bg, "t1", &session.RunRequest{}); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Run(no command) = %v, want invalid_argument", err)
	}
	if n := f.rt.Starts(); n != 1 {
		t.Errorf("an invalid Run started a sandbox")
	}
}

func TestFilesAndProcesses(t *testing.T) {
	f := start(t, session.Config{MaxFileBytes: 10}, nil)
	mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "a"})
	if n, err := f.m.WriteFile(bg, "t1", "a", "/w/f", 0, strings.NewReader("hello")); err != nil || n != 5 {
		t.Fatalf("WriteFile = %d, %v", n, err)
	}
	_, err := f.m.WriteFile(bg, "t1", "a", "/w/big", 0, strings.NewReader("more than ten bytes"))
	wantClass(t, "WriteFile(over MaxFileBytes)", err, errdefs.ErrTooLarge)
	d, err := f.m.ReadFile(bg, "t1", "a", "/w/f")
	if err != nil || string(d.First) != "hello" {
		t.Fatalf("ReadFile = %v", err)
	}
	d.Close()
	if e, err := f.m.Mkdir(bg, "t1", "a", "/w"); err != nil || e.Type != "dir" {
		t.Errorf("Mkdir = %+v, %v", e, err)
	}
	if l, err := f.m.ListFiles(bg, "t1", "a", "/w"); err != nil || len(l) != 1 || l[0].Name != "f" {
		t.Errorf("ListFiles = %+v, %v", l, err)
	}
	if err := f.m.Remove(bg, "t1", "a", "/w/f", false); err != nil {
		t.Errorf("Remove = %v", err)
	}
	_, err = f.m.Stat(bg, "t1", "a", "/w/f")
	wantClass(t, "Stat(removed)", err, errdefs.ErrNotFound)
	if _, err := f.m.PutArchive(bg, "t1", "a", "/w", strings.NewReader("tar")); err != nil {
		t.Errorf("PutArchive = %v", err)
	}
	if d, err := f.m.GetArchive(bg, "t1", "a", "/w"); err != nil || string(d.First) != "tar" {
		t.Errorf("GetArchive = %v", err)
	} else {
		d.Close()
	}

	_, err = f.m.StartProcess(bg, "t1", "a", &session.StartProcessRequest{})
	wantClass(t, "StartProcess(nothing)", err, errdefs.ErrInvalidArgument)
	_, err = f.m.StartProcess(bg, "t1", "a", &session.StartProcessRequest{Command: "top", Cols: 20000})
	wantClass(t, "StartProcess(cols)", err, errdefs.ErrInvalidArgument)
	p, err := f.m.StartProcess(bg, "t1", "a", &session.StartProcessRequest{Command: "sleep 1000", TTY: true})
	if err != nil || !p.Running {
		t.Fatalf("StartProcess = %+v, %v", p, err)
	}
	wantClass(t, "ResizeProcess(0x0)", f.m.ResizeProcess(bg, "t1", "a", p.ID, 0, 0), errdefs.ErrInvalidArgument)
	if err := f.m.ResizeProcess(bg, "t1", "a", p.ID, 80, 24); err != nil {
		t.Errorf("ResizeProcess = %v", err)
	}
	if n, err := f.m.WriteStdin(bg, "t1", "a", p.ID, strings.NewReader("abc"), true); err != nil || n != 3 {
		t.Errorf("WriteStdin = %d, %v", n, err)
	}
	if err := f.m.SignalProcess(bg, "t1", "a", p.ID, 15); err != nil {
		t.Errorf("SignalProcess = %v", err)
	}
	var evs []session.OutputEvent
	if _, err := f.m.ProcessOutput(bg, "t1", "a", p.ID, 0, true, func(ev session.OutputEvent) error {
		evs = append(evs, ev)
		return nil
	}); err != nil || len(evs) != 1 || evs[0].Kind != "exit" || evs[0].Signal != 15 {
		t.Errorf("ProcessOutput = %v, events %+v; want one exit by signal 15", err, evs)
	}
	if l, err := f.m.ListProcesses(bg, "t1", "a"); err != nil || len(l) != 1 {
		t.Errorf("ListProcesses = %+v, %v", l, err)
	}
	if err := f.m.KillProcess(bg, "t1", "a", p.ID); err != nil {
		t.Errorf("KillProcess = %v", err)
	}
	_, err = f.m.GetProcess(bg, "t1", "a", p.ID)
	wantClass(t, "GetProcess(killed)", err, errdefs.ErrNotFound)
}

func TestSandboxDies(t *testing.T) {
	f := start(t, session.Config{}, nil)
	info := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "a"})
	f.rt.Crash(info.Name, "sandbox exited (killed by SIGKILL)")
	var got *session.Info
	for range 1000 { // the watcher marks it failed right away
		got, _ = f.m.Get(bg, "t1", "a")
		if got.State == session.StateFailed {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if got.State != session.StateFailed || !strings.Contains(got.Reason, "SIGKILL") || got.Usage != nil {
		t.Fatalf("Get after the sandbox died = %+v, want failed with the reason and no usage", got)
	}
	if rec, err := f.store.GetSession(bg, "t1", "a"); err != nil || rec.State != session.StateFailed {
		t.Errorf("stored record = %+v, %v; want failed", rec, err)
	}
	_, err := f.m.Exec(bg, "t1", "a", &session.ExecRequest{Command: "ls"}, nil)
	wantClass(t, "Exec(failed session)", err, errdefs.ErrConflict)
	// A failed session is deleted like any other, its debris with it.
	if err := f.m.Delete(bg, "t1", "a"); err != nil {
		t.Errorf("Delete(failed) = %v", err)
	}
	if left, _ := f.rt.Leftovers(); len(left) != 0 {
		t.Errorf("leftovers after deleting a failed session: %v", left)
	}
}

func TestSandboxDiesDuringCall(t *testing.T) {
	f := start(t, session.Config{}, nil)
	info := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "a"})
	f.rt.ExecFunc = func(ctx context.Context, sb *sessiontest.Sandbox, req *session.ExecRequest) (*session.ExecResult, error) {
		f.rt.Crash(info.Name, "sandbox exited (status 1)")
		return nil, errdefs.New(errdefs.ErrUnavailable, "lost the connection to the sandbox's agent")
	}
	_, err := f.m.Exec(bg, "t1", "a", &session.ExecRequest{Command: "ls"}, nil)
	wantClass(t, "Exec(sandbox died)", err, errdefs.ErrConflict)
}

func TestFailedRecordUpdateIsNotFatal(t *testing.T) {
	f := start(t, session.Config{}, nil)
	info := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "a"})
	f.store.Fail = func(op string, s *session.Session) error {
		if op == "update" {
			return errors.New("database is locked")
		}
		return nil
	}
	f.rt.Crash(info.Name, "sandbox exited")
	for range 1000 {
		if got, _ := f.m.Get(bg, "t1", "a"); got.State == session.StateFailed {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// The store kept "running"; the manager knows better, and deletes it.
	if got, _ := f.m.Get(bg, "t1", "a"); got.State != session.StateFailed {
		t.Errorf("State = %s, want failed", got.State)
	}
	if err := f.m.Delete(bg, "t1", "a"); err != nil {
		t.Errorf("Delete = %v", err)
	}
}

func TestReaper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, session.Config{ReapInterval: time.Second}, nil)
		idle := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "idle", IdleTTL: time.Minute})
		mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "used", IdleTTL: time.Minute})
		old := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "old", IdleTTL: time.Hour, MaxLifetime: 90 * time.Second})
		busy := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "busy", IdleTTL: time.Minute})
		// busy runs one command for five minutes.
		release := make(chan struct{})
		f.rt.ExecFunc = func(ctx context.Context, sb *sessiontest.Sandbox, req *session.ExecRequest) (*session.ExecResult, error) {
			if req.Command == "wait" {
				<-release
			}
			return &session.ExecResult{}, nil
		}
		go f.m.Exec(bg, "t1", "busy", &session.ExecRequest{Command: "wait", Timeout: time.Hour}, nil)
		for range 5 { // used is used every 30s: never idle for its minute
			time.Sleep(30 * time.Second)
			if _, err := f.m.Exec(bg, "t1", "used", &session.ExecRequest{Command: "true"}, nil); err != nil {
				t.Fatalf("Exec(used) at %v = %v", time.Since(idle.CreatedAt), err)
			}
			synctest.Wait()
		}
		// 150s on: idle expired at 60s, old at 90s; used and busy live.
		var ids []string
		for _, s := range f.m.List(bg, "t1") {
			ids = append(ids, s.ID)
		}
		if want := []string{"busy", "used"}; !slices.Equal(ids, want) {
			t.Errorf("sessions at 150s = %v, want %v", ids, want)
		}
		_, reaped, _ := f.obs.get()
		slices.Sort(reaped)
		if want := []string{session.ReapIdle, session.ReapLifetime}; !slices.Equal(reaped, want) {
			t.Errorf("reaped = %v, want %v", reaped, want)
		}
		for _, s := range []*session.Info{idle, old} {
			if f.rt.Sandbox(s.Name) != nil {
				t.Errorf("the sandbox of reaped session %s still runs", s.ID)
			}
		}
		// The store heard of the last use of sessions in use (every
		// flushEvery), so a restarted daemon does not expire them early.
		rec, err := f.store.GetSession(bg, "t1", "used")
		if err != nil || time.Since(rec.LastUsedAt) > time.Minute {
			t.Errorf("stored last use of used = %v, %v; want within the last minute", rec, err)
		}
		// busy's command ends; a minute later the session is idle and goes.
		close(release)
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if _, err := f.m.Get(bg, "t1", "busy"); !errdefs.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Get(busy) a minute after its command = %v, want not_found", err)
		}
		if f.rt.Sandbox(busy.Name) != nil {
			t.Errorf("busy's sandbox still runs")
		}
		f.m.Close(bg)
	})
}

func TestRecoverAdoption(t *testing.T) {
	f := start(t, session.Config{}, nil)
	keep := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "keep", Env: map[string]string{"A": "1"}})
	lost := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "lost"})
	failed := mustCreate(t, f.m, "t2", &session.CreateRequest{ID: "failed"})
	if _, err := f.m.Exec(bg, "t1", "keep", &session.ExecRequest{Command: "cd /srv"}, nil); err != nil {
		t.Fatal(err)
	}
	f.rt.Crash(failed.Name, "sandbox exited (status 2)")
	for range 1000 {
		if got, _ := f.m.Get(bg, "t2", "failed"); got.State == session.StateFailed {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := f.m.Run(bg, "t1", &session.RunRequest{Exec: session.ExecRequest{Command: "true"}}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Detach(bg); err != nil {
		t.Fatalf("Detach = %v", err)
	}
	// While the daemon was away: lost's sandbox died, a create was cut
	// short, a run's hidden session was left, and debris appeared.
	f.rt.Crash(lost.Name, "sandbox exited")
	f.store.Put(&session.Session{ID: "half", Tenant: "t1", Name: "halfname", State: session.StateCreating, CreatedAt: time.Now()})
	f.rt.AddLeftover("halfname")
	f.store.Put(&session.Session{ID: "run1", Tenant: "t1", Name: "runname", State: session.StateRunning, Pid: 5,
		Labels: map[string]string{"warren.dev/run": "1"}, CreatedAt: time.Now()})
	f.rt.AddLeftover("debris")
	f.images.Acquire("gone-sandbox", "base") // a lease nobody holds

	start(t, session.Config{}, f)
	got, err := f.m.Get(bg, "t1", "keep")
	if err != nil || got.State != session.StateRunning || got.Cwd != "/srv" || got.Pid != keep.Pid {
		t.Errorf("adopted session = %+v, %v; want running in /srv with pid %d", got, err, keep.Pid)
	}
	if sb := f.rt.Sandbox(keep.Name); sb == nil || sb.Adopted() != 1 {
		t.Errorf("keep's sandbox was not adopted once")
	}
	if _, err := f.m.Exec(bg, "t1", "keep", &session.ExecRequest{Command: "ls"}, nil); err != nil {
		t.Errorf("Exec in the adopted session = %v", err)
	}
	got, err = f.m.Get(bg, "t1", "lost")
	if err != nil || got.State != session.StateFailed || !strings.Contains(got.Reason, "did not survive") {
		t.Errorf("lost session = %+v, %v; want failed, with why", got, err)
	}
	if rec, _ := f.store.GetSession(bg, "t1", "lost"); rec == nil || rec.State != session.StateFailed {
		t.Errorf("lost session's record = %+v, want failed", rec)
	}
	if got, err := f.m.Get(bg, "t2", "failed"); err != nil || got.State != session.StateFailed {
		t.Errorf("failed session = %+v, %v; want still listed as failed", got, err)
	}
	for _, id := range []string{"half", "run1"} {
		if _, err := f.m.Get(bg, "t1", id); !errdefs.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Get(%s) = %v, want not_found", id, err)
		}
		if _, err := f.store.GetSession(bg, "t1", id); !errdefs.Is(err, errdefs.ErrNotFound) {
			t.Errorf("record of %s survived Recover", id)
		}
	}
	left, _ := f.rt.Leftovers()
	for _, n := range []string{"halfname", "runname", "debris", lost.Name} {
		if slices.Contains(left, n) {
			t.Errorf("leftover %s survived Recover", n)
		}
	}
	if !slices.Contains(left, failed.Name) {
		t.Errorf("the failed session's remains were removed before it was deleted")
	}
	leases := f.images.Leases()
	if _, ok := leases["gone-sandbox"]; ok {
		t.Errorf("a stale image lease survived Recover: %v", leases)
	}
	if leases[keep.Name] == "" {
		t.Errorf("the adopted session lost its image lease: %v", leases)
	}
	_, _, rec := f.obs.get()
	slices.Sort(rec)
	want := []string{session.ReconcileAdopted, session.ReconcileLost, session.ReconcileRemovedLeftover,
		session.ReconcileRemovedUnfinished, session.ReconcileRemovedUnfinished}
	if !slices.Equal(rec, want) {
		t.Errorf("Reconciled = %v, want %v", rec, want)
	}
}

func TestReconciler(t *testing.T) {
	f := start(t, session.Config{}, nil)
	info := mustCreate(t, f.m, "t1", &session.CreateRequest{})
	f.rt.AddLeftover("debris")
	f.m.Reconcile() // first sight: a suspect, perhaps a sandbox being created
	if left, _ := f.rt.Leftovers(); !slices.Contains(left, "debris") {
		t.Errorf("the reconciler removed debris on first sight")
	}
	f.m.Reconcile()
	left, _ := f.rt.Leftovers()
	if slices.Contains(left, "debris") || !slices.Contains(left, info.Name) {
		t.Errorf("leftovers after two passes = %v, want only the session's %s", left, info.Name)
	}
}

func TestWarmPool(t *testing.T) {
	f := start(t, session.Config{PoolSize: 2}, nil)
	waitPool := func(n int) {
		t.Helper()
		for range 2000 {
			if f.m.PoolSize() == n {
				return
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("PoolSize() = %d, want %d", f.m.PoolSize(), n)
	}
	waitPool(2)
	warm := f.m.WarmSandboxes()
	for _, n := range warm {
		sb := f.rt.Sandbox(n)
		if ok, _, _ := sb.Claimed(); ok || !sb.Config().Deferred {
			t.Errorf("warm sandbox %s is not deferred", n)
		}
	}
	// A create with default settings takes a warm sandbox.
	info := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "w", Env: map[string]string{"X": "y"}})
	if !slices.Contains(warm, info.Name) {
		t.Errorf("session %s got sandbox %s, not one of the warm %v", info.ID, info.Name, warm)
	}
	ok, host, env := f.rt.Sandbox(info.Name).Claimed()
	if !ok || host != "w" || !slices.Contains(env, "X=y") || !slices.Contains(env, "HOSTNAME=w") {
		t.Errorf("claimed warm sandbox: %v, hostname %q, env %v", ok, host, env)
	}
	if info.State != session.StateRunning || info.Cwd != "/workspace" {
		t.Errorf("warm session = %+v", info)
	}
	waitPool(2) // refilled
	// A create that asks for anything else starts cold.
	starts := f.rt.Starts()
	cold := mustCreate(t, f.m, "t1", &session.CreateRequest{Limits: session.Limits{MemoryMB: 256}})
	if slices.Contains(f.m.WarmSandboxes(), cold.Name) || f.rt.Starts() != starts+1 {
		t.Errorf("a create with other limits did not start cold")
	}
	// A warm sandbox that will not take the session is replaced by a cold
	// start; the caller does not notice.
	waitPool(2)
	for _, n := range f.m.WarmSandboxes() {
		f.rt.Sandbox(n).Claim(bg, "spoiled", nil)
	}
	if _, _, err := f.m.Create(bg, "t1", &session.CreateRequest{ID: "z"}); err != nil {
		t.Errorf("Create with spoiled warm sandboxes = %v", err)
	}
	// The reconciler leaves warm sandboxes alone.
	waitPool(2)
	f.m.Reconcile()
	f.m.Reconcile()
	for _, n := range f.m.WarmSandboxes() {
		if f.rt.Sandbox(n) == nil {
			t.Errorf("the reconciler removed warm sandbox %s", n)
		}
	}
	// Stop drains the pool, in both modes.
	f.m.Detach(bg)
	for _, n := range f.m.WarmSandboxes() {
		t.Errorf("warm sandbox %s outlived the manager", n)
	}
	for _, n := range warm {
		if n != info.Name && f.rt.Sandbox(n) != nil {
			t.Errorf("warm sandbox %s still runs after stop", n)
		}
	}
}

func TestImageChangesUnderPool(t *testing.T) {
	f := start(t, session.Config{PoolSize: 1}, nil)
	for range 2000 {
		if f.m.PoolSize() == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	stale := f.m.WarmSandboxes()
	f.images.Put(&image.Image{Name: "base", Digest: "sha256:b2", RootFS: "/images/b2", Shell: "/bin/sh"})
	info := mustCreate(t, f.m, "t1", &session.CreateRequest{})
	if slices.Contains(stale, info.Name) {
		t.Errorf("a session took a warm sandbox of the image's old content")
	}
	if got := f.rt.Sandbox(info.Name).Config().Lower; !slices.Equal(got, []string{"/images/b2"}) {
		t.Errorf("session runs on %v, want the new content", got)
	}
}

func TestCloseDeletesEverything(t *testing.T) {
	f := start(t, session.Config{}, nil)
	for i := range 5 {
		mustCreate(t, f.m, "t1", &session.CreateRequest{ID: fmt.Sprintf("s%d", i)})
	}
	if err := f.m.Close(bg); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if got := f.rt.Running(); len(got) != 0 {
		t.Errorf("sandboxes running after Close: %v", got)
	}
	if recs, _ := f.store.ListSessions(bg, ""); len(recs) != 0 {
		t.Errorf("records after Close: %d", len(recs))
	}
	_, _, err := f.m.Create(bg, "t1", &session.CreateRequest{})
	wantClass(t, "Create after Close", err, errdefs.ErrUnavailable)
	if f.m.Ready() {
		t.Errorf("Ready() after Close = true")
	}
}

func TestDiskFloor(t *testing.T) {
	f := start(t, session.Config{MinFreeDiskMB: 1 << 40}, nil) // more than any disk has
	_, _, err := f.m.Create(bg, "t1", &session.CreateRequest{})
	wantClass(t, "Create on a full disk", err, errdefs.ErrUnavailable)
	if d, err := f.m.Disk(); err != nil || d.Min != 1<<60 || d.Path != f.rt.StateDir() {
		t.Errorf("Disk() = %+v, %v", d, err)
	}
}

func TestCountsAndImageUsers(t *testing.T) {
	f := start(t, session.Config{}, nil)
	mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "a"})
	mustCreate(t, f.m, "t2", &session.CreateRequest{ID: "b"})
	byState, byTenant := f.m.Counts()
	if byState[session.StateRunning] != 2 || byTenant["t1"] != 1 || byTenant["t2"] != 1 {
		t.Errorf("Counts() = %v, %v", byState, byTenant)
	}
	if got := f.m.ImageUsers("base"); !slices.Equal(got, []string{"t1/a", "t2/b"}) {
		t.Errorf("ImageUsers(base) = %v", got)
	}
	if got := f.m.List(bg, ""); len(got) != 2 || got[0].CreatedAt.After(got[1].CreatedAt) {
		t.Errorf("List(all) = %v, want both, oldest first", got)
	}
}

func TestCreateIdempotentConflict(t *testing.T) {
	f := start(t, session.Config{}, nil)
	first := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "demo", Env: map[string]string{"A": "1"}, Limits: session.Limits{MemoryMB: 256}})
	// The same parameters, or none, return the session.
	for _, req := range []*session.CreateRequest{
		{ID: "demo"},
		{ID: "demo", Env: map[string]string{"A": "1"}, Limits: session.Limits{MemoryMB: 256}},
	} {
		info, created, err := f.m.Create(bg, "t1", req)
		if err != nil || created || info.Name != first.Name {
			t.Errorf("Create(%+v) = %+v, %v, %v; want the existing session", req, info, created, err)
		}
	}
	// Asking for something else under the same id is a conflict naming it.
	for _, tc := range []struct {
		req  *session.CreateRequest
		want string
	}{
		{&session.CreateRequest{ID: "demo", Image: "nosuchimage"}, "image"},
		{&session.CreateRequest{ID: "demo", Limits: session.Limits{MemoryMB: 512}}, "limits.memory_mb"},
		{&session.CreateRequest{ID: "demo", Env: map[string]string{"A": "2"}}, "env"},
		{&session.CreateRequest{ID: "demo", Cwd: "/tmp", Labels: map[string]string{"k": "v"}}, "cwd, labels"},
	} {
		_, _, err := f.m.Create(bg, "t1", tc.req)
		wantClass(t, fmt.Sprintf("Create(%+v)", tc.req), err, errdefs.ErrConflict)
		if err != nil && !strings.Contains(err.Error(), "different "+tc.want+";") {
			t.Errorf("Create(%+v) = %v, want it to name %q", tc.req, err, tc.want)
		}
	}
	if n := f.rt.Starts(); n != 1 {
		t.Errorf("%d sandboxes started, want 1", n)
	}
}
