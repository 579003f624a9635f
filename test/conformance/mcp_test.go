package conformance

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/mcpapi"
)

func init() {
	register("mcp-http", func(t *testing.T, h *daemontest.Harness) Transport {
		return &mcpTransport{cs: connectMCP(t, &mcp.StreamableClientTransport{
			Endpoint:   h.URL + "/mcp",
			HTTPClient: &http.Client{Transport: bearer{h.AdminKey}},
			MaxRetries: -1,
		})}
	})
	register("mcp-stdio", func(t *testing.T, h *daemontest.Harness) Transport {
		// What `warren mcp` runs: the tools over the Go client of the
		// daemon, framed on a byte stream as on stdin and stdout.
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		srv := mcpapi.NewServer(mcpapi.NewClientBackend(client.New(h.URL, client.WithToken(h.AdminKey))),
			mcpapi.Options{Log: slog.New(slog.DiscardHandler)})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.Run(ctx, &mcp.IOTransport{Reader: inR, Writer: outW})
		}()
		t.Cleanup(func() {
			cancel()
			inW.Close()
			outR.Close()
			<-done
		})
		return &mcpTransport{cs: connectMCP(t, &mcp.IOTransport{Reader: outR, Writer: inW})}
	})
}

// bearer authenticates every request of the HTTP client.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

func connectMCP(t *testing.T, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "conformance", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect an MCP client: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpTransport is the MCP tools through the go-sdk client.
type mcpTransport struct{ cs *mcp.ClientSession }

// toolError is a tool result with isError: its text is "<code>: <message>".
type toolError struct{ code, msg string }

func (e *toolError) Error() string { return e.code + ": " + e.msg }

func (m *mcpTransport) Code(err error) string {
	var te *toolError
	if errors.As(err, &te) {
		return te.code
	}
	return ""
}

// call calls a tool and decodes its structured output into out. A tool
// error is a *toolError; a protocol error is returned as is, without a
// code.
func (m *mcpTransport) call(ctx context.Context, tool string, args map[string]any, out any) error {
	res, err := m.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	if res.IsError {
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		code, msg, ok := mcpapi.ParseToolError(text.String())
		if !ok {
			return fmt.Errorf("%s: a tool error without a code: %q", tool, text.String())
		}
		return &toolError{code: code, msg: msg}
	}
	if out == nil {
		return nil
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func (m *mcpTransport) CreateSession(ctx context.Context, id string) error {
	return m.call(ctx, "create_session", map[string]any{"id": id}, nil)
}

func (m *mcpTransport) GetSession(ctx context.Context, id string) (string, error) {
	var s mcpapi.Session
	err := m.call(ctx, "get_session", map[string]any{"session_id": id}, &s)
	return s.State, err
}

func (m *mcpTransport) ListSessions(ctx context.Context) ([]string, error) {
	var l mcpapi.SessionList
	err := m.call(ctx, "list_sessions", nil, &l)
	var ids []string
	for _, s := range l.Sessions {
		ids = append(ids, s.ID)
	}
	return ids, err
}

func (m *mcpTransport) DeleteSession(ctx context.Context, id string) error {
	return m.call(ctx, "delete_session", map[string]any{"session_id": id}, nil)
}

func (m *mcpTransport) Exec(ctx context.Context, id, command string) (*ExecResult, error) {
	var out mcpapi.ExecOutput
	if err := m.call(ctx, "exec", map[string]any{"session_id": id, "command": command}, &out); err != nil {
		return nil, err
	}
	return &ExecResult{Stdout: out.Stdout, Stderr: out.Stderr, ExitCode: out.ExitCode, TimedOut: out.TimedOut, Truncated: out.Truncated}, nil
}

// ExecStream: MCP tools do not stream; the output comes as one chunk per
// stream.
func (m *mcpTransport) ExecStream(ctx context.Context, id, command string) ([]Chunk, *ExecResult, error) {
	res, err := m.Exec(ctx, id, command)
	if err != nil {
		return nil, nil, err
	}
	var chunks []Chunk
	if res.Stdout != "" {
		chunks = append(chunks, Chunk{Stream: "stdout", Data: res.Stdout})
	}
	if res.Stderr != "" {
		chunks = append(chunks, Chunk{Stream: "stderr", Data: res.Stderr})
	}
	return chunks, res, nil
}

func (m *mcpTransport) StartProcess(ctx context.Context, id, command string) (string, error) {
	var p mcpapi.Process
	err := m.call(ctx, "start_process", map[string]any{"session_id": id, "command": command}, &p)
	return p.ProcessID, err
}

// ProcessOutput reads on from next_offset until the output is all there:
// with follow, until the process has exited.
func (m *mcpTransport) ProcessOutput(ctx context.Context, id, pid string, offset int64, follow bool) ([]byte, *int, error) {
	var data []byte
	for {
		args := map[string]any{"session_id": id, "process_id": pid, "offset": offset}
		if follow {
			args["wait_seconds"] = 30
		}
		var out mcpapi.ProcessOutput
		if err := m.call(ctx, "process_output", args, &out); err != nil {
			return nil, nil, err
		}
		chunk := []byte(out.Output)
		if out.OutputBase64 != "" {
			b, err := base64.StdEncoding.DecodeString(out.OutputBase64)
			if err != nil {
				return nil, nil, err
			}
			chunk = b
		}
		data = append(data, chunk...)
		offset = out.NextOffset
		if out.MoreOutput || follow && out.Running {
			continue
		}
		return data, out.ExitCode, nil
	}
}

func (m *mcpTransport) WriteFile(ctx context.Context, id, path string, data []byte) error {
	args := map[string]any{"session_id": id, "path": path, "content": string(data)}
	if !utf8.Valid(data) || strings.IndexByte(string(data), 0) >= 0 {
		args["content"], args["encoding"] = base64.StdEncoding.EncodeToString(data), "base64"
	}
	return m.call(ctx, "write_file", args, nil)
}

// ReadFile reads on from the offset after each part until the file ends.
func (m *mcpTransport) ReadFile(ctx context.Context, id, path string) ([]byte, error) {
	var data []byte
	for {
		var out mcpapi.FileContent
		if err := m.call(ctx, "read_file", map[string]any{"session_id": id, "path": path, "offset": len(data)}, &out); err != nil {
			return nil, err
		}
		if out.Encoding == "base64" {
			b, err := base64.StdEncoding.DecodeString(out.Content)
			if err != nil {
				return nil, err
			}
			data = append(data, b...)
		} else {
			data = append(data, out.Content...)
		}
		if !out.Truncated {
			return data, nil
		}
	}
}

func (m *mcpTransport) ListFiles(ctx context.Context, id, dir string) ([]string, error) {
	var l mcpapi.FileList
	err := m.call(ctx, "list_files", map[string]any{"session_id": id, "path": dir}, &l)
	var names []string
	for _, e := range l.Entries {
		names = append(names, e.Name)
	}
	return names, err
}

func (m *mcpTransport) DeleteFile(ctx context.Context, id, path string) error {
	return m.call(ctx, "delete_file", map[string]any{"session_id": id, "path": path}, nil)
}
