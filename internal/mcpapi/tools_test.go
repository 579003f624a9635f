package mcpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/errdefs"
)

func TestReplace(t *testing.T) {
	const file = "a\nfoo()\nb\nfoo()\n"
	tests := []struct {
		name     string
		old, new string
		all      bool
		want     string
		n        int
		errHas   string
	}{
		{name: "unique", old: "b\n", new: "c\n", want: "a\nfoo()\nc\nfoo()\n", n: 1},
		{name: "not found", old: "bar()", new: "x", errHas: "was not found"},
		{name: "whitespace", old: "  b\n", new: "x", errHas: "without its leading or trailing whitespace"},
		{name: "twice", old: "foo()", new: "x", errHas: "occurs 2 times in f.txt (at lines 2, 4)"},
		{name: "all", old: "foo()", new: "bar()", all: true, want: "a\nbar()\nb\nbar()\n", n: 2},
		{name: "multi-line match", old: "foo()\nb", new: "z", want: "a\nz\nfoo()\n", n: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, n, err := replace([]byte(file), "f.txt", tc.old, tc.new, tc.all)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) || !errdefs.Is(err, errdefs.ErrInvalidArgument) {
					t.Fatalf("replace(%q) error = %v, want invalid_argument containing %q", tc.old, err, tc.errHas)
				}
				return
			}
			if err != nil || string(got) != tc.want || n != tc.n {
				t.Errorf("replace(%q, %q) = %q, %d, %v; want %q, %d", tc.old, tc.new, got, n, err, tc.want, tc.n)
			}
		})
	}
}

func TestMatchLines(t *testing.T) {
	data := []byte(strings.Repeat("x\n", 15))
	if got, want := matchLines(data, "x", 15, 10), "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ..."; got != want {
		t.Errorf("matchLines = %q, want %q", got, want)
	}
	if got, want := matchLines([]byte("ab\nab"), "b\na", 1, 10), "1"; got != want {
		t.Errorf("matchLines across lines = %q, want %q", got, want)
	}
}

