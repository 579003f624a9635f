package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/api"
)

// wsMessage is a message the fake shell received.
type wsMessage struct {
	Binary bool
	Data   string
}

// shellServer is a daemon whose /v1/sessions/demo/shell runs script on the
// WebSocket; it records the handshake. Other paths answer not_found.
type shellServer struct {
	mu    sync.Mutex
	query url.Values
	auth  string
}

func newShellServer(t *testing.T, script func(ctx context.Context, c *websocket.Conn)) (*httptest.Server, *shellServer) {
	t.Helper()
	s := &shellServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/sessions/demo/shell" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			w.Write([]byte(`{"error":{"code":"not_found","message":"session \"nope\" not found"}}`))
			return
		}
		s.mu.Lock()
		s.query, s.auth = r.URL.Query(), r.Header.Get("Authorization")
		s.mu.Unlock()
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Errorf("accept WebSocket: %v", err)
			return
		}
		defer c.CloseNow()
		script(r.Context(), c)
	}))
	t.Cleanup(srv.Close)
	return srv, s
}

func send(ctx context.Context, c *websocket.Conn, m api.ShellMessage) error {
	b, _ := json.Marshal(m)
	return c.Write(ctx, websocket.MessageText, b)
}

// readInput reads the client's messages until one with data stop.
func readInput(ctx context.Context, c *websocket.Conn, stop string) ([]wsMessage, error) {
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

func TestShellCommand(t *testing.T) {
	checkGoroutines(t)
	received := make(chan []wsMessage, 1)
	srv, s := newShellServer(t, func(ctx context.Context, c *websocket.Conn) {
		send(ctx, c, api.ShellMessage{Type: "process", ID: "p3"})
		c.Write(ctx, websocket.MessageBinary, []byte("$ "))
		got, err := readInput(ctx, c, "\x04")
		received <- got
		if err != nil {
			t.Errorf("read input: %v", err)
			return
		}
		c.Write(ctx, websocket.MessageBinary, []byte("hi\r\n\xff"))
		code := 5
		send(ctx, c, api.ShellMessage{Type: "exit", ExitCode: &code})
		c.Close(websocket.StatusNormalClosure, "")
	})
	stdout, stderr, code := runCLI(t, srv, "echo hi\r", "shell", "demo", "--process", "p3", "--kill-on-close")
	if code != 5 || stdout != "$ hi\r\n\xff" || stderr != "" {
		t.Errorf("warren shell = exit %d, stdout %q, stderr %q; want 5, %q, none", code, stdout, stderr, "$ hi\r\n\xff")
	}
	// Stdin is no terminal: its bytes, then an end of input; no resize.
	want := []wsMessage{{true, "echo hi\r"}, {true, "\x04"}}
	if diff := cmp.Diff(want, <-received); diff != "" {
		t.Errorf("input mismatch (-want +got):\n%s", diff)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if wantQuery := (url.Values{"process": {"p3"}, "kill_on_close": {"true"}}); !cmp.Equal(wantQuery, s.query) || s.auth != "Bearer env-token" {
		t.Errorf("handshake query %v, auth %q; want %v, Bearer env-token", s.query, s.auth, wantQuery)
	}
}

func TestShellCommandEnds(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		script     func(ctx context.Context, c *websocket.Conn)
		wantStdout string
		wantStderr string
		wantCode   int
	}{
		{
			name: "killed by a signal",
			args: []string{"shell", "demo"},
			script: func(ctx context.Context, c *websocket.Conn) {
				send(ctx, c, api.ShellMessage{Type: "process", ID: "p1"})
				code := 137
				send(ctx, c, api.ShellMessage{Type: "exit", ExitCode: &code, Signal: "SIGKILL"})
				c.Close(websocket.StatusNormalClosure, "")
			},
			wantStderr: "warren: the shell was killed by SIGKILL\n",
			wantCode:   137,
		},
		{
			name: "connection lost",
			args: []string{"shell", "demo"},
			script: func(ctx context.Context, c *websocket.Conn) {
				send(ctx, c, api.ShellMessage{Type: "process", ID: "p7"})
				c.Write(ctx, websocket.MessageBinary, []byte("$ "))
				c.Close(websocket.StatusGoingAway, "shutting down")
			},
			wantStdout: "$ ",
			wantStderr: "warren: shell in session demo: shell connection: failed to get reader: received close frame: status = StatusGoingAway and reason = \"shutting down\"\n" +
				"warren: the shell may still be running; attach to it again with: warren shell demo --process p7\n",
			wantCode: 1,
		},
		{
			name: "closed without an exit status",
			args: []string{"shell", "--kill-on-close", "demo"},
			script: func(ctx context.Context, c *websocket.Conn) {
				send(ctx, c, api.ShellMessage{Type: "process", ID: "p7"})
				c.Close(websocket.StatusNormalClosure, "")
			},
			wantStderr: "warren: shell in session demo: the daemon closed the connection without the shell's exit status\n",
			wantCode:   1,
		},
		{
			name:       "missing session",
			args:       []string{"shell", "nope"},
			wantStderr: "warren: shell in session nope: not_found: session \"nope\" not found\n",
			wantCode:   1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			srv, _ := newShellServer(t, tc.script)
			stdout, stderr, code := runCLI(t, srv, "", tc.args...)
			if code != tc.wantCode {
				t.Errorf("warren %q exit code = %d, want %d (stderr %q)", tc.args, code, tc.wantCode, stderr)
			}
			if stdout != tc.wantStdout {
				t.Errorf("warren %q stdout = %q, want %q", tc.args, stdout, tc.wantStdout)
			}
			if diff := cmp.Diff(tc.wantStderr, stderr); diff != "" {
				t.Errorf("warren %q stderr mismatch (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

// TestShellCommandOnTerminal runs warren shell on a pseudo-terminal: raw
// mode while it runs, the size sent at start and on SIGWINCH, and the
// terminal restored afterwards.
func TestShellCommandOnTerminal(t *testing.T) {
	checkGoroutines(t)
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptm.Close()
	defer tty.Close()
	if err := pty.Setsize(tty, &pty.Winsize{Cols: 100, Rows: 30}); err != nil {
		t.Fatal(err)
	}
	before := termios(t, tty)

	firstResize, secondResize := make(chan struct{}), make(chan struct{})
	received := make(chan []wsMessage, 1)
	srv, s := newShellServer(t, func(ctx context.Context, c *websocket.Conn) {
		send(ctx, c, api.ShellMessage{Type: "process", ID: "p1"})
		var got []wsMessage
		defer func() { received <- got }()
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				t.Errorf("read input: %v", err)
				return
			}
			got = append(got, wsMessage{typ == websocket.MessageBinary, string(b)})
			switch len(got) {
			case 1:
				close(firstResize)
			case 2:
				close(secondResize)
			}
			if string(b) == "exit\r" {
				break
			}
		}
		c.Write(ctx, websocket.MessageBinary, []byte("logout\r\n"))
		code := 0
		send(ctx, c, api.ShellMessage{Type: "exit", ExitCode: &code})
		c.Close(websocket.StatusNormalClosure, "")
	})

	go func() {
		select {
		case <-firstResize:
		case <-time.After(10 * time.Second):
			return
		}
		pty.Setsize(tty, &pty.Winsize{Cols: 120, Rows: 40})
		syscall.Kill(os.Getpid(), syscall.SIGWINCH)
		select {
		case <-secondResize:
		case <-time.After(10 * time.Second):
		}
		// In raw mode the terminal passes CR as it is (cooked mode makes it LF).
		ptm.Write([]byte("exit\r"))
	}()

	var out, errOut bytes.Buffer
	env := map[string]string{"WARREN_ADDR": srv.URL}
	code := run(t.Context(), []string{"shell", "demo"}, &app{
		stdin: tty, stdout: &out, stderr: &errOut,
		getenv: func(k string) string { return env[k] },
		now:    time.Now,
	})
	if code != 0 || out.String() != "logout\r\n" {
		t.Errorf("warren shell = exit %d, stdout %q, stderr %q; want 0, %q", code, out.String(), errOut.String(), "logout\r\n")
	}
	want := []wsMessage{
		{false, `{"type":"resize","cols":100,"rows":30}`},
		{false, `{"type":"resize","cols":120,"rows":40}`},
		{true, "exit\r"},
	}
	if diff := cmp.Diff(want, <-received); diff != "" {
		t.Errorf("messages mismatch (-want +got):\n%s", diff)
	}
	s.mu.Lock()
	if wantQuery := (url.Values{"cols": {"100"}, "rows": {"30"}}); !cmp.Equal(wantQuery, s.query) {
		t.Errorf("handshake query %v, want %v", s.query, wantQuery)
	}
	s.mu.Unlock()
	if after := termios(t, tty); *after != *before {
		t.Errorf("terminal not restored: %+v, was %+v", after, before)
	}
}

// termios returns the terminal attributes of f, without f.Fd (which would
// make reads of f uninterruptible).
func termios(t *testing.T, f *os.File) *unix.Termios {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var tio *unix.Termios
	rc.Control(func(fd uintptr) { tio, err = unix.IoctlGetTermios(int(fd), unix.TCGETS) })
	if err != nil {
		t.Fatalf("get terminal attributes: %v", err)
	}
	return tio
}

// TestTerminalFd covers stdin that is no terminal.
func TestTerminalFd(t *testing.T) {
	if _, ok := terminalFd(strings.NewReader("")); ok {
		t.Errorf("terminalFd(strings.Reader) says terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "in")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fd, ok := terminalFd(f); ok || fd < 0 {
		t.Errorf("terminalFd(file) = %d, %v; want its fd, not a terminal", fd, ok)
	}
}

// checkGoroutines fails t if goroutines it started outlive it (by the end
// of its cleanups, with a little time for closed connections to wind down).
func checkGoroutines(t *testing.T) {
	t.Helper()
	// os/signal starts its watcher once per process, for good: start it now.
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR2)
	signal.Stop(c)
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
