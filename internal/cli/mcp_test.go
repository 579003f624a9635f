package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/testutil"
)

// asWarren makes this test binary run as the warren command (see
// TestMain), for tests that spawn it the way an MCP host does.
const asWarren = "WARREN_CLI_TEST_AS_WARREN"

func TestMain(m *testing.M) {
	testutil.SandboxMain()
	if os.Getenv(asWarren) == "1" {
		os.Exit(Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// frameChecker passes stdout on to the MCP client and fails the test for
// every line that is not a JSON-RPC message: stdout is the protocol's.
type frameChecker struct {
	t    *testing.T
	r    *bufio.Reader
	rest []byte
}

func (f *frameChecker) Read(p []byte) (int, error) {
	if len(f.rest) == 0 {
		line, err := f.r.ReadBytes('\n')
		if len(line) > 0 {
			var msg struct{ JSONRPC string }
			if json.Unmarshal(line, &msg) != nil || msg.JSONRPC != "2.0" {
				f.t.Errorf("warren mcp wrote a line to stdout that is not a JSON-RPC message: %q", line)
			}
		}
		f.rest = line
		if len(line) == 0 {
			return 0, err
		}
	}
	n := copy(p, f.rest)
	f.rest = f.rest[n:]
	return n, nil
}

func (f *frameChecker) Close() error { return nil }

// runMCP runs `warren <args>` in-process with its stdin and stdout on pipes
// and connects an MCP client to them. wait closes the client's side and
// returns the command's exit code.
// mcpTestEnv leaves the host's cgroup2 mount options alone (see
// config.CgroupFavorDynMods).
func mcpTestEnv(name string) string {
	if name == "WARREN_CGROUP_FAVOR_DYNMODS" {
		return "false"
	}
	return ""
}

func runMCP(t *testing.T, args ...string) (cs *mcp.ClientSession, stderr *lockedBuffer, wait func() int) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr = &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		code := run(context.Background(), args, &app{stdin: inR, stdout: outW, stderr: stderr, getenv: mcpTestEnv, now: time.Now})
		outW.Close()
		done <- code
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil).Connect(ctx,
		&mcp.IOTransport{Reader: &frameChecker{t: t, r: bufio.NewReader(outR)}, Writer: inW}, nil)
	if err != nil {
		inW.Close()
		t.Fatalf("connect to warren %s: %v (stderr: %s)", strings.Join(args, " "), err, stderr)
	}
	code, waited := -1, false
	wait = func() int {
		if waited {
			return code
		}
		waited = true
		cs.Close()
		inW.Close()
		select {
		case code = <-done:
		case <-time.After(time.Minute):
			t.Fatalf("warren %s did not end when its stdin closed", strings.Join(args, " "))
		}
		return code
	}
	t.Cleanup(func() { wait() })
	return cs, stderr, wait
}

func callText(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		b.WriteString(c.(*mcp.TextContent).Text)
	}
	return b.String(), res.IsError
}

// TestMCPStdio: `warren mcp` serves the tools on stdio against a running
// daemon.
func TestMCPStdio(t *testing.T) {
	h := daemontest.Start(t, nil)
	cs, stderr, wait := runMCP(t, "mcp", "--addr", h.URL, "--token", h.AdminKey)
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(lt.Tools) != 14 {
		t.Fatalf("tools/list: %v, %d tools", err, len(lt.Tools))
	}
	if txt, isErr := callText(t, cs, "create_session", map[string]any{"id": "stdio"}); isErr {
		t.Fatal(txt)
	}
	if txt, isErr := callText(t, cs, "exec", map[string]any{"session_id": "stdio", "command": "echo hi; echo oops >&2; exit 4"}); isErr || !strings.Contains(txt, "exit_code: 4") || !strings.Contains(txt, "stdout:\nhi\n") || !strings.Contains(txt, "stderr:\noops\n") {
		t.Errorf("exec over stdio: %q (error %v)", txt, isErr)
	}
	if txt, isErr := callText(t, cs, "exec", map[string]any{"session_id": "gone", "command": "true"}); !isErr || !strings.HasPrefix(txt, `not_found: session "gone" not found`) {
		t.Errorf("exec in a missing session over stdio: %q (error %v)", txt, isErr)
	}
	if s, err := h.Client.GetSession(context.Background(), "stdio"); err != nil || s.State != "running" {
		t.Errorf("the daemon does not have the session the MCP client created: %v", err)
	}
	if code := wait(); code != 0 {
		t.Errorf("warren mcp exited %d; stderr: %s", code, stderr)
	}
}

