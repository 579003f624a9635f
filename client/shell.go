package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/warrenhq/warren/api"
)

// maxShellMessage bounds a text message of the shell WebSocket; longer ones
// are skipped. Terminal output (binary messages) is streamed and has no
// bound.
const maxShellMessage = 64 << 10

// ShellOptions configure Shell.
type ShellOptions struct {
	// Process attaches to the running TTY process of this id (such as the
	// shell of an earlier Shell call) instead of starting a login shell.
	Process string
	// Cols and Rows are the terminal's initial size; 0 leaves it to the
	// daemon (80 x 24 for a new shell).
	Cols, Rows int
	// KillOnClose kills the shell when this connection closes. Without it
	// the shell keeps running, and Shell with its ProcessID attaches to it
	// again.
	KillOnClose bool
}

// ShellConn is a connection to an interactive shell on a pseudo-terminal in
// a session. Read yields the terminal's output and Write sends it input,
// both as exact bytes; Resize changes its size. When the shell exits, the
// daemon reports its exit code (ExitCode) and Read returns io.EOF.
//
// Read must not be called concurrently with itself; every other method may
// be called from any goroutine, also while a Read is in progress. The caller
// must Close the connection.
type ShellConn struct {
	ws     *websocket.Conn
	ctx    context.Context // of every read and write; canceled by Close
	cancel context.CancelFunc

	mu        sync.Mutex
	processID string // guarded by mu
	exitCode  *int   // guarded by mu
	signal    string // guarded by mu

	msg     io.Reader // the rest of the binary message being read, or nil (Read's)
	readErr error     // the error that ended reading (Read's)

	closeOnce sync.Once
	closeErr  error
}

// wsURL returns the WebSocket URL of path (escaped) and query: ws:// for an
// http:// base URL and wss:// for https://.
func (c *Client) wsURL(path string, q url.Values) (string, error) {
	u, err := url.Parse(c.baseURL + path)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", path, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	case "ws", "wss":
	default:
		return "", fmt.Errorf("GET %s: base URL scheme %q is not http or https", path, u.Scheme)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Shell connects to an interactive shell in the session id over a
// WebSocket: a new login shell on a pseudo-terminal, or with opts.Process
// the running TTY process of that id (the daemon then replays up to the
// last 64 KiB of its output, so that the screen redraws). Shell returns once
// the daemon has named the process (ProcessID).
//
// ctx bounds the dial and the connection: when it is done, the connection
// is closed.
func (c *Client) Shell(ctx context.Context, id string, opts ShellOptions) (*ShellConn, error) {
	path := sessionPath(id, "/shell")
	q := url.Values{}
	if opts.Process != "" {
		q.Set("process", opts.Process)
	}
	if opts.Cols > 0 {
		q.Set("cols", strconv.Itoa(opts.Cols))
	}
	if opts.Rows > 0 {
		q.Set("rows", strconv.Itoa(opts.Rows))
	}
	if opts.KillOnClose {
		q.Set("kill_on_close", "true")
	}
	ws, err := c.dialWS(ctx, path, q)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &ShellConn{ws: ws, ctx: sctx, cancel: cancel}
	switch err := s.advance(true); {
	case err == io.EOF:
		s.readErr = err // the shell ended already; ExitCode may say how
	case err != nil:
		s.Close()
		var e *Error
		if errors.As(err, &e) {
			return nil, e // as a refusal before the upgrade returns it
		}
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return s, nil
}

// advance reads messages, handling the text ones, until a binary message
// (kept to be read), or with untilProcess until the process message. It
// returns io.EOF after the exit message (the shell's output came before it)
// and when the daemon closed the connection normally.
func (s *ShellConn) advance(untilProcess bool) error {
	for {
		typ, r, err := s.ws.Reader(s.ctx)
		if err != nil {
			return s.readError(err)
		}
		if typ == websocket.MessageBinary {
			s.msg = r
			return nil
		}
		b, err := io.ReadAll(io.LimitReader(r, maxShellMessage+1))
		if err != nil {
			return s.readError(err)
		}
		if len(b) > maxShellMessage {
			if _, err := io.Copy(io.Discard, r); err != nil {
				return s.readError(err)
			}
			continue
		}
		var m api.ShellMessage
		if json.Unmarshal(b, &m) != nil {
			continue // not for this client to understand
		}
		s.mu.Lock()
		switch m.Type {
		case "process":
			s.processID = m.ID
		case "exit":
			code := 0
			if m.ExitCode != nil {
				code = *m.ExitCode
			}
			s.exitCode, s.signal = &code, m.Signal
		}
		s.mu.Unlock()
		switch {
		case m.Type == "error" && m.Error != nil:
			// The shell could not start (the upgrade had succeeded): the
			// daemon's error, as an answer before the upgrade would be.
			return &Error{StatusCode: statusOfCode(m.Error.Code), Code: m.Error.Code, Message: m.Error.Message}
		case m.Type == "exit":
			return io.EOF
		case untilProcess && m.Type == "process":
			return nil
		}
	}
}

// readError turns the error that ended reading into what Read returns:
// io.EOF after the daemon closed the connection normally or reported the
// shell's exit.
func (s *ShellConn) readError(err error) error {
	if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
		return io.EOF
	}
	if _, _, exited := s.ExitCode(); exited {
		return io.EOF
	}
	if cerr := s.ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("shell connection: %w (%w)", cerr, err)
	}
	return fmt.Errorf("shell connection: %w", err)
}