func TestSearchArgv(t *testing.T) {
	tests := []struct {
		in   SearchFilesInput
		want []string
	}{
		{SearchFilesInput{Pattern: "-rf; rm *"}, []string{"grep", "-r", "-n", "-H", "-I", "-s", "--null", "--color=never", "--exclude-dir=.git", "-E", "-e", "-rf; rm *", "--", "/w"}},
		{SearchFilesInput{Pattern: "x", Glob: "src/**/*.go", IgnoreCase: true, FixedStrings: true}, []string{"grep", "-r", "-n", "-H", "-I", "-s", "--null", "--color=never", "--exclude-dir=.git", "-i", "-F", "--include=*.go", "-e", "x", "--", "/w"}},
		{SearchFilesInput{Glob: "*.py"}, []string{"find", "/w", "-name", ".git", "-prune", "-o", "-type", "f", "-name", "*.py", "-print"}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, searchArgv(&tc.in, "/w")); diff != "" {
			t.Errorf("searchArgv(%+v) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestParseSearch(t *testing.T) {
	long := strings.Repeat("é", 400)
	out := "/w/a.go\x0012:func a() {}\n/w/b:c.go\x003:x:y\n/w/l.go\x001:" + long + "\n/w/cut.go\x009"
	got := parseSearch(out, true, 10)
	want := &SearchResult{Matches: []SearchMatch{
		{Path: "/w/a.go", Line: 12, Text: "func a() {}"},
		{Path: "/w/b:c.go", Line: 3, Text: "x:y"},
		{Path: "/w/l.go", Line: 1, Text: long[:300] + " [...]"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseSearch (-want +got):\n%s", diff)
	}
	if got := parseSearch("/a\n/b\n/c\n", false, 2); len(got.Matches) != 2 || !got.Truncated {
		t.Errorf("parseSearch of find output with limit 2 = %+v", got)
	}
}

func TestIncompleteTail(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{{"abc", 0}, {"é", 0}, {"a\xc3", 1}, {"a\xe2\x82", 2}, {"\xf0\x9f\x98", 3}, {"\xf0\x9f\x98\x80", 0}} {
		if got := incompleteTail([]byte(tc.in)); got != tc.want {
			t.Errorf("incompleteTail(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestParseToolError(t *testing.T) {
	for _, tc := range []struct{ text, code, msg string }{
		{"not_found: session \"x\" not found", "not_found", "session \"x\" not found"},
		{"too_large: a: b", "too_large", "a: b"},
		{"validating: x", "", "validating: x"},
		{"nothing", "", "nothing"},
	} {
		code, msg, ok := ParseToolError(tc.text)
		if code != tc.code || msg != tc.msg || ok != (tc.code != "") {
			t.Errorf("ParseToolError(%q) = %q, %q, %v", tc.text, code, msg, ok)
		}
	}
}

// fakeBackend keeps files in memory and plays back processes' output.
type fakeBackend struct {
	Backend // the rest panics: a tool that calls it fails its test

	mu    sync.Mutex
	files map[string][]byte
	// events are a process's output events; exited says whether the
	// process has ended by the time they were delivered.
	events []OutputEvent
	exited bool
	// hold blocks a follow before the exit, until the context ends.
	hold bool
}

func (f *fakeBackend) abs(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/workspace/" + p
	}
	return path.Clean(p)
}

func (f *fakeBackend) ReadFile(_ context.Context, _, p string) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.files[f.abs(p)]
	if !ok {
		return nil, errdefs.New(errdefs.ErrNotFound, "%s not found", p)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (f *fakeBackend) WriteFile(_ context.Context, _, p string, r io.Reader, _ uint32) (int64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	f.files[f.abs(p)] = b
	f.mu.Unlock()
	return int64(len(b)), nil
}

func (f *fakeBackend) ProcessOutput(ctx context.Context, _, _ string, offset int64, follow bool, fn func(OutputEvent) error) error {
	for _, ev := range f.events {
		if ev.Kind == "output" && ev.Offset+int64(len(ev.Data)) <= offset {
			continue
		}
		if ev.Kind == "output" && ev.Offset < offset {
			ev.Data, ev.Offset = ev.Data[offset-ev.Offset:], offset
		}
		if ev.Kind == "exit" && follow && f.hold {
			<-ctx.Done()
			return ctx.Err()
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeBackend) GetProcess(context.Context, string, string) (*api.Process, error) {
	var n int64
	for _, ev := range f.events {
		if ev.Kind == "output" {
			n = ev.Offset + int64(len(ev.Data))
		}
	}
	p := &api.Process{ID: "p1", State: "running", OutputBytes: n}
	if f.exited {
		code := 3
		p.State, p.ExitCode = "exited", &code
	}
	return p, nil
}

// connect serves the tools over b to an in-memory client.
func connect(t *testing.T, b Backend) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ct, st := mcp.NewInMemoryTransports()
	done := make(chan struct{})
	go func() {
		defer close(done)
		NewServer(b, Options{Log: slog.New(slog.DiscardHandler)}).Run(ctx, st)
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-done
	})
	return cs
}

// callTool calls a tool and returns its text and structured content.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	var texts []string
	for _, c := range res.Content {
		texts = append(texts, c.(*mcp.TextContent).Text)
	}
	if out != nil && !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Join(texts, "\n"), res.IsError
}

func TestReadFileTool(t *testing.T) {
	f := &fakeBackend{files: map[string][]byte{
		"/workspace/t.txt": []byte("héllo world"),
		"/workspace/b":     {'a', 0, 'b'},
	}}
	cs := connect(t, f)
	for _, tc := range []struct {
		args map[string]any
		want FileContent
	}{
		{map[string]any{"path": "t.txt"}, FileContent{Path: "t.txt", Content: "héllo world", Encoding: "utf-8", Bytes: 12}},
		// A cut inside "é" leaves the character for the next read.
		{map[string]any{"path": "t.txt", "max_bytes": 2}, FileContent{Path: "t.txt", Content: "h", Encoding: "utf-8", Bytes: 1, Truncated: true}},
		{map[string]any{"path": "t.txt", "offset": 1, "max_bytes": 2}, FileContent{Path: "t.txt", Content: "é", Encoding: "utf-8", Offset: 1, Bytes: 2, Truncated: true}},
		{map[string]any{"path": "t.txt", "offset": 100}, FileContent{Path: "t.txt", Encoding: "utf-8", Offset: 100}},
		{map[string]any{"path": "b"}, FileContent{Path: "b", Content: "YQBi", Encoding: "base64", Bytes: 3}},
	} {
		tc.args["session_id"] = "s"
		var got FileContent
		if txt, isErr := callTool(t, cs, "read_file", tc.args, &got); isErr {
			t.Errorf("read_file %v: %s", tc.args, txt)
		}
		if got != tc.want {
			t.Errorf("read_file %v = %+v, want %+v", tc.args, got, tc.want)
		}
	}
	if txt, isErr := callTool(t, cs, "read_file", map[string]any{"session_id": "s", "path": "nope"}, nil); !isErr || txt != "not_found: nope not found" {
		t.Errorf("read_file of a missing file: %q, error %v", txt, isErr)
	}
}

func TestEditFileTool(t *testing.T) {
	f := &fakeBackend{files: map[string][]byte{"/workspace/m.go": []byte("x := 1\ny := 1\n")}}
	cs := connect(t, f)
	txt, isErr := callTool(t, cs, "edit_file", map[string]any{"session_id": "s", "path": "m.go", "old_string": " := 1", "new_string": " := 2"}, nil)
	if !isErr || !strings.HasPrefix(txt, "invalid_argument: old_string occurs 2 times in m.go (at lines 1, 2)") {
		t.Errorf("two matches: %q", txt)
	}
	var res EditResult
	if txt, isErr := callTool(t, cs, "edit_file", map[string]any{"session_id": "s", "path": "m.go", "old_string": "y := 1", "new_string": "y := 2"}, &res); isErr {
		t.Fatal(txt)
	}
	if got := string(f.files["/workspace/m.go"]); got != "x := 1\ny := 2\n" || res != (EditResult{Path: "m.go", Replacements: 1, Bytes: 14}) {
		t.Errorf("after the edit: %q, %+v", got, res)
	}
	if txt, isErr := callTool(t, cs, "edit_file", map[string]any{"session_id": "s", "path": "m.go", "old_string": "", "new_string": "z"}, nil); !isErr || !strings.HasPrefix(txt, "invalid_argument: ") {
		t.Errorf("empty old_string: %q", txt)
	}
}

func TestProcessOutputTool(t *testing.T) {
	out := func(off int64, s string) OutputEvent {
		return OutputEvent{Kind: "output", Offset: off, Data: []byte(s)}
	}
	tests := []struct {
		name string
		f    *fakeBackend
		args map[string]any
		want ProcessOutput
	}{{
		name: "exited",
		f:    &fakeBackend{events: []OutputEvent{out(0, "ab"), out(2, "cd"), {Kind: "exit", ExitCode: 3}}, exited: true},
		want: ProcessOutput{Output: "abcd", NextOffset: 4, ExitCode: new(3)},
	}, {
		name: "from an offset",
		f:    &fakeBackend{events: []OutputEvent{out(0, "ab"), out(2, "cd"), {Kind: "exit", ExitCode: 3}}, exited: true},
		args: map[string]any{"offset": 3},
		want: ProcessOutput{Output: "d", Offset: 3, NextOffset: 4, ExitCode: new(3)},
	}, {
		name: "running",
		f:    &fakeBackend{events: []OutputEvent{out(0, "ab")}},
		want: ProcessOutput{Output: "ab", NextOffset: 2, Running: true},
	}, {
		name: "max_bytes, not splitting a character",
		f:    &fakeBackend{events: []OutputEvent{out(0, "aé"), out(3, "z"), {Kind: "exit", ExitCode: 3}}, exited: true},
		args: map[string]any{"max_bytes": 2},
		want: ProcessOutput{Output: "a", NextOffset: 1, MoreOutput: true, ExitCode: new(3)},
	}, {
		name: "a gap",
		f:    &fakeBackend{events: []OutputEvent{{Kind: "gap", From: 0, To: 5}, out(5, "x")}},
		want: ProcessOutput{Output: "x", Offset: 5, NextOffset: 6, DroppedBytes: 5, Running: true},
	}, {
		name: "nothing new from the end",
		f:    &fakeBackend{events: []OutputEvent{out(0, "ab")}},
		args: map[string]any{"offset": -10, "max_bytes": 1},
		want: ProcessOutput{Output: "a", NextOffset: 1, MoreOutput: true, Running: true},
	}, {
		name: "a bounded wait",
		f:    &fakeBackend{events: []OutputEvent{out(0, "ab"), {Kind: "exit"}}, hold: true},
		args: map[string]any{"wait_seconds": 0.2},
		want: ProcessOutput{Output: "ab", NextOffset: 2, Running: true},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs := connect(t, tc.f)
			args := map[string]any{"session_id": "s", "process_id": "p1"}
			for k, v := range tc.args {
				args[k] = v
			}
			var got ProcessOutput
			start := time.Now()
			if txt, isErr := callTool(t, cs, "process_output", args, &got); isErr {
				t.Fatal(txt)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("process_output %v (-want +got):\n%s", args, diff)
			}
			if time.Since(start) > 10*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
		})
	}
}

// TestArgumentErrors: arguments that do not fit a tool's schema are tool
// errors with code invalid_argument, not protocol errors.
func TestArgumentErrors(t *testing.T) {
	cs := connect(t, &fakeBackend{})
	for _, args := range []map[string]any{
		{"path": "x"}, // no session_id
		{"session_id": "s", "path": "x", "max_byte": 1},    // unknown
		{"session_id": "s", "path": 7},                     // wrong type
		{"session_id": "s", "path": "x", "max_bytes": -1},  // the tool's own check
		{"session_id": "s", "path": "x", "offset": "zero"}, // wrong type
	} {
		txt, isErr := callTool(t, cs, "read_file", args, nil)
		if !isErr || !strings.HasPrefix(txt, "invalid_argument: ") {
			t.Errorf("read_file %v: %q, error %v; want an invalid_argument tool error", args, txt, isErr)
		}
	}
}

// TestToolSchemas: every tool documents every input property, and no
// input property is a type list ("string or null").
func TestToolSchemas(t *testing.T) {
	cs := connect(t, &fakeBackend{})
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
		var s struct {
			Properties map[string]struct {
				Type        any    `json:"type"`
				Description string `json:"description"`
			} `json:"properties"`
		}
		b, _ := json.Marshal(tool.InputSchema)
		json.Unmarshal(b, &s)
		for name, p := range s.Properties {
			if p.Description == "" {
				t.Errorf("%s.%s has no description", tool.Name, name)
			}
			if _, ok := p.Type.(string); !ok {
				t.Errorf("%s.%s has type %v, want one type", tool.Name, name, p.Type)
			}
		}
		if tool.Annotations == nil {
			t.Errorf("%s has no annotations", tool.Name)
		}
	}
	if !slices.Contains(names, "edit_file") || len(names) != 14 {
		t.Errorf("tools: %v", names)
	}
}

// typeLists returns the paths in a JSON schema whose "type" is a list.
func typeLists(v any, at string) []string {
	var found []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k == "type" {
				if _, ok := x.([]any); ok {
					found = append(found, at)
				}
				continue
			}
			found = append(found, typeLists(x, at+"/"+k)...)
		}
	case []any:
		for i, x := range v {
			found = append(found, typeLists(x, fmt.Sprintf("%s/%d", at, i))...)
		}
	}
	return found
}

// TestNoTypeLists: no schema, input or output, at any depth, has a type
// list such as ["string","null"].
func TestNoTypeLists(t *testing.T) {
	cs := connect(t, &fakeBackend{})
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range lt.Tools {
		for kind, s := range map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema} {
			b, _ := json.Marshal(s)
			var v any
			json.Unmarshal(b, &v)
			if l := typeLists(v, ""); len(l) > 0 {
				t.Errorf("%s's %s schema has type lists at %v", tool.Name, kind, l)
			}
		}
	}
}

// TestToolAnnotations: every tool says, on the wire, whether it only reads,
// destroys, can be repeated and reaches outside its session. The table is
// the decision; a new tool fails here until it is added with its hints.
func TestToolAnnotations(t *testing.T) {
	type hints struct{ readOnly, destructive, idempotent, openWorld bool }
	want := map[string]hints{
		"create_session":  {idempotent: true}, // with an id: the same session again
		"get_session":     {readOnly: true, idempotent: true},
		"list_sessions":   {readOnly: true, idempotent: true},
		"delete_session":  {destructive: true, idempotent: true},
		"exec":            {destructive: true},
		"start_process":   {},
		"process_output":  {readOnly: true},
		"read_file":       {readOnly: true, idempotent: true},
		"write_file":      {destructive: true, idempotent: true},
		"edit_file":       {destructive: true},
		"list_files":      {readOnly: true, idempotent: true},
		"delete_file":     {destructive: true, idempotent: true},
		"search_files":    {readOnly: true, idempotent: true},
		"network_denials": {readOnly: true, idempotent: true},
	}
	cs := connect(t, &fakeBackend{})
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tool := range lt.Tools {
		seen[tool.Name] = true
		w, ok := want[tool.Name]
		if !ok {
			t.Errorf("tool %s has no row in this test: decide its hints", tool.Name)
			continue
		}
		// The wire form, as a client reads it: every hint present.
		b, _ := json.Marshal(tool.Annotations)
		var got map[string]any
		json.Unmarshal(b, &got)
		for name, v := range map[string]bool{"readOnlyHint": w.readOnly, "destructiveHint": w.destructive, "idempotentHint": w.idempotent, "openWorldHint": w.openWorld} {
			if g, ok := got[name].(bool); !ok || g != v {
				t.Errorf("%s: %s = %v, want %v (annotations %s)", tool.Name, name, got[name], v, b)
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("tool %s is not served", name)
		}
	}
}

// execBackend answers exec with a fixed result and keeps the request.
type execBackend struct {
	Backend
	res *api.ExecResult
	got *api.ExecRequest
}

func (b *execBackend) Exec(_ context.Context, _ string, req *api.ExecRequest) (*api.ExecResult, error) {
	b.got = req
	return b.res, nil
}

// TestExecOutputOnce: exec asks for 64 KiB per stream unless told
// otherwise, and output past 16 KiB travels once, in the text content.
func TestExecOutputOnce(t *testing.T) {
	b := &execBackend{res: &api.ExecResult{Stdout: "small\n"}}
	cs := connect(t, b)
	var out ExecOutput
	txt, isErr := callTool(t, cs, "exec", map[string]any{"session_id": "s", "command": "x"}, &out)
	if isErr || b.got.MaxOutputBytes != 64<<10 {
		t.Fatalf("exec: %q, asked for %d bytes per stream; want 65536", txt, b.got.MaxOutputBytes)
	}
	if out.Stdout != "small\n" || out.OutputInText || !strings.Contains(txt, "stdout:\nsmall\n") {
		t.Errorf("small output: structured %+v, text %q; want it in both", out, txt)
	}
	callTool(t, cs, "exec", map[string]any{"session_id": "s", "command": "x", "max_output_bytes": 5}, &out)
	if b.got.MaxOutputBytes != 5 {
		t.Errorf("max_output_bytes 5 asked for %d", b.got.MaxOutputBytes)
	}

	big := strings.Repeat("a", 20<<10)
	b.res = &api.ExecResult{Stdout: big, Stderr: "warn\n", StdoutBase64: "YQ=="}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"session_id": "s", "command": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(res)
	if n := strings.Count(string(raw), big); n != 1 {
		t.Errorf("20 KiB of stdout travels %d times in the result, want once", n)
	}
	out = ExecOutput{}
	sc, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(sc, &out)
	if !out.OutputInText || out.Stdout != "" || out.Stderr != "" || out.StdoutBase64 != "" {
		t.Errorf("large output: structured %s; want output_in_text and no streams", sc)
	}
	if txt := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(txt, big) || !strings.Contains(txt, "stderr:\nwarn\n") {
		t.Errorf("large output: the text content lacks the streams")
	}
}
