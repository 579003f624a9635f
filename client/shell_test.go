package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
	"github.com/warrenhq/warren/api"
)

// wsMessage is a message the fake shell received.
type wsMessage struct {
	Binary bool
	Data   string
}

// fakeShell is a daemon's shell endpoint: it accepts the WebSocket and runs
// script on it, recording the handshake request.
type fakeShell struct {
	mu       sync.Mutex
	path     string
	query    url.Values
	auth     string
	received []wsMessage // what a script keeps of the client's messages
}

func newFakeShell(t *testing.T, script func(ctx context.Context, c *websocket.Conn, f *fakeShell)) (*httptest.Server, *fakeShell) {
	t.Helper()
	f := &fakeShell{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.path, f.query, f.auth = r.URL.EscapedPath(), r.URL.Query(), r.Header.Get("Authorization")
		f.mu.Unlock()
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Errorf("accept WebSocket: %v", err)
			return
		}
		defer c.CloseNow()
		script(r.Context(), c, f)
	}))
	t.Cleanup(srv.Close)
	return srv, f
}

// sendJSON writes a text message.
func sendJSON(t *testing.T, ctx context.Context, c *websocket.Conn, m api.ShellMessage) {
	t.Helper()
	b, _ := json.Marshal(m)
	if err := c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Errorf("write %s: %v", b, err)
	}
}

// readUntil reads messages until one with data stop, and returns them all.
func readUntil(ctx context.Context, c *websocket.Conn, stop string) ([]wsMessage, error) {
	var got []wsMessage
	for {
		typ, b, err := c.Read(ctx)
		if err != nil {
			return got, err
		}
		got = append(got, wsMessage{typ == websocket.MessageBinary, string(b)})
		if string(b) == stop {
			return got, nil
		}
	}
}

