package daemon_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// bearerTransport authenticates every request of an MCP client.
type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpConnect connects a go-sdk client to the daemon's /mcp with key.
func mcpConnect(t *testing.T, h *daemontest.Harness, key string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "warren-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   h.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{key}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatalf("connect to %s/mcp: %v", h.URL, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool; a protocol error fails the test, a tool error does
// not.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: protocol error: %v", tool, args, err)
	}
	return res
}

// callOK calls a tool that must succeed and decodes its structured output
// into out (if not nil).
func callOK(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res := call(t, cs, tool, args)
	if res.IsError {
		t.Fatalf("%s %v: tool error: %s", tool, args, resultText(res))
	}
	if out != nil {
		// Start from zero: fields the answer leaves out must read as unset.
		v := reflect.ValueOf(out).Elem()
		v.Set(reflect.Zero(v.Type()))
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode structured content %s: %v", tool, b, err)
		}
	}
	return res
}

// callErr calls a tool that must fail with a tool error of code and
// returns the error's text.
func callErr(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, code string) string {
	t.Helper()
	res := call(t, cs, tool, args)
	txt := resultText(res)
	if !res.IsError {
		t.Fatalf("%s %v succeeded (%s), want a tool error %s", tool, args, txt, code)
	}
	if !strings.HasPrefix(txt, code+": ") {
		t.Fatalf("%s %v: tool error %q, want code %s", tool, args, txt, code)
	}
	return txt
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestMCP drives every tool over Streamable HTTP with the go-sdk client.
func TestMCP(t *testing.T) {
	h := daemontest.Start(t, nil)
	cs := mcpConnect(t, h, h.AdminKey)

	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
		if len(tool.Description) < 40 {
			t.Errorf("tool %s: description %q is too thin for an agent", tool.Name, tool.Description)
		}
		schema, _ := json.Marshal(tool.InputSchema)
		if tool.Name != "create_session" && tool.Name != "list_sessions" && !strings.Contains(string(schema), `"session_id"`) {
			t.Errorf("tool %s: input schema %s has no session_id", tool.Name, schema)
		}
		if tool.OutputSchema == nil {
			t.Errorf("tool %s has no output schema", tool.Name)
		}
	}
	slices.Sort(names)
	want := []string{"create_session", "delete_file", "delete_session", "edit_file", "exec", "get_session", "list_files",
		"list_sessions", "network_denials", "process_output", "read_file", "search_files", "start_process", "write_file"}
	if !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}

	var sess struct {
		ID, State, Cwd string
	}
	callOK(t, cs, "create_session", map[string]any{"id": "m1", "labels": map[string]string{"by": "mcp"}}, &sess)
	if sess.ID != "m1" || sess.State != "running" {
		t.Fatalf("create_session: %+v", sess)
	}
	callOK(t, cs, "get_session", map[string]any{"session_id": "m1"}, &sess)
	var list struct{ Sessions []struct{ ID string } }
	callOK(t, cs, "list_sessions", nil, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ID != "m1" {
		t.Errorf("list_sessions: %+v", list)
	}

	// exec: separate streams, the exit code, state across calls.
	type execOut struct {
		ExitCode  int `json:"exit_code"`
		Stdout    string
		Stderr    string
		TimedOut  bool `json:"timed_out"`
		Truncated bool
	}
	var ex execOut
	res := callOK(t, cs, "exec", map[string]any{"session_id": "m1", "command": "mkdir -p /tmp/w && cd /tmp/w && X=7; echo out; echo err >&2; false"}, &ex)
	if ex.ExitCode != 1 || ex.Stdout != "out\n" || ex.Stderr != "err\n" {
		t.Errorf("exec: %+v", ex)
	}
	if txt := resultText(res); !strings.Contains(txt, "exit_code: 1") || !strings.Contains(txt, "stdout:\nout\n") {
		t.Errorf("exec text for the model: %q", txt)
	}
	callOK(t, cs, "exec", map[string]any{"session_id": "m1", "command": "echo $PWD $X"}, &ex)
	if ex.Stdout != "/tmp/w 7\n" {
		t.Errorf("shell state did not persist: %+v", ex)
	}
	callOK(t, cs, "exec", map[string]any{"session_id": "m1", "argv": []string{"printf", "%s", "a b; c"}}, &ex)
	if ex.Stdout != "a b; c" {
		t.Errorf("argv exec: %+v", ex)
	}
	res = callOK(t, cs, "exec", map[string]any{"session_id": "m1", "command": "sleep 5", "timeout_ms": 300}, &ex)
	if !ex.TimedOut || !strings.Contains(resultText(res), "timed out") {
		t.Errorf("exec past its timeout: %+v %q", ex, resultText(res))
	}
	res = callOK(t, cs, "exec", map[string]any{"session_id": "m1", "command": "head -c 5000 /dev/zero | tr '\\0' a", "max_output_bytes": 100}, &ex)
	if !ex.Truncated || len(ex.Stdout) != 100 || !strings.Contains(resultText(res), "truncated") {
		t.Errorf("exec over its output cap: truncated=%v, %d bytes, %q", ex.Truncated, len(ex.Stdout), resultText(res))
	}

	// Files.
	var written struct{ Bytes int64 }
	callOK(t, cs, "write_file", map[string]any{"session_id": "m1", "path": "src/main.go", "content": "package main\n\nfunc a() {}\nfunc b() {}\n"}, &written)
	if written.Bytes != 38 {
		t.Errorf("write_file: %+v", written)
	}
	type fileOut struct {
		Content, Encoding string
		Truncated         bool
		Bytes             int64
	}
	var rf fileOut
	callOK(t, cs, "read_file", map[string]any{"session_id": "m1", "path": "src/main.go"}, &rf)
	if rf.Content != "package main\n\nfunc a() {}\nfunc b() {}\n" || rf.Encoding != "utf-8" || rf.Truncated {
		t.Errorf("read_file: %+v", rf)
	}
	callOK(t, cs, "read_file", map[string]any{"session_id": "m1", "path": "src/main.go", "offset": 8, "max_bytes": 6}, &rf)
	if rf.Content != "main\n\n" || !rf.Truncated {
		t.Errorf("read_file with offset and max_bytes: %+v", rf)
	}
	bin := []byte{0, 1, 2, 0xff, 'x'}
	callOK(t, cs, "write_file", map[string]any{"session_id": "m1", "path": "/tmp/bin", "content": base64.StdEncoding.EncodeToString(bin), "encoding": "base64", "mode": "0755"}, nil)
	callOK(t, cs, "read_file", map[string]any{"session_id": "m1", "path": "/tmp/bin"}, &rf)
	if got, _ := base64.StdEncoding.DecodeString(rf.Content); rf.Encoding != "base64" || string(got) != string(bin) {
		t.Errorf("binary read_file: %+v", rf)
	}

	// edit_file: exactly one match, or replace_all.
	callErr(t, cs, "edit_file", map[string]any{"session_id": "m1", "path": "src/main.go", "old_string": "func c()", "new_string": "func d()"}, "invalid_argument")
	msg := callErr(t, cs, "edit_file", map[string]any{"session_id": "m1", "path": "src/main.go", "old_string": "() {}", "new_string": "() { return }"}, "invalid_argument")
	if !strings.Contains(msg, "2 times") || !strings.Contains(msg, "lines 3, 4") {
		t.Errorf("edit_file with two matches: %q", msg)
	}
	var ed struct{ Replacements int }
	callOK(t, cs, "edit_file", map[string]any{"session_id": "m1", "path": "src/main.go", "old_string": "func a() {}", "new_string": "func a() { b() }"}, &ed)
	if ed.Replacements != 1 {
		t.Errorf("edit_file: %+v", ed)
	}
	callOK(t, cs, "edit_file", map[string]any{"session_id": "m1", "path": "src/main.go", "old_string": "func ", "new_string": "func _", "replace_all": true}, &ed)
	callOK(t, cs, "read_file", map[string]any{"session_id": "m1", "path": "src/main.go"}, &rf)
	if ed.Replacements != 2 || rf.Content != "package main\n\nfunc _a() { b() }\nfunc _b() {}\n" {
		t.Errorf("edit_file replace_all: %+v, file %q", ed, rf.Content)
	}
	callErr(t, cs, "edit_file", map[string]any{"session_id": "m1", "path": "nope.go", "old_string": "x", "new_string": "y"}, "not_found")

	var ls struct {
		Path    string
		Entries []struct{ Name, Type string }
	}
	callOK(t, cs, "list_files", map[string]any{"session_id": "m1", "path": "src"}, &ls)
	if ls.Path != "/workspace/src" || len(ls.Entries) != 1 || ls.Entries[0].Name != "main.go" || ls.Entries[0].Type != "file" {
		t.Errorf("list_files: %+v", ls)
	}

	var found struct {
		Matches []struct {
			Path string
			Line int
			Text string
		}
		Truncated bool
	}
	callOK(t, cs, "search_files", map[string]any{"session_id": "m1", "pattern": "func _[ab]\\(", "glob": "*.go"}, &found)
	if len(found.Matches) != 2 || found.Matches[0].Path != "/workspace/src/main.go" || found.Matches[0].Line != 3 || found.Matches[0].Text != "func _a() { b() }" {
		t.Errorf("search_files by pattern: %+v", found)
	}
	// A pattern that looks like an option, or like shell, is only a pattern.
	callOK(t, cs, "search_files", map[string]any{"session_id": "m1", "pattern": "--help; touch /tmp/pwned", "fixed_strings": true}, &found)
	if len(found.Matches) != 0 {
		t.Errorf("search_files for an odd pattern: %+v", found)
	}
	callOK(t, cs, "exec", map[string]any{"session_id": "m1", "command": "test -e /tmp/pwned; echo $?"}, &ex)
	if ex.Stdout != "1\n" {
		t.Errorf("search_files ran its pattern as a command")
	}
	callOK(t, cs, "search_files", map[string]any{"session_id": "m1", "glob": "*.go"}, &found)
	if len(found.Matches) != 1 || found.Matches[0].Path != "/workspace/src/main.go" {
		t.Errorf("search_files by glob: %+v", found)
	}
	callOK(t, cs, "search_files", map[string]any{"session_id": "m1", "pattern": "func", "max_results": 1}, &found)
	if len(found.Matches) != 1 || !found.Truncated {
		t.Errorf("search_files with max_results: %+v", found)
	}
	callErr(t, cs, "search_files", map[string]any{"session_id": "m1", "pattern": "(", "path": "src"}, "invalid_argument")
	callErr(t, cs, "search_files", map[string]any{"session_id": "m1", "pattern": "x", "path": "/nope"}, "not_found")

	callOK(t, cs, "delete_file", map[string]any{"session_id": "m1", "path": "src", "recursive": true}, nil)
	callErr(t, cs, "read_file", map[string]any{"session_id": "m1", "path": "src/main.go"}, "not_found")

	// Processes and their output by offset.
	var proc struct {
		ProcessID string `json:"process_id"`
		State     string
	}
	callOK(t, cs, "start_process", map[string]any{"session_id": "m1", "command": "echo hello; sleep 0.5; echo bye >&2"}, &proc)
	if proc.ProcessID == "" || proc.State != "running" {
		t.Fatalf("start_process: %+v", proc)
	}
	type outputOut struct {
		Output     string
		Offset     int64
		NextOffset int64 `json:"next_offset"`
		Running    bool
		ExitCode   *int `json:"exit_code"`
		MoreOutput bool `json:"more_output"`
	}
	var po outputOut
	res = callOK(t, cs, "process_output", map[string]any{"session_id": "m1", "process_id": proc.ProcessID, "wait_seconds": 30}, &po)
	if po.Output != "hello\nbye\n" || po.Running || po.ExitCode == nil || *po.ExitCode != 0 || po.NextOffset != 10 {
		t.Errorf("process_output waiting for the end: %+v", po)
	}
	if !strings.Contains(resultText(res), "exited with code 0") {
		t.Errorf("process_output text: %q", resultText(res))
	}
	callOK(t, cs, "process_output", map[string]any{"session_id": "m1", "process_id": proc.ProcessID, "offset": 6}, &po)
	if po.Output != "bye\n" || po.Offset != 6 || po.NextOffset != 10 {
		t.Errorf("process_output from offset 6: %+v", po)
	}
	callOK(t, cs, "process_output", map[string]any{"session_id": "m1", "process_id": proc.ProcessID, "max_bytes": 3}, &po)
	if po.Output != "hel" || po.NextOffset != 3 || !po.MoreOutput {
		t.Errorf("process_output with max_bytes: %+v", po)
	}
	callOK(t, cs, "start_process", map[string]any{"session_id": "m1", "argv": []string{"sleep", "30"}}, &proc)
	start := time.Now()
	callOK(t, cs, "process_output", map[string]any{"session_id": "m1", "process_id": proc.ProcessID, "wait_seconds": 0.5}, &po)
	if !po.Running || po.ExitCode != nil || time.Since(start) > 10*time.Second {
		t.Errorf("process_output of a running process after a bounded wait: %+v, took %v", po, time.Since(start))
	}

	// Errors are tool errors that carry the envelope's code.
	txt := callErr(t, cs, "exec", map[string]any{"session_id": "nope", "command": "true"}, "not_found")
	if !strings.Contains(txt, `"nope"`) {
		t.Errorf("not_found error: %q", txt)
	}
	callErr(t, cs, "exec", map[string]any{"command": "true"}, "invalid_argument")                 // schema: session_id missing
	callErr(t, cs, "exec", map[string]any{"session_id": "m1", "cmd": "true"}, "invalid_argument") // schema: unknown field
	callErr(t, cs, "exec", map[string]any{"session_id": "m1"}, "invalid_argument")                // the manager: no command
	callErr(t, cs, "create_session", map[string]any{"id": "Not Valid"}, "invalid_argument")       // the manager: bad id
	callErr(t, cs, "write_file", map[string]any{"session_id": "m1", "path": "x", "content": "%%", "encoding": "base64"}, "invalid_argument")
	callErr(t, cs, "process_output", map[string]any{"session_id": "m1", "process_id": "p-nope"}, "not_found")

	callOK(t, cs, "delete_session", map[string]any{"session_id": "m1"}, nil)
	callErr(t, cs, "get_session", map[string]any{"session_id": "m1"}, "not_found")

	// Mutating calls are audited under "mcp <tool>", without contents.
	recs, err := h.Client.QueryAudit(context.Background(), client.AuditQuery{Session: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]int{}
	for _, r := range recs {
		ops[r.Op]++
		if r.Op == "mcp write_file" && r.Target != "src/main.go" && r.Target != "/tmp/bin" && r.Target != "x" {
			t.Errorf("write_file audit target %q", r.Target)
		}
	}
	for _, op := range []string{"mcp create_session", "mcp exec", "mcp write_file", "mcp edit_file", "mcp delete_file", "mcp start_process", "mcp delete_session"} {
		if ops[op] == 0 {
			t.Errorf("no audit record of %s: %v", op, ops)
		}
	}
	if ops["mcp read_file"] > 0 || ops["mcp search_files"] > 0 {
		t.Errorf("reads were audited: %v", ops)
	}
	log, _ := os.ReadFile(filepath.Join(h.DataDir, "audit.log"))
	if strings.Contains(string(log), "touch /tmp/pwned") || strings.Contains(string(log), "func _a") {
		t.Errorf("the audit log holds command text or file contents")
	}
}

// TestMCPAuth: /mcp authenticates like the REST API, and a tenant sees only
// its own sessions.
func TestMCPAuth(t *testing.T) {
	h := daemontest.Start(t, nil)
	for _, cred := range []http.Header{nil, bearer("wrn_aaaaaaaaaaaa_" + strings.Repeat("a", 32))} {
		r := as(t, h, cred, "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if r.status != http.StatusUnauthorized || r.err.Error.Code != "unauthenticated" || r.header.Get("WWW-Authenticate") == "" {
			t.Errorf("POST /mcp with %v: %d %v %s, want 401 unauthenticated with WWW-Authenticate", cred, r.status, r.header, r.body)
		}
	}

	// Bodies are bounded.
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"session_id":"x","path":"p","content":"` +
		strings.Repeat("a", 9<<20) + `"}}}`
	hdr := bearer(h.AdminKey)
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Accept", "application/json, text/event-stream")
	if r := as(t, h, hdr, "POST", "/mcp", big); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a 9 MiB MCP request: %d %s, want 413", r.status, r.body)
	}

	if _, err := h.Client.CreateSession(context.Background(), &api.CreateSessionRequest{ID: "adm"}); err != nil {
		t.Fatal(err)
	}
	alice := newKey(t, h, api.CreateKeyRequest{Tenant: "alice"})
	cs := mcpConnect(t, h, alice.Secret)
	callErr(t, cs, "exec", map[string]any{"session_id": "adm", "command": "true"}, "not_found")
	callErr(t, cs, "read_file", map[string]any{"session_id": "adm", "path": "/etc/hostname"}, "not_found")
	callErr(t, cs, "delete_session", map[string]any{"session_id": "adm"}, "not_found")
	var list struct{ Sessions []struct{ ID string } }
	callOK(t, cs, "list_sessions", nil, &list)
	if len(list.Sessions) != 0 {
		t.Errorf("alice lists %+v", list)
	}
	// The same id in another tenant is another session.
	callOK(t, cs, "create_session", map[string]any{"id": "adm"}, nil)
	callOK(t, cs, "write_file", map[string]any{"session_id": "adm", "path": "who", "content": "alice"}, nil)
	if _, err := h.Client.StatFile(context.Background(), "adm", "who"); !client.IsNotFound(err) {
		t.Errorf("alice's file is in the admin's session: %v", err)
	}
	admin := mcpConnect(t, h, h.AdminKey)
	callOK(t, admin, "list_sessions", nil, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ID != "adm" {
		t.Errorf("the admin lists %+v", list)
	}
	recs, err := h.Client.QueryAudit(context.Background(), client.AuditQuery{Tenant: "alice", Op: "mcp create_session"})
	if err != nil || len(recs) != 1 || recs[0].KeyID != alice.ID || recs[0].Session != "adm" {
		t.Errorf("alice's create_session audit: %+v %v", recs, err)
	}
	callOK(t, cs, "delete_session", map[string]any{"session_id": "adm"}, nil)
}
