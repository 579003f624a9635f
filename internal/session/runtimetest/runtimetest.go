// Package runtimetest is the conformance suite for session.Runtime and
// session.Sandbox. Every implementation runs it from its own tests
// (containerd's snapshotter testsuite is the model): the real one on the
// kernel (internal/sandbox, as root), the fake of package sessiontest
// without, so that the fake the manager's unit tests stand on keeps the
// real one's contract.
//
// Beyond what the interfaces document, the suite pins down:
//   - a started sandbox has a pid, is not Done, and answers;
//   - the shell's directory follows `cd` across calls, and an argv command
//     runs there;
//   - streamed output arrives on ChanStdout and the result then carries none;
//   - a missing file is ErrNotFound; a written file reads back exactly;
//   - a deferred sandbox takes the hostname and environment of its claim;
//   - Destroy ends the sandbox and, once Wait returns, nothing of it is
//     left among the leftovers;
//   - a detached sandbox is adopted by the next runtime, shell state and
//     files intact; an unknown one is ErrNotFound.
package runtimetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// Env is what the suite needs of an implementation.
type Env struct {
	// Runtime is the runtime under test.
	Runtime session.Runtime
	// Config returns the configuration of a sandbox called name, of an
	// image with a POSIX shell, echo, cat and sleep.
	Config func(name string) *session.SandboxConfig
	// Reopen returns a runtime over the same state, as the next daemon
	// would have.
	Reopen func(t *testing.T) session.Runtime
}

var serial atomic.Int64

// Run runs the suite; newEnv builds a fresh environment for each case.
func Run(t *testing.T, newEnv func(t *testing.T) *Env) {
	t.Helper()
	for _, tc := range []struct {
		name string
		test func(t *testing.T, e *Env)
	}{
		{"StartExecDestroy", testStartExecDestroy},
		{"Files", testFiles},
		{"Processes", testProcesses},
		{"DeferredClaim", testDeferredClaim},
		{"DetachAdopt", testDetachAdopt},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, newEnv(t)) })
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// start starts a sandbox that is destroyed when the test ends.
func start(t *testing.T, e *Env, deferred bool) session.Sandbox {
	t.Helper()
	cfg := e.Config(fmt.Sprintf("rtt%d", serial.Add(1)))
	cfg.Deferred = deferred
	sb, err := e.Runtime.Start(ctxFor(t), cfg)
	if err != nil {
		t.Fatalf("Start(%s) = %v", cfg.Name, err)
	}
	t.Cleanup(func() {
		if err := sb.Destroy(context.Background()); err != nil {
			t.Errorf("Destroy(%s) = %v", sb.Name(), err)
		}
		e.Runtime.Wait()
	})
	return sb
}

func exec(t *testing.T, sb session.Sandbox, req *session.ExecRequest) *session.ExecResult {
	t.Helper()
	if req.Timeout == 0 {
		req.Timeout = 10 * time.Second
	}
	if req.MaxOutput == 0 {
		req.MaxOutput = 1 << 20
	}
	res, err := sb.Exec(ctxFor(t), req, nil)
	if err != nil {
		t.Fatalf("Exec(%q %q) = %v", req.Command, req.Argv, err)
	}
	return res
}