func TestShell(t *testing.T) {
	checkGoroutines(t)
	srv, f := newFakeShell(t, func(ctx context.Context, c *websocket.Conn, f *fakeShell) {
		sendJSON(t, ctx, c, api.ShellMessage{Type: "process", ID: "p3"})
		// The replay of a reattach: more than the default read limit.
		c.Write(ctx, websocket.MessageBinary, []byte(strings.Repeat("r", 40<<10)))
		c.Write(ctx, websocket.MessageText, []byte(`{"type":"news"}`)) // unknown: skipped
		c.Write(ctx, websocket.MessageText, []byte(`not json`))
		c.Write(ctx, websocket.MessageBinary, nil)
		received, err := readUntil(ctx, c, "exit\r")
		f.mu.Lock()
		f.received = received
		f.mu.Unlock()
		if err != nil {
			t.Errorf("read client messages: %v", err)
			return
		}
		c.Write(ctx, websocket.MessageBinary, []byte("\x1b[0mbye\r\n"))
		code := 3
		sendJSON(t, ctx, c, api.ShellMessage{Type: "exit", ExitCode: &code})
		c.Close(websocket.StatusNormalClosure, "")
	})
	c := New(srv.URL+"/", WithToken("s3cret"))
	sh, err := c.Shell(t.Context(), "demo", ShellOptions{Process: "p3", Cols: 120, Rows: 40, KillOnClose: true})
	if err != nil {
		t.Fatalf("Shell() error: %v", err)
	}
	defer sh.Close()
	if got := sh.ProcessID(); got != "p3" {
		t.Errorf("ProcessID() = %q, want p3", got)
	}
	if _, _, exited := sh.ExitCode(); exited {
		t.Errorf("ExitCode() says exited before the shell did")
	}
	if err := sh.Resize(100, 30); err != nil {
		t.Fatalf("Resize() error: %v", err)
	}
	if _, err := sh.Write([]byte("\x00ls\r")); err != nil {
		t.Fatalf("Write() error: %v", err)
	}
	if _, err := sh.Write([]byte("exit\r")); err != nil {
		t.Fatalf("Write() error: %v", err)
	}
	out, err := io.ReadAll(sh)
	if err != nil {
		t.Fatalf("reading the shell's output: %v", err)
	}
	if want := strings.Repeat("r", 40<<10) + "\x1b[0mbye\r\n"; string(out) != want {
		t.Errorf("output = %d bytes ending %q, want %d bytes ending %q", len(out), out[max(0, len(out)-10):], len(want), want[len(want)-10:])
	}
	if code, sig, exited := sh.ExitCode(); code != 3 || sig != "" || !exited {
		t.Errorf("ExitCode() = %d, %q, %v; want 3, none, true", code, sig, exited)
	}
	if err := sh.Close(); err != nil {
		t.Errorf("Close() after the shell exited: %v", err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	wantReceived := []wsMessage{{false, `{"type":"resize","cols":100,"rows":30}`}, {true, "\x00ls\r"}, {true, "exit\r"}}
	if diff := cmp.Diff(wantReceived, f.received); diff != "" {
		t.Errorf("messages the daemon received mismatch (-want +got):\n%s", diff)
	}
	wantQuery := url.Values{"process": {"p3"}, "cols": {"120"}, "rows": {"40"}, "kill_on_close": {"true"}}
	if f.path != "/v1/sessions/demo/shell" || !cmp.Equal(wantQuery, f.query) || f.auth != "Bearer s3cret" {
		t.Errorf("handshake = %s?%v with %q, want /v1/sessions/demo/shell?%v with the token", f.path, f.query, f.auth, wantQuery)
	}
}

func TestShellNewWithoutOptions(t *testing.T) {
	checkGoroutines(t)
	srv, f := newFakeShell(t, func(ctx context.Context, c *websocket.Conn, _ *fakeShell) {
		sendJSON(t, ctx, c, api.ShellMessage{Type: "process", ID: "p1"})
		code := 137
		sendJSON(t, ctx, c, api.ShellMessage{Type: "exit", ExitCode: &code, Signal: "SIGKILL"})
		c.Close(websocket.StatusNormalClosure, "")
	})
	sh, err := New(srv.URL).Shell(t.Context(), "demo", ShellOptions{})
	if err != nil {
		t.Fatalf("Shell() error: %v", err)
	}
	defer sh.Close()
	if n, err := sh.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Errorf("Read() = %d, %v; want 0, io.EOF", n, err)
	}
	if code, sig, exited := sh.ExitCode(); code != 137 || sig != "SIGKILL" || !exited {
		t.Errorf("ExitCode() = %d, %q, %v; want 137, SIGKILL, true", code, sig, exited)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.query) != 0 || f.auth != "" {
		t.Errorf("handshake query %v, auth %q; want neither", f.query, f.auth)
	}
}

func TestShellRefused(t *testing.T) {
	srv, _ := fakeDaemon(t, 429, http.Header{"Content-Type": {"application/json"}, "Retry-After": {"2"}},
		`{"error":{"code":"resource_exhausted","message":"the session holds its maximum of 16 PTYs"}}`)
	_, err := New(srv.URL).Shell(t.Context(), "demo", ShellOptions{})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Shell() error = %v (%T), want *Error", err, err)
	}
	want := &Error{StatusCode: 429, Code: "resource_exhausted", Message: "the session holds its maximum of 16 PTYs", RetryAfter: 2 * time.Second}
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("Shell() error mismatch (-want +got):\n%s", diff)
	}
}

// TestShellFailedAfterUpgrade: a shell that cannot start once the
// connection is upgraded (the daemon starts nothing before) is the same
// *Error as a refusal before the upgrade.
func TestShellFailedAfterUpgrade(t *testing.T) {
	checkGoroutines(t)
	srv, _ := newFakeShell(t, func(ctx context.Context, c *websocket.Conn, _ *fakeShell) {
		sendJSON(t, ctx, c, api.ShellMessage{Type: "error", Error: &api.ErrorBody{Code: "resource_exhausted", Message: "the session has 16 terminals running, the most it may"}})
		c.Close(websocket.StatusTryAgainLater, "resource_exhausted")
	})
	_, err := New(srv.URL).Shell(t.Context(), "demo", ShellOptions{})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Shell() error = %v (%T), want *Error", err, err)
	}
	want := &Error{StatusCode: 429, Code: "resource_exhausted", Message: "the session has 16 terminals running, the most it may"}
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("Shell() error mismatch (-want +got):\n%s", diff)
	}
}

