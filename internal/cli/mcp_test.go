package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.SandboxMain()
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
	if err != nil || len(lt.Tools) != 13 {
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