func testStartExecDestroy(t *testing.T, e *Env) {
	ctx := ctxFor(t)
	cfg := e.Config(fmt.Sprintf("rtt%d", serial.Add(1)))
	sb, err := e.Runtime.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	if sb.Name() != cfg.Name || sb.Pid() <= 0 {
		t.Errorf("Name, Pid = %q, %d; want %q and a pid", sb.Name(), sb.Pid(), cfg.Name)
	}
	select {
	case <-sb.Done():
		t.Fatalf("a started sandbox is done: %v", sb.ExitErr())
	default:
	}
	if res := exec(t, sb, &session.ExecRequest{Command: "echo hi"}); res.ExitCode != 0 || string(res.Stdout) != "hi\n" {
		t.Errorf("Exec(echo hi) = %d, %q", res.ExitCode, res.Stdout)
	}
	exec(t, sb, &session.ExecRequest{Command: "cd /tmp"})
	if cwd, err := sb.Cwd(ctx); err != nil || cwd != "/tmp" {
		t.Errorf("Cwd after cd /tmp = %q, %v", cwd, err)
	}
	// An argv command runs in the shell's directory.
	if res := exec(t, sb, &session.ExecRequest{Argv: []string{"echo", "argv"}}); string(res.Stdout) != "argv\n" || res.Cwd != "/tmp" {
		t.Errorf("Exec(argv echo) = %q, cwd %q; want argv in /tmp", res.Stdout, res.Cwd)
	}
	var streamed bytes.Buffer
	res, err := sb.Exec(ctx, &session.ExecRequest{Command: "echo out", Timeout: 10 * time.Second, MaxOutput: 1 << 20},
		func(ch byte, p []byte) error {
			if ch != session.ChanStdout {
				t.Errorf("streamed output on channel %d, want ChanStdout", ch)
			}
			streamed.Write(p)
			return nil
		})
	if err != nil || streamed.String() != "out\n" || len(res.Stdout) != 0 {
		t.Errorf("streamed Exec = %v, streamed %q, result stdout %q", err, streamed.String(), res.Stdout)
	}
	if _, err := sb.Usage(); err != nil {
		t.Errorf("Usage = %v", err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatalf("Destroy = %v", err)
	}
	select {
	case <-sb.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("Done is open after Destroy")
	}
	if sb.ExitErr() == nil {
		t.Errorf("ExitErr after Destroy = nil")
	}
	e.Runtime.Wait()
	if left, err := e.Runtime.Leftovers(); err != nil || slices.Contains(left, cfg.Name) {
		t.Errorf("Leftovers after Destroy and Wait = %v, %v; want no %s", left, err, cfg.Name)
	}
}

func testFiles(t *testing.T, e *Env) {
	ctx := ctxFor(t)
	sb := start(t, e, false)
	if _, err := sb.Stat(ctx, "/tmp/nope"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Stat(missing) = %v, want not_found", err)
	}
	if n, err := sb.WriteFile(ctx, "/tmp/d/f", 0o600, 1<<20, strings.NewReader("data")); err != nil || n != 4 {
		t.Fatalf("WriteFile = %d, %v", n, err)
	}
	if en, err := sb.Stat(ctx, "/tmp/d/f"); err != nil || en.Type != "file" || en.Size != 4 || en.Name != "f" {
		t.Errorf("Stat = %+v, %v", en, err)
	}
	if l, err := sb.List(ctx, "/tmp/d"); err != nil || len(l) != 1 || l[0].Name != "f" {
		t.Errorf("List = %+v, %v", l, err)
	}
	d, first, err := sb.ReadFile(ctx, "/tmp/d/f", 1<<20)
	if err != nil {
		t.Fatalf("ReadFile = %v", err)
	}
	rest, _ := io.ReadAll(d)
	if got := string(first) + string(rest); got != "data" || d.Err() != nil {
		t.Errorf("ReadFile = %q, %v", got, d.Err())
	}
	d.Close()
	if err := sb.Mkdir(ctx, "/tmp/e"); err != nil {
		t.Errorf("Mkdir = %v", err)
	}
	if en, err := sb.Stat(ctx, "/tmp/e"); err != nil || en.Type != "dir" {
		t.Errorf("Stat(dir) = %+v, %v", en, err)
	}
	if err := sb.Remove(ctx, "/tmp/d/f", false); err != nil {
		t.Errorf("Remove = %v", err)
	}
	if _, _, err := sb.ReadFile(ctx, "/tmp/d/f", 1<<20); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("ReadFile(removed) = %v, want not_found", err)
	}
}

func testProcesses(t *testing.T, e *Env) {
	ctx := ctxFor(t)
	sb := start(t, e, false)
	p, err := sb.StartProcess(ctx, &session.StartProcessRequest{Command: "sleep 100", Stdin: true})
	if err != nil || !p.Running || p.ID == "" {
		t.Fatalf("StartProcess = %+v, %v", p, err)
	}
	if l, err := sb.ListProcesses(ctx); err != nil || len(l) != 1 || l[0].ID != p.ID {
		t.Errorf("ListProcesses = %+v, %v", l, err)
	}
	if err := sb.KillProcess(ctx, p.ID); err != nil {
		t.Errorf("KillProcess = %v", err)
	}
	if _, err := sb.GetProcess(ctx, p.ID); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("GetProcess(killed) = %v, want not_found", err)
	}
}

func testDeferredClaim(t *testing.T, e *Env) {
	ctx := ctxFor(t)
	sb := start(t, e, true)
	if err := sb.Claim(ctx, "claimed", []string{"PATH=/usr/bin:/bin", "WHO=me"}); err != nil {
		t.Fatalf("Claim = %v", err)
	}
	if res := exec(t, sb, &session.ExecRequest{Command: "echo $WHO"}); string(res.Stdout) != "me\n" {
		t.Errorf("the claim's environment: echo $WHO = %q", res.Stdout)
	}
	if res := exec(t, sb, &session.ExecRequest{Command: "cat /proc/sys/kernel/hostname"}); string(res.Stdout) != "claimed\n" {
		t.Errorf("the claim's hostname = %q", res.Stdout)
	}
}

func testDetachAdopt(t *testing.T, e *Env) {
	ctx := ctxFor(t)
	cfg := e.Config(fmt.Sprintf("rtt%d", serial.Add(1)))
	sb, err := e.Runtime.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	exec(t, sb, &session.ExecRequest{Command: "cd /tmp"})
	if _, err := sb.WriteFile(ctx, "/tmp/kept", 0, 1<<20, strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	sb.Detach()
	next := e.Reopen(t)
	if _, err := next.Adopt(ctx, "rtt-unknown", sb.Pid()); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Adopt(unknown) = %v, want not_found", err)
	}
	adopted, err := next.Adopt(ctx, cfg.Name, sb.Pid())
	if err != nil {
		next.Remove(cfg.Name)
		t.Fatalf("Adopt = %v", err)
	}
	t.Cleanup(func() {
		if err := adopted.Destroy(context.Background()); err != nil {
			t.Errorf("Destroy(adopted) = %v", err)
		}
		next.Wait()
	})
	if cwd, err := adopted.Cwd(ctx); err != nil || cwd != "/tmp" {
		t.Errorf("Cwd of the adopted sandbox = %q, %v; want /tmp", cwd, err)
	}
	if res := exec(t, adopted, &session.ExecRequest{Command: "cat /tmp/kept"}); string(res.Stdout) != "kept" {
		t.Errorf("a file of the adopted sandbox = %q, want kept", res.Stdout)
	}
	if adopted.Pid() != sb.Pid() {
		t.Errorf("adopted pid %d, want %d", adopted.Pid(), sb.Pid())
	}
}
