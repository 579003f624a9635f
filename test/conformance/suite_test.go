package conformance

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// wantTransports are the transports every build must cover: an adapter
// that goes missing fails the suite instead of shrinking it.
var wantTransports = []string{"connect", "grpc", "mcp-http", "mcp-stdio", "rest"}

// maxFileBytes and maxSessions are the daemon's limits in the suite, small
// so that the scenarios can hit them.
const (
	maxFileBytes = 1 << 20
	maxSessions  = 3
)

func TestTransportsRegistered(t *testing.T) {
	if got := transports(); !slices.Equal(got, wantTransports) {
		t.Errorf("registered transports %q, want %q", got, wantTransports)
	}
}

// TestConformance runs the same scenarios over every transport, each
// against a daemon of its own.
func TestConformance(t *testing.T) {
	for _, name := range transports() {
		t.Run(name, func(t *testing.T) {
			h := daemontest.Start(t, func(c *config.Config) {
				c.Session.MaxFileBytes = maxFileBytes
				c.Session.MaxSessions = maxSessions
			})
			tr := registry[name](t, h)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for _, sc := range scenarios {
				if !t.Run(sc.name, func(t *testing.T) { sc.run(ctx, t, tr) }) {
					// Later scenarios assume the session the earlier ones
					// left behind.
					if sc.fatal {
						t.FailNow()
					}
				}
			}
		})
	}
}

type scenario struct {
	name  string
	fatal bool // the scenarios after it cannot run if it fails
	run   func(ctx context.Context, t *testing.T, tr Transport)
}

// sid is the session the scenarios share.
const sid = "conf"

// wantCode checks that err carries the error class code.
func wantCode(t *testing.T, tr Transport, what string, err error, code string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %s", what, code)
		return
	}
	if got := tr.Code(err); got != code {
		t.Errorf("%s: error %v of class %q, want %q", what, err, got, code)
	}
}