// Read reads the terminal's output. It returns io.EOF once the daemon has
// reported the shell's exit (ExitCode then tells how it ended), or closed
// the connection normally.
func (s *ShellConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if s.readErr != nil {
			return 0, s.readErr
		}
		if s.msg == nil {
			if err := s.advance(false); err != nil {
				s.readErr = err
				continue
			}
		}
		n, err := s.msg.Read(p)
		switch {
		case err == io.EOF:
			s.msg = nil
		case err != nil:
			s.readErr = s.readError(err)
			if n == 0 {
				return 0, s.readErr
			}
		}
		if n > 0 {
			return n, nil
		}
	}
}

// Write sends p to the terminal as input, in one message.
func (s *ShellConn) Write(p []byte) (int, error) {
	if err := s.ws.Write(s.ctx, websocket.MessageBinary, p); err != nil {
		return 0, fmt.Errorf("shell connection: write input: %w", err)
	}
	return len(p), nil
}

// Resize sets the terminal's size.
func (s *ShellConn) Resize(cols, rows int) error {
	b, err := json.Marshal(api.ShellMessage{Type: "resize", Cols: cols, Rows: rows})
	if err != nil {
		return fmt.Errorf("shell connection: encode resize: %w", err)
	}
	if err := s.ws.Write(s.ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("shell connection: resize: %w", err)
	}
	return nil
}

// ProcessID returns the id of the shell's process (such as "p3"): the
// process of ShellOptions.Process for a later reattach, and of the
// processes API.
func (s *ShellConn) ProcessID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.processID
}

// ExitCode reports how the shell ended, once the daemon said so (exited is
// then true): its exit code and, if a signal ended it, the signal's name.
func (s *ShellConn) ExitCode() (code int, signal string, exited bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exitCode == nil {
		return 0, "", false
	}
	return *s.exitCode, s.signal, true
}

// Close closes the connection, with the WebSocket close handshake when the
// daemon still answers. Unless the shell was started with KillOnClose, it
// keeps running.
func (s *ShellConn) Close() error {
	s.closeOnce.Do(func() {
		err := s.ws.Close(websocket.StatusNormalClosure, "")
		s.cancel()
		if err != nil && !errors.Is(err, net.ErrClosed) && websocket.CloseStatus(err) == -1 {
			s.closeErr = fmt.Errorf("shell connection: close: %w", err)
		}
	})
	return s.closeErr
}

// dialWS opens the WebSocket at path (with query q) as this client, with
// no read limit (binary messages are streams; callers bound text ones). A
// refusal before the upgrade is the daemon's *Error, from its envelope
// (Dial keeps the first KiB of the body, enough for one).
func (c *Client) dialWS(ctx context.Context, path string, q url.Values) (*websocket.Conn, error) {
	u, err := c.wsURL(path, q)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	if c.userAgent != "" {
		h.Set("User-Agent", c.userAgent)
	}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.hc, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			defer resp.Body.Close()
			return nil, errorFromResponse(resp)
		}
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	ws.SetReadLimit(-1)
	return ws, nil
}