// TestMCPStdioNoDaemon: without a daemon the tools fail with unavailable,
// and warren mcp says so on stderr, never on stdout.
func TestMCPStdioNoDaemon(t *testing.T) {
	cs, stderr, wait := runMCP(t, "mcp", "--addr", "http://127.0.0.1:1", "--token", "x")
	if txt, isErr := callText(t, cs, "list_sessions", nil); !isErr || !strings.HasPrefix(txt, "unavailable: cannot reach the warren daemon") {
		t.Errorf("list_sessions without a daemon: %q (error %v)", txt, isErr)
	}
	if code := wait(); code != 0 {
		t.Errorf("warren mcp exited %d", code)
	}
	if !strings.Contains(stderr.String(), "does not answer") {
		t.Errorf("stderr: %q", stderr)
	}
}

// TestMCPEmbedded: `warren mcp --embedded` runs its own daemon, and its
// sessions end with the connection.
func TestMCPEmbedded(t *testing.T) {
	testutil.RequiresRoot(t)
	dir := testutil.TraversableDir(t)
	cg := fmt.Sprintf("%s%d-mcp", testutil.TestCgroupPrefix, os.Getpid())
	testutil.CheckLeaks(t, cg, filepath.Join(dir, "sessions"))
	cs, stderr, wait := runMCP(t, "mcp", "--embedded", "--data-dir", dir, "--cgroup-parent", cg)
	if txt, isErr := callText(t, cs, "create_session", map[string]any{"id": "emb"}); isErr {
		t.Fatalf("create_session: %s; stderr: %s", txt, stderr)
	}
	if txt, isErr := callText(t, cs, "write_file", map[string]any{"session_id": "emb", "path": "a.txt", "content": "one two"}); isErr {
		t.Fatal(txt)
	}
	if txt, isErr := callText(t, cs, "exec", map[string]any{"session_id": "emb", "command": "cat a.txt"}); isErr || !strings.Contains(txt, "one two") {
		t.Errorf("exec: %q (error %v)", txt, isErr)
	}
	if code := wait(); code != 0 {
		t.Errorf("warren mcp --embedded exited %d; stderr: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "warren.db")); err != nil {
		t.Errorf("the embedded daemon did not use --data-dir: %v", err)
	}
}

// TestMCPStdioBadInput: `warren mcp`, spawned as an MCP host does, answers
// a line that is not JSON with -32700, one that is not a JSON-RPC message
// with -32600 and an unknown method with -32601, and goes on serving: the
// bytes a client writes and reads on the process's stdin and stdout.
func TestMCPStdioBadInput(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "mcp", "--addr", "http://127.0.0.1:1", "--token", "x")
	cmd.Env = append(os.Environ(), asWarren+"=1")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	inW, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cancel()
		<-done
	}()
	lines := bufio.NewReader(outR)
	// roundTrip writes a line and reads the one answer.
	roundTrip := func(line string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatalf("write %q: %v (stderr: %s)", line, err, stderr)
		}
		got, err := lines.ReadBytes('\n')
		if err != nil {
			t.Fatalf("after %q: read: %v (stderr: %s)", line, err, stderr)
		}
		var m map[string]any
		if err := json.Unmarshal(got, &m); err != nil {
			t.Fatalf("after %q: the answer %q is not JSON", line, got)
		}
		return m
	}
	errCode := func(m map[string]any) float64 {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c
	}
	for _, tc := range []struct {
		line string
		code float64
		id   any
	}{
		{"this is not json", -32700, nil},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":`, -32700, nil}, // cut short
		{`{"foo":1}`, -32600, nil},
		{`[]`, -32600, nil},
	} {
		m := roundTrip(tc.line)
		if errCode(m) != tc.code || m["id"] != tc.id || m["jsonrpc"] != "2.0" {
			t.Errorf("answer to %q: %v, want error %v with id %v", tc.line, m, tc.code, tc.id)
		}
	}
	m := roundTrip(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	res, _ := m["result"].(map[string]any)
	if m["id"] != float64(1) || res["protocolVersion"] != "2025-11-25" {
		t.Fatalf("initialize after bad lines: %v", m)
	}
	if caps, _ := res["capabilities"].(map[string]any); caps["tools"] == nil || caps["logging"] != nil {
		t.Errorf("capabilities %v: want tools only", caps)
	} else if tools, _ := caps["tools"].(map[string]any); tools["listChanged"] == true {
		t.Errorf("the server advertises tools/list_changed, which it never sends")
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	if m := roundTrip(`{"jsonrpc":"2.0","id":"x","method":"no/such/method","params":{}}`); errCode(m) != -32601 || m["id"] != "x" {
		t.Errorf("an unknown method: %v, want -32601 for id x", m)
	}
	if m := roundTrip(`[{"jsonrpc":"2.0","id":5,"method":"ping"}]`); errCode(m) != -32600 {
		t.Errorf("a batch on 2025-11-25: %v, want -32600", m)
	}
	m = roundTrip(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	res, _ = m["result"].(map[string]any)
	if tools, _ := res["tools"].([]any); m["id"] != float64(2) || len(tools) != 14 {
		t.Errorf("tools/list after bad lines: %v", m)
	}
	inW.Close()
	select {
	case err := <-done:
		done <- err // for the deferred wait
		if err != nil {
			t.Errorf("warren mcp: %v; stderr: %s", err, stderr)
		}
	case <-time.After(time.Minute):
		t.Fatal("warren mcp did not end when its stdin closed")
	}
}

// TestMCPStdioCancelProgress: over stdio too, a call with a progress token
// hears how long it has run, and a cancelled call stops its command (the
// SDK cancels the call's context, the Go client aborts its request to the
// daemon) so that the shell is free at once.
func TestMCPStdioCancelProgress(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(context.Background(), &api.CreateSessionRequest{ID: "sc"}); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		code := run(context.Background(), []string{"mcp", "--addr", h.URL, "--token", h.AdminKey},
			&app{stdin: inR, stdout: outW, stderr: stderr, getenv: mcpTestEnv, now: time.Now})
		outW.Close()
		done <- code
	}()
	defer func() {
		inW.Close()
		<-done
	}()
	var mu sync.Mutex
	var progress []*mcp.ProgressNotificationParams
	c := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params)
			mu.Unlock()
		},
	})
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: &frameChecker{t: t, r: bufio.NewReader(outR)}, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr: %s)", err, stderr)
	}
	defer cs.Close()

	params := &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"session_id": "sc", "argv": []string{"sleep", "6"}}}
	params.SetProgressToken(42)
	if res, err := cs.CallTool(context.Background(), params); err != nil || res.IsError {
		t.Fatalf("exec with a progress token: %v %v", res, err)
	}
	mu.Lock()
	if len(progress) == 0 || !strings.Contains(progress[0].Message, "exec running for") {
		t.Errorf("progress over stdio: %+v, want at least one", progress)
	}
	mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"session_id": "sc", "command": "touch /tmp/started; sleep 120"}})
		errc <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := h.Client.StatFile(context.Background(), "sc", "/tmp/started"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the long exec never started")
		}
	}
	cancel()
	if err := <-errc; err == nil {
		t.Error("a cancelled call returned no error")
	}
	start := time.Now()
	res, err := h.Client.Exec(context.Background(), "sc", &api.ExecRequest{Command: "echo free"})
	if err != nil || res.Stdout != "free\n" || time.Since(start) > 5*time.Second {
		t.Errorf("the shell after a cancel over stdio: %+v %v after %v; want it free at once", res, err, time.Since(start))
	}
}