var scenarios = []scenario{
	{name: "create", fatal: true, run: func(ctx context.Context, t *testing.T, tr Transport) {
		if err := tr.CreateSession(ctx, sid); err != nil {
			t.Fatalf("CreateSession(%q): %v", sid, err)
		}
		// Creating an existing id is idempotent.
		if err := tr.CreateSession(ctx, sid); err != nil {
			t.Errorf("CreateSession(%q) again: %v", sid, err)
		}
		state, err := tr.GetSession(ctx, sid)
		if err != nil || state != "running" {
			t.Errorf("GetSession = %q, %v; want running", state, err)
		}
		ids, err := tr.ListSessions(ctx)
		if err != nil || !slices.Contains(ids, sid) {
			t.Errorf("ListSessions = %q, %v; want it to hold %q", ids, err, sid)
		}
	}},
	{name: "exec keeps state", run: func(ctx context.Context, t *testing.T, tr Transport) {
		res, err := tr.Exec(ctx, sid, "cd /tmp && export CONF_A=1 && echo hi && echo oops >&2")
		if err != nil || res.Stdout != "hi\n" || res.Stderr != "oops\n" || res.ExitCode != 0 {
			t.Fatalf("first exec = %+v, %v", res, err)
		}
		res, err = tr.Exec(ctx, sid, "pwd; echo $CONF_A; sh -c 'exit 7'")
		if err != nil || res.Stdout != "/tmp\n1\n" || res.ExitCode != 7 {
			t.Errorf("second exec = %+v, %v; want /tmp, 1 and exit 7", res, err)
		}
		if res != nil && (res.TimedOut || res.Truncated) {
			t.Errorf("second exec timed out or was truncated: %+v", res)
		}
	}},
	{name: "exec stream", run: func(ctx context.Context, t *testing.T, tr Transport) {
		chunks, res, err := tr.ExecStream(ctx, sid, "echo a; sleep 0.1; echo b >&2; echo c; exit 3")
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut strings.Builder
		for _, c := range chunks {
			switch c.Stream {
			case "stdout":
				out.WriteString(c.Data)
			case "stderr":
				errOut.WriteString(c.Data)
			default:
				t.Errorf("chunk of stream %q", c.Stream)
			}
		}
		if out.String() != "a\nc\n" || errOut.String() != "b\n" || res.ExitCode != 3 {
			t.Errorf("streamed stdout %q, stderr %q, result %+v; want a c, b and exit 3", out.String(), errOut.String(), res)
		}
		// exit ended the shell; the session goes on.
		if res, err := tr.Exec(ctx, sid, "echo still"); err != nil || res.Stdout != "still\n" {
			t.Errorf("exec after the stream = %+v, %v", res, err)
		}
	}},
	{name: "process output from an offset", run: func(ctx context.Context, t *testing.T, tr Transport) {
		pid, err := tr.StartProcess(ctx, sid, "for i in 1 2 3; do echo line$i; sleep 0.05; done")
		if err != nil || pid == "" {
			t.Fatalf("StartProcess = %q, %v", pid, err)
		}
		data, exit, err := tr.ProcessOutput(ctx, sid, pid, 0, true)
		if err != nil || string(data) != "line1\nline2\nline3\n" || exit == nil || *exit != 0 {
			t.Fatalf("ProcessOutput(0, follow) = %q, exit %v, %v", data, exit, err)
		}
		data, exit, err = tr.ProcessOutput(ctx, sid, pid, 6, false)
		if err != nil || string(data) != "line2\nline3\n" || exit == nil {
			t.Errorf("ProcessOutput(6) of an ended process = %q, exit %v, %v; want the rest and the exit", data, exit, err)
		}
		_, _, err = tr.ProcessOutput(ctx, sid, "p-missing", 0, false)
		wantCode(t, tr, "output of a missing process", err, "not_found")
	}},
	{name: "files", run: func(ctx context.Context, t *testing.T, tr Transport) {
		content := []byte("print('hello')\n\x00binary\xff")
		if err := tr.WriteFile(ctx, sid, "conf/app.py", content); err != nil {
			t.Fatal(err)
		}
		got, err := tr.ReadFile(ctx, sid, "conf/app.py")
		if err != nil || !bytes.Equal(got, content) {
			t.Errorf("ReadFile = %q, %v; want %q", got, err, content)
		}
		// Relative paths are under /workspace, where the shell sees them.
		if res, err := tr.Exec(ctx, sid, "head -1 /workspace/conf/app.py"); err != nil || res.Stdout != "print('hello')\n" {
			t.Errorf("the shell sees %+v, %v", res, err)
		}
		names, err := tr.ListFiles(ctx, sid, "conf")
		if err != nil || !slices.Equal(names, []string{"app.py"}) {
			t.Errorf("ListFiles(conf) = %q, %v", names, err)
		}
		if err := tr.DeleteFile(ctx, sid, "conf/app.py"); err != nil {
			t.Fatal(err)
		}
		_, err = tr.ReadFile(ctx, sid, "conf/app.py")
		wantCode(t, tr, "reading a deleted file", err, "not_found")
	}},
	{name: "errors", run: func(ctx context.Context, t *testing.T, tr Transport) {
		_, err := tr.Exec(ctx, "no-such-session", "true")
		wantCode(t, tr, "exec in a missing session", err, "not_found")
		_, err = tr.GetSession(ctx, "no-such-session")
		wantCode(t, tr, "get a missing session", err, "not_found")
		err = tr.DeleteSession(ctx, "no-such-session")
		wantCode(t, tr, "delete a missing session", err, "not_found")
		err = tr.CreateSession(ctx, "Not Valid!")
		wantCode(t, tr, "create with a bad id", err, "invalid_argument")
		_, err = tr.ReadFile(ctx, sid, "../../etc/passwd/x")
		if err == nil {
			t.Errorf("reading a path that escapes: no error")
		}
		err = tr.WriteFile(ctx, sid, "big.bin", bytes.Repeat([]byte{'x'}, maxFileBytes+1))
		wantCode(t, tr, "a file past the limit", err, "too_large")
		if _, err := tr.ReadFile(ctx, sid, "big.bin"); tr.Code(err) != "not_found" {
			t.Errorf("a refused write left a file: %v", err)
		}
	}},
	{name: "session limit", run: func(ctx context.Context, t *testing.T, tr Transport) {
		var made []string
		defer func() {
			for _, id := range made {
				tr.DeleteSession(ctx, id)
			}
		}()
		for i := 1; i < maxSessions; i++ {
			id := "extra" + string(rune('0'+i))
			if err := tr.CreateSession(ctx, id); err != nil {
				t.Fatalf("session %d of %d: %v", i+1, maxSessions, err)
			}
			made = append(made, id)
		}
		err := tr.CreateSession(ctx, "one-too-many")
		wantCode(t, tr, "a session past the limit", err, "resource_exhausted")
	}},
	{name: "delete", run: func(ctx context.Context, t *testing.T, tr Transport) {
		if err := tr.DeleteSession(ctx, sid); err != nil {
			t.Fatal(err)
		}
		_, err := tr.GetSession(ctx, sid)
		wantCode(t, tr, "get after delete", err, "not_found")
		ids, err := tr.ListSessions(ctx)
		if err != nil || len(ids) != 0 {
			t.Errorf("ListSessions after delete = %q, %v", ids, err)
		}
	}},
}