func TestShellConnectionLost(t *testing.T) {
	checkGoroutines(t)
	srv, _ := newFakeShell(t, func(ctx context.Context, c *websocket.Conn, _ *fakeShell) {
		sendJSON(t, ctx, c, api.ShellMessage{Type: "process", ID: "p2"})
		c.Write(ctx, websocket.MessageBinary, []byte("$ "))
		c.Close(websocket.StatusGoingAway, "daemon shutting down")
	})
	sh, err := New(srv.URL).Shell(t.Context(), "demo", ShellOptions{})
	if err != nil {
		t.Fatalf("Shell() error: %v", err)
	}
	defer sh.Close()
	out, err := io.ReadAll(sh)
	if string(out) != "$ " || err == nil || websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("ReadAll() = %q, %v; want %q and the close status going away", out, err, "$ ")
	}
	if _, _, exited := sh.ExitCode(); exited {
		t.Errorf("ExitCode() says exited; the connection was only lost")
	}
}

func TestShellContextBoundsConnection(t *testing.T) {
	checkGoroutines(t)
	srv, _ := newFakeShell(t, func(ctx context.Context, c *websocket.Conn, _ *fakeShell) {
		sendJSON(t, ctx, c, api.ShellMessage{Type: "process", ID: "p2"})
		c.Read(ctx) // until the client goes
	})
	ctx, cancel := context.WithCancel(t.Context())
	sh, err := New(srv.URL).Shell(ctx, "demo", ShellOptions{})
	if err != nil {
		t.Fatalf("Shell() error: %v", err)
	}
	defer sh.Close()
	done := make(chan error, 1)
	go func() {
		_, err := sh.Read(make([]byte, 10))
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Read() after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read() still blocked after the context was canceled")
	}
}

func TestWSURL(t *testing.T) {
	tests := []struct{ base, want string }{
		{"http://127.0.0.1:7433", "ws://127.0.0.1:7433/v1/sessions/a%2Fb/shell?rows=1"},
		{"https://warren.example/api/", "wss://warren.example/api/v1/sessions/a%2Fb/shell?rows=1"},
	}
	for _, tc := range tests {
		got, err := New(tc.base).wsURL(sessionPath("a/b", "/shell"), url.Values{"rows": {"1"}})
		if err != nil || got != tc.want {
			t.Errorf("wsURL() of %s = %q, %v; want %q", tc.base, got, err, tc.want)
		}
	}
	if _, err := New("ftp://x").wsURL("/v1", nil); err == nil {
		t.Errorf("wsURL() of ftp://x: no error")
	}
}

func TestShellExitBeforeClose(t *testing.T) {
	checkGoroutines(t)
	srv, _ := newFakeShell(t, func(ctx context.Context, c *websocket.Conn, _ *fakeShell) {
		sendJSON(t, ctx, c, api.ShellMessage{Type: "process", ID: "p1"})
		c.Write(ctx, websocket.MessageBinary, []byte("bye\r\n"))
		code := 1
		sendJSON(t, ctx, c, api.ShellMessage{Type: "exit", ExitCode: &code})
		c.Read(ctx) // the daemon is slow to close: the client closes first
	})
	sh, err := New(srv.URL).Shell(t.Context(), "demo", ShellOptions{})
	if err != nil {
		t.Fatalf("Shell() error: %v", err)
	}
	out, err := io.ReadAll(sh)
	if string(out) != "bye\r\n" || err != nil {
		t.Errorf("ReadAll() = %q, %v; want %q and the end after the exit message", out, err, "bye\r\n")
	}
	if code, _, exited := sh.ExitCode(); code != 1 || !exited {
		t.Errorf("ExitCode() = %d, %v; want 1, true", code, exited)
	}
	if err := sh.Close(); err != nil {
		t.Errorf("Close() error: %v", err)
	}
}

// checkGoroutines fails t if goroutines it started outlive it (by the end
// of its cleanups, with a little time for closed connections to wind down).
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
	})
}
