package cli

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/warrenhq/warren/api"
)

// now is the clock of every test.
var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// call is one request the fake daemon received.
type call struct {
	Method, Path string
	Query        url.Values
	Auth         string
	Body         string
	Accept       string
}

// reply is a canned answer.
type reply struct {
	status int
	header http.Header
	body   string
}

// fakeAPI is a daemon that answers "METHOD /escaped/path" from routes and
// records every call. Unknown routes answer a not_found envelope.
type fakeAPI struct {
	t      *testing.T
	routes map[string]reply
	mu     sync.Mutex
	calls  []call
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("read request body: %v", err)
	}
	f.mu.Lock()
	f.calls = append(f.calls, call{r.Method, r.URL.EscapedPath(), r.URL.Query(), r.Header.Get("Authorization"), string(body), r.Header.Get("Accept")})
	f.mu.Unlock()
	rep, ok := f.routes[r.Method+" "+r.URL.EscapedPath()]
	if !ok {
		rep = reply{status: 404, body: `{"error":{"code":"not_found","message":"no route ` + r.Method + " " + r.URL.Path + `"}}`}
	}
	for k, v := range rep.header {
		w.Header()[k] = v
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(rep.status)
	io.WriteString(w, rep.body)
}

func (f *fakeAPI) recorded() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func newFakeAPI(t *testing.T, routes map[string]reply) (*fakeAPI, *httptest.Server) {
	t.Helper()
	f := &fakeAPI{t: t, routes: routes}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

// runCLI runs the command line against srv with WARREN_ADDR and
// WARREN_TOKEN set, and returns its output and exit code.
func runCLI(t *testing.T, srv *httptest.Server, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := map[string]string{"WARREN_ADDR": srv.URL, "WARREN_TOKEN": "env-token"}
	code = run(t.Context(), args, &app{
		stdin:  strings.NewReader(stdin),
		stdout: &out,
		stderr: &errOut,
		getenv: func(k string) string { return env[k] },
		now:    func() time.Time { return now },
	})
	return out.String(), errOut.String(), code
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	if a == "" || b == "" {
		return a == b
	}
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("bad JSON %q: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		return false
	}
	return cmp.Equal(va, vb)
}

var (
	demo = api.Session{
		ID: "demo", Image: "python", State: "running",
		CreatedAt: now.Add(-5 * time.Minute), LastUsedAt: now.Add(-time.Minute), ExpiresAt: now.Add(25 * time.Minute),
		Cwd: "/workspace", Limits: api.Limits{MemoryMB: 512}, Network: "none",
		Usage: &api.Usage{MemoryBytes: 12 << 20, Pids: 2},
	}
	old = api.Session{
		ID: "old", State: "failed", CreatedAt: now.Add(-50 * time.Hour), ExpiresAt: now.Add(-time.Minute),
		Cwd: "/workspace", Network: "none", Reason: "agent died",
	}
)

var (
	// sse is the header of an event stream.
	sse = http.Header{"Content-Type": {"text/event-stream"}}

	exitCode3   = 3
	exitCode137 = 137
	procRunning = api.Process{ID: "p1", Command: "python3 -m http.server", State: "running", Pid: 42,
		StartedAt: now.Add(-5 * time.Minute), OutputBytes: 10}
	procExited = api.Process{ID: "p2", Command: "make test", State: "exited", Pid: 43, ExitCode: &exitCode3,
		StartedAt: now.Add(-2 * time.Hour), OutputBytes: 1 << 20, OutputStart: 4096}
	procKilled = api.Process{ID: "p3", Argv: []string{"top", "-d", "1"}, TTY: true, State: "exited", Pid: 44,
		ExitCode: &exitCode137, Signal: "SIGKILL", StartedAt: now.Add(-30 * time.Second)}
)

// event formats one server-sent event.
func event(name string, data any) string {
	b, _ := json.Marshal(data)
	return "event: " + name + "\ndata: " + string(b) + "\n\n"
}

func result(r api.ExecResult) string {
	b, _ := json.Marshal(r)
	return string(b)
}

func TestCommands(t *testing.T) {
	notFound := reply{status: 404, body: `{"error":{"code":"not_found","message":"session \"nope\" not found"}}`}
	tests := []struct {
		name       string
		args       []string
		stdin      string
		routes     map[string]reply
		wantCalls  []call // Body compared as JSON; Auth "Bearer env-token" unless set; Accept and Query when set
		wantStdout string
		wantStderr string
		wantCode   int
	}{
		{
			name: "session create with every flag",
			args: []string{"session", "create", "--id", "demo", "--image", "python", "--env", "A=1", "--env", "B=x=y",
				"--cwd", "/src", "--memory", "512", "--cpus", "1.5", "--pids", "64", "--ttl", "30m", "--label", "team=ml"},
			routes: map[string]reply{"POST /v1/sessions": {status: 201, body: mustJSON(t, demo)}},
			wantCalls: []call{{Method: "POST", Path: "/v1/sessions", Body: `{"id":"demo","image":"python",
				"env":{"A":"1","B":"x=y"},"cwd":"/src","limits":{"memory_mb":512,"cpus":1.5,"pids":64},
				"ttl_seconds":1800,"labels":{"team":"ml"}}`}},
			wantStdout: "demo\n",
		},
		{
			name:       "session create --json, existing id",
			args:       []string{"session", "create", "--id", "demo", "--json"},
			routes:     map[string]reply{"POST /v1/sessions": {status: 200, body: mustJSON(t, demo)}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions", Body: `{"id":"demo"}`}},
			wantStdout: indentJSON(t, demo),
		},
		{
			name:     "session create with a bad --env",
			args:     []string{"session", "create", "--env", "NOVALUE"},
			wantCode: 1, wantStderr: "warren: --env \"NOVALUE\": want KEY=VALUE\n",
		},
		{
			name: "session ls",
			args: []string{"session", "ls"},
			routes: map[string]reply{"GET /v1/sessions": {status: 200,
				body: mustJSON(t, api.SessionList{Sessions: []api.Session{demo, old}})}},
			wantCalls: []call{{Method: "GET", Path: "/v1/sessions"}},
			wantStdout: "" +
				"ID    IMAGE   STATE    CREATED  EXPIRES  MEMORY\n" +
				"demo  python  running  5m ago   in 25m   12MiB/512MiB\n" +
				"old   -       failed   2d ago   expired  -\n",
		},
		{
			name: "session ls in a fleet",
			args: []string{"session", "ls"},
			routes: map[string]reply{"GET /v1/sessions": {status: 200,
				body: mustJSON(t, api.SessionList{Sessions: []api.Session{withNode(demo, "n1"), withNode(old, "n2")}})}},
			wantCalls: []call{{Method: "GET", Path: "/v1/sessions"}},
			wantStdout: "" +
				"ID    IMAGE   STATE    CREATED  EXPIRES  MEMORY        NODE\n" +
				"demo  python  running  5m ago   in 25m   12MiB/512MiB  n1\n" +
				"old   -       failed   2d ago   expired  -             n2\n",
		},
		{
			name:       "session ls --json, none",
			args:       []string{"session", "ls", "--json"},
			routes:     map[string]reply{"GET /v1/sessions": {status: 200, body: `{"sessions":[]}`}},
			wantCalls:  []call{{Method: "GET", Path: "/v1/sessions"}},
			wantStdout: "[]\n",
		},
		{
			name:       "session get",
			args:       []string{"session", "get", "demo"},
			routes:     map[string]reply{"GET /v1/sessions/demo": {status: 200, body: mustJSON(t, demo)}},
			wantCalls:  []call{{Method: "GET", Path: "/v1/sessions/demo"}},
			wantStdout: indentJSON(t, demo),
		},
		{
			name:       "session get of a missing session",
			args:       []string{"session", "get", "nope"},
			routes:     map[string]reply{"GET /v1/sessions/nope": notFound},
			wantCalls:  []call{{Method: "GET", Path: "/v1/sessions/nope"}},
			wantStderr: "warren: get session nope: not_found: session \"nope\" not found\n",
			wantCode:   1,
		},
		{
			name: "session rm reports failures and goes on",
			args: []string{"session", "rm", "a", "nope", "c"},
			routes: map[string]reply{
				"DELETE /v1/sessions/a":    {status: 204},
				"DELETE /v1/sessions/nope": notFound,
				"DELETE /v1/sessions/c":    {status: 204},
			},
			wantCalls: []call{
				{Method: "DELETE", Path: "/v1/sessions/a"},
				{Method: "DELETE", Path: "/v1/sessions/nope"},
				{Method: "DELETE", Path: "/v1/sessions/c"},
			},
			wantStdout: "a\nc\n",
			wantStderr: "warren: delete session nope: not_found: session \"nope\" not found\n",
			wantCode:   1,
		},
		{
			name:       "exec runs the words through the shell",
			args:       []string{"exec", "demo", "--", "cd", "/tmp"},
			routes:     map[string]reply{"POST /v1/sessions/demo/exec": {status: 200, body: result(api.ExecResult{})}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/exec", Body: `{"command":"cd /tmp"}`}},
			wantStdout: "",
		},
		{
			name: "exec propagates the exit code and both streams",
			args: []string{"exec", "demo", "--", "echo out; echo err >&2; exit 3"},
			routes: map[string]reply{"POST /v1/sessions/demo/exec": {status: 200,
				body: result(api.ExecResult{Stdout: "out\n", Stderr: "err\n", ExitCode: 3})}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/exec", Body: `{"command":"echo out; echo err >&2; exit 3"}`}},
			wantStdout: "out\n", wantStderr: "err\n", wantCode: 3,
		},
		{
			name:       "exec --argv with per-call flags",
			args:       []string{"exec", "--argv", "--timeout", "1500ms", "--cwd", "/x", "--env", "A=1", "demo", "--", "ls", "-la"},
			routes:     map[string]reply{"POST /v1/sessions/demo/exec": {status: 200, body: result(api.ExecResult{Stdout: "total 0\n"})}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/exec", Body: `{"argv":["ls","-la"],"timeout_ms":1500,"cwd":"/x","env":{"A":"1"}}`}},
			wantStdout: "total 0\n",
		},
		{
			name:       "exec without -- when the command has no flags",
			args:       []string{"exec", "demo", "pwd"},
			routes:     map[string]reply{"POST /v1/sessions/demo/exec": {status: 200, body: result(api.ExecResult{Stdout: "/tmp\n"})}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/exec", Body: `{"command":"pwd"}`}},
			wantStdout: "/tmp\n",
		},
		{
			name:       "exec -i sends stdin as text",
			args:       []string{"exec", "-i", "demo", "--", "wc", "-c"},
			stdin:      "hello",
			routes:     map[string]reply{"POST /v1/sessions/demo/exec": {status: 200, body: result(api.ExecResult{Stdout: "5\n"})}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/exec", Body: `{"command":"wc -c","stdin":"hello"}`}},
			wantStdout: "5\n",
		},
		{
			name:       "exec --stdin sends binary stdin as base64",
			args:       []string{"exec", "--stdin", "demo", "--", "xxd"},
			stdin:      "\xff\x00\x01",
			routes:     map[string]reply{"POST /v1/sessions/demo/exec": {status: 200, body: result(api.ExecResult{})}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/exec", Body: `{"command":"xxd","stdin_base64":"/wAB"}`}},
			wantStdout: "",
		},
		{
			name: "exec writes the exact bytes of base64 output",
			args: []string{"exec", "demo", "--", "head -c3 /bin/sh"},
			routes: map[string]reply{"POST /v1/sessions/demo/exec": {status: 200, body: result(api.ExecResult{
				Stdout: "\ufffdEL", StdoutBase64: "f0VM", Stderr: "\ufffd", StderrBase64: "/w=="})}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/exec", Body: `{"command":"head -c3 /bin/sh"}`}},
			wantStdout: "\x7fEL", wantStderr: "\xff",
		},
		{
			name: "exec notes what went wrong",
			args: []string{"exec", "demo", "--", "sleep 100"},
			routes: map[string]reply{"POST /v1/sessions/demo/exec": {status: 200, body: result(api.ExecResult{
				Stdout: "partial", ExitCode: 137, Signal: "SIGKILL", TimedOut: true, Truncated: true, ShellRestarted: true, OOMKilled: true})}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/exec", Body: `{"command":"sleep 100"}`}},
			wantStdout: "partial",
			wantStderr: "warren: the command timed out and was killed\n" +
				"warren: the kernel's OOM killer ended a process of the command: the session hit its memory limit\n" +
				"warren: output was truncated: it exceeded the output cap\n" +
				"warren: the session's shell ended and was restarted: cwd and exported variables were kept, other shell state was lost\n",
			wantCode: 137,
		},
		{
			name: "exec maps an exit code no process can have to 1",
			args: []string{"exec", "demo", "--", "x"},
			routes: map[string]reply{"POST /v1/sessions/demo/exec": {status: 200, body: result(api.ExecResult{
				ExitCode: -1, Signal: "SIGSEGV"})}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/exec", Body: `{"command":"x"}`}},
			wantStderr: "warren: the command was killed by SIGSEGV\n",
			wantCode:   1,
		},
		{
			name:       "exec in a missing session",
			args:       []string{"exec", "nope", "--", "true"},
			routes:     map[string]reply{"POST /v1/sessions/nope/exec": notFound},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/nope/exec", Body: `{"command":"true"}`}},
			wantStderr: "warren: exec in session nope: not_found: session \"nope\" not found\n",
			wantCode:   1,
		},
		{
			name:       "exec without a command",
			args:       []string{"exec", "demo"},
			wantStderr: "warren: no command given: put it after --\n",
			wantCode:   1,
		},
		{
			name:       "exec with words between the session and --",
			args:       []string{"exec", "demo", "ls", "--", "-la"},
			wantStderr: "warren: unexpected arguments [\"ls\"] before --\n",
			wantCode:   1,
		},
		{
			name: "exec streams the output as it comes",
			args: []string{"exec", "demo", "--", "make"},
			routes: map[string]reply{"POST /v1/sessions/demo/exec": {status: 200, header: sse,
				body: event("stdout", api.OutputChunk{Text: "building\n"}) + ": keep-alive\n\n" +
					event("stderr", api.OutputChunk{Base64: "/w=="}) + event("stdout", api.OutputChunk{Text: "done\n"}) +
					event("exit", api.ExecResult{ExitCode: 2, Truncated: true})}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/exec", Body: `{"command":"make"}`, Accept: "text/event-stream"}},
			wantStdout: "building\ndone\n",
			wantStderr: "\xff" + "warren: output was truncated: it exceeded the output cap\n",
			wantCode:   2,
		},
		{
			name: "exec reports an error after the stream started",
			args: []string{"exec", "demo", "--", "make"},
			routes: map[string]reply{"POST /v1/sessions/demo/exec": {status: 200, header: sse,
				body: event("stdout", api.OutputChunk{Text: "partial"}) +
					event("error", api.Error{Error: api.ErrorBody{Code: "unavailable", Message: "the session's sandbox died"}})}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/exec", Body: `{"command":"make"}`}},
			wantStdout: "partial",
			wantStderr: "warren: exec in session demo: unavailable: the session's sandbox died\n",
			wantCode:   1,
		},
		{
			name: "exec --no-stream makes the plain call",
			args: []string{"exec", "--no-stream", "demo", "--", "echo hi"},
			routes: map[string]reply{"POST /v1/sessions/demo/exec": {status: 200,
				body: result(api.ExecResult{Stdout: "hi\n", Stderr: "note\n", ExitCode: 0})}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/exec", Body: `{"command":"echo hi"}`, Accept: "application/json"}},
			wantStdout: "hi\n", wantStderr: "note\n",
		},
		{
			name:       "start",
			args:       []string{"start", "demo", "--", "python3", "-m", "http.server"},
			routes:     map[string]reply{"POST /v1/sessions/demo/processes": {status: 201, body: mustJSON(t, procRunning)}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/processes", Body: `{"command":"python3 -m http.server"}`}},
			wantStdout: "p1\n",
		},
		{
			name:       "start --tty --stdin --argv with per-process flags",
			args:       []string{"start", "-t", "-i", "--argv", "--cwd", "/src", "--env", "A=1", "demo", "--", "top", "-d", "1"},
			routes:     map[string]reply{"POST /v1/sessions/demo/processes": {status: 201, body: mustJSON(t, procRunning)}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/processes", Body: `{"argv":["top","-d","1"],"tty":true,"stdin":true,"cwd":"/src","env":{"A":"1"}}`}},
			wantStdout: "p1\n",
		},
		{
			name: "start when the session is full",
			args: []string{"start", "demo", "--", "sleep", "1"},
			routes: map[string]reply{"POST /v1/sessions/demo/processes": {status: 429,
				body: `{"error":{"code":"resource_exhausted","message":"the session holds its maximum of 64 processes"}}`}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/processes", Body: `{"command":"sleep 1"}`}},
			wantStderr: "warren: start a process in session demo: resource_exhausted: the session holds its maximum of 64 processes\n",
			wantCode:   1,
		},
		{
			name:       "start without a command",
			args:       []string{"start", "demo"},
			wantStderr: "warren: no command given: put it after --\n",
			wantCode:   1,
		},
		{
			name: "ps",
			args: []string{"ps", "demo"},
			routes: map[string]reply{"GET /v1/sessions/demo/processes": {status: 200,
				body: mustJSON(t, api.ProcessList{Processes: []api.Process{procRunning, procExited, procKilled}})}},
			wantCalls: []call{{Method: "GET", Path: "/v1/sessions/demo/processes"}},
			wantStdout: "" +
				"ID  STATE    PID  EXIT     STARTED  COMMAND\n" +
				"p1  running  42   -        5m ago   python3 -m http.server\n" +
				"p2  exited   43   3        2h ago   make test\n" +
				"p3  exited   44   SIGKILL  30s ago  top -d 1\n",
		},
		{
			name:       "ps --json, none",
			args:       []string{"ps", "--json", "demo"},
			routes:     map[string]reply{"GET /v1/sessions/demo/processes": {status: 200, body: `{"processes":[]}`}},
			wantCalls:  []call{{Method: "GET", Path: "/v1/sessions/demo/processes"}},
			wantStdout: "[]\n",
		},
		{
			name:       "ps --json",
			args:       []string{"ps", "--json", "demo"},
			routes:     map[string]reply{"GET /v1/sessions/demo/processes": {status: 200, body: mustJSON(t, api.ProcessList{Processes: []api.Process{procExited}})}},
			wantCalls:  []call{{Method: "GET", Path: "/v1/sessions/demo/processes"}},
			wantStdout: indentJSON(t, []api.Process{procExited}),
		},
		{
			name:       "ps of a missing session",
			args:       []string{"ps", "nope"},
			routes:     map[string]reply{"GET /v1/sessions/nope/processes": notFound},
			wantCalls:  []call{{Method: "GET", Path: "/v1/sessions/nope/processes"}},
			wantStderr: "warren: list processes of session nope: not_found: session \"nope\" not found\n",
			wantCode:   1,
		},
		{
			name: "logs prints the raw output",
			args: []string{"logs", "demo", "p1"},
			routes: map[string]reply{"GET /v1/sessions/demo/processes/p1/output": {status: 200,
				header: http.Header{"Content-Type": {"application/octet-stream"}, "Warren-Output-Offset": {"0"}}, body: "out\n\xfferr\n"}},
			wantCalls: []call{{Method: "GET", Path: "/v1/sessions/demo/processes/p1/output",
				Query: url.Values{"offset": {"0"}, "follow": {"false"}}, Accept: "application/octet-stream"}},
			wantStdout: "out\n\xfferr\n",
		},
		{
			name: "logs -f --offset notes dropped bytes",
			args: []string{"logs", "-f", "--offset", "100", "demo", "p1"},
			routes: map[string]reply{"GET /v1/sessions/demo/processes/p1/output": {status: 200,
				header: http.Header{"Content-Type": {"application/octet-stream"}, "Warren-Output-Offset": {"4196"}}, body: "tail\n"}},
			wantCalls: []call{{Method: "GET", Path: "/v1/sessions/demo/processes/p1/output",
				Query: url.Values{"offset": {"100"}, "follow": {"true"}}}},
			wantStdout: "tail\n",
			wantStderr: "warren: 4096 bytes of output were dropped before they could be read; the output starts at offset 4196\n",
		},
		{
			name:       "logs of a missing process",
			args:       []string{"logs", "demo", "p9"},
			routes:     map[string]reply{"GET /v1/sessions/demo/processes/p9/output": {status: 404, body: `{"error":{"code":"not_found","message":"process \"p9\" not found"}}`}},
			wantCalls:  []call{{Method: "GET", Path: "/v1/sessions/demo/processes/p9/output"}},
			wantStderr: "warren: output of process p9 in session demo: not_found: process \"p9\" not found\n",
			wantCode:   1,
		},
		{
			name:       "logs with a negative offset",
			args:       []string{"logs", "--offset", "-1", "demo", "p1"},
			wantStderr: "warren: --offset must not be negative\n",
			wantCode:   1,
		},
		{
			name:      "kill removes the process",
			args:      []string{"kill", "demo", "p1"},
			routes:    map[string]reply{"DELETE /v1/sessions/demo/processes/p1": {status: 204}},
			wantCalls: []call{{Method: "DELETE", Path: "/v1/sessions/demo/processes/p1"}},
		},
		{
			name:      "kill --signal signals it",
			args:      []string{"kill", "--signal", "INT", "demo", "p1"},
			routes:    map[string]reply{"POST /v1/sessions/demo/processes/p1/signal": {status: 204}},
			wantCalls: []call{{Method: "POST", Path: "/v1/sessions/demo/processes/p1/signal", Body: `{"signal":"INT"}`}},
		},
		{
			name: "kill --signal with a bad signal",
			args: []string{"kill", "-s", "NOPE", "demo", "p1"},
			routes: map[string]reply{"POST /v1/sessions/demo/processes/p1/signal": {status: 400,
				body: `{"error":{"code":"invalid_argument","message":"unknown signal \"NOPE\""}}`}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/sessions/demo/processes/p1/signal", Body: `{"signal":"NOPE"}`}},
			wantStderr: "warren: signal process p1 in session demo: invalid_argument: unknown signal \"NOPE\"\n",
			wantCode:   1,
		},
		{
			name: "run with image and limits",
			args: []string{"run", "--image", "python", "--memory", "256", "--cpus", "0.5", "--pids", "32", "--timeout", "10s", "--", "python3", "-V"},
			routes: map[string]reply{"POST /v1/run": {status: 200,
				body: result(api.ExecResult{Stdout: "Python 3.12.1\n", ExitCode: 0})}},
			wantCalls: []call{{Method: "POST", Path: "/v1/run",
				Body: `{"image":"python","limits":{"memory_mb":256,"cpus":0.5,"pids":32},"command":"python3 -V","timeout_ms":10000}`}},
			wantStdout: "Python 3.12.1\n",
		},
		{
			name:       "run --argv -i propagates the exit code",
			args:       []string{"run", "--argv", "-i", "--", "sh", "-c", "cat; exit 7"},
			stdin:      "in",
			routes:     map[string]reply{"POST /v1/run": {status: 200, body: result(api.ExecResult{Stdout: "in", ExitCode: 7})}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/run", Body: `{"argv":["sh","-c","cat; exit 7"],"stdin":"in"}`}},
			wantStdout: "in", wantCode: 7,
		},
		{
			name: "run when the daemon is full",
			args: []string{"run", "--", "true"},
			routes: map[string]reply{"POST /v1/run": {status: 429, header: http.Header{"Retry-After": {"3"}},
				body: `{"error":{"code":"resource_exhausted","message":"the daemon holds its maximum of 1000 sessions"}}`}},
			wantCalls:  []call{{Method: "POST", Path: "/v1/run", Body: `{"command":"true"}`}},
			wantStderr: "warren: run: resource_exhausted: the daemon holds its maximum of 1000 sessions\n",
			wantCode:   1,
		},
		{
			name: "--token wins over WARREN_TOKEN",
			args: []string{"--token", "flag-token", "image", "ls"},
			routes: map[string]reply{"GET /v1/images": {status: 200, body: mustJSON(t, api.ImageList{Images: []api.Image{
				{Name: "python", Digest: "sha256:0123456789abcdef0123", Size: 150 << 20, CreatedAt: now.Add(-3 * time.Hour)},
				{Name: "tiny", Digest: "sha256:ab", Size: 1536, CreatedAt: now.Add(-30 * time.Second)},
			}})}},
			wantCalls: []call{{Method: "GET", Path: "/v1/images", Auth: "Bearer flag-token"}},
			wantStdout: "" +
				"NAME    DIGEST               SIZE    CREATED\n" +
				"python  sha256:0123456789ab  150MiB  3h ago\n" +
				"tiny    sha256:ab            1.5KiB  30s ago\n",
		},
		{
			name:       "image ls --json",
			args:       []string{"image", "ls", "--json"},
			routes:     map[string]reply{"GET /v1/images": {status: 200, body: `{"images":null}`}},
			wantCalls:  []call{{Method: "GET", Path: "/v1/images"}},
			wantStdout: "[]\n",
		},
		{
			name: "a proxy's HTML error",
			args: []string{"session", "ls"},
			routes: map[string]reply{"GET /v1/sessions": {status: 502, header: http.Header{"Content-Type": {"text/html"}},
				body: "<html><title>502 Bad Gateway</title></html>"}},
			wantCalls:  []call{{Method: "GET", Path: "/v1/sessions"}},
			wantStderr: "warren: list sessions: unavailable: HTTP 502 Bad Gateway\n",
			wantCode:   1,
		},
		{
			name:       "unknown command",
			args:       []string{"frobnicate"},
			wantStderr: "warren: unknown command \"frobnicate\" for \"warren\"\n",
			wantCode:   1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFakeAPI(t, tc.routes)
			stdout, stderr, code := runCLI(t, srv, tc.stdin, tc.args...)
			if code != tc.wantCode {
				t.Errorf("warren %q exit code = %d, want %d (stderr %q)", tc.args, code, tc.wantCode, stderr)
			}
			if diff := cmp.Diff(tc.wantStdout, stdout); diff != "" {
				t.Errorf("warren %q stdout mismatch (-want +got):\n%s", tc.args, diff)
			}
			if diff := cmp.Diff(tc.wantStderr, stderr); diff != "" {
				t.Errorf("warren %q stderr mismatch (-want +got):\n%s", tc.args, diff)
			}
			got := f.recorded()
			if len(got) != len(tc.wantCalls) {
				t.Fatalf("warren %q made %d calls, want %d: %+v", tc.args, len(got), len(tc.wantCalls), got)
			}
			for i, want := range tc.wantCalls {
				g := got[i]
				if g.Method != want.Method || g.Path != want.Path {
					t.Errorf("call %d = %s %s, want %s %s", i, g.Method, g.Path, want.Method, want.Path)
				}
				if want.Accept != "" && g.Accept != want.Accept {
					t.Errorf("call %d Accept = %q, want %q", i, g.Accept, want.Accept)
				}
				if want.Query != nil && !cmp.Equal(g.Query, want.Query) {
					t.Errorf("call %d query = %v, want %v", i, g.Query, want.Query)
				}
				if !sameJSON(t, want.Body, g.Body) {
					t.Errorf("call %d body = %s, want %s", i, g.Body, want.Body)
				}
				wantAuth := want.Auth
				if wantAuth == "" {
					wantAuth = "Bearer env-token"
				}
				if g.Auth != wantAuth {
					t.Errorf("call %d Authorization = %q, want %q", i, g.Auth, wantAuth)
				}
			}
		})
	}
}

func indentJSON(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	if err := printJSON(&b, v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestAddrFlag(t *testing.T) {
	f, srv := newFakeAPI(t, map[string]reply{"GET /v1/sessions": {status: 200, body: `{"sessions":[]}`}})
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"--addr", strings.TrimPrefix(srv.URL, "http://"), "session", "ls", "--json"}, &app{
		stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
		getenv: func(string) string { return "" }, // no WARREN_ADDR: --addr alone must reach srv
		now:    time.Now,
	})
	if code != 0 || len(f.recorded()) != 1 {
		t.Fatalf("--addr without scheme: exit %d, %d calls, stderr %q", code, len(f.recorded()), errOut.String())
	}
	if got := f.recorded()[0].Auth; got != "" {
		t.Errorf("Authorization without a token = %q, want none", got)
	}
}

func TestMainValidatesArgs(t *testing.T) {
	// Fails on its arguments, before any network call.
	if code := Main([]string{"session", "get"}); code != 1 {
		t.Errorf("Main(session get) = %d, want 1", code)
	}
}

// tarEntry is what the tests look at in a tar entry.
type tarEntry struct {
	Name     string
	Type     byte
	Mode     int64
	Linkname string
	Uid, Gid int
	Body     string
}

func readTar(t *testing.T, b []byte) []tarEntry {
	t.Helper()
	var entries []tarEntry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read tar entry %s: %v", hdr.Name, err)
		}
		entries = append(entries, tarEntry{hdr.Name, hdr.Typeflag, hdr.Mode & 0o7777, hdr.Linkname, hdr.Uid, hdr.Gid, string(body)})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return entries
}

// makeTree creates a small directory tree and returns its path.
func makeTree(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "proj")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "sub", "empty"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "a.txt"), []byte("alpha"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "sub", "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Chmod(filepath.Join(dir, "sub", "run.sh"), 0o755))
	must(os.Symlink("../a.txt", filepath.Join(dir, "sub", "link")))
	must(os.Symlink("/etc/passwd", filepath.Join(dir, "abs")))
	return dir
}

func TestCpDirectoryToSession(t *testing.T) {
	dir := makeTree(t)
	f, srv := newFakeAPI(t, map[string]reply{
		"GET /v1/sessions/demo/files/stat": {status: 200, body: `{"name":"workspace","path":"/workspace","type":"dir","size":0,"mode":"0755","mtime":"2026-11-22T10:00:00Z"}`},
		"PUT /v1/sessions/demo/archive":    {status: 200, body: `{"path":"/workspace/proj","size":10240}`},
	})
	stdout, stderr, code := runCLI(t, srv, "", "cp", dir, "demo:/workspace")
	if code != 0 {
		t.Fatalf("warren cp: exit %d, stderr %q", code, stderr)
	}
	if stdout != "" {
		t.Errorf("warren cp stdout = %q, want none", stdout)
	}
	calls := f.recorded()
	if len(calls) != 2 {
		t.Fatalf("warren cp made %d calls, want stat and archive: %+v", len(calls), calls)
	}
	if c := calls[0]; c.Method != "GET" || c.Query.Get("path") != "/workspace" {
		t.Errorf("first call = %s %s?%s, want a stat of /workspace", c.Method, c.Path, c.Query.Encode())
	}
	up := calls[1]
	if up.Method != "PUT" || up.Path != "/v1/sessions/demo/archive" || up.Query.Get("path") != "/workspace/proj" {
		t.Errorf("upload = %s %s?%s, want PUT /v1/sessions/demo/archive?path=/workspace/proj", up.Method, up.Path, up.Query.Encode())
	}
	want := []tarEntry{
		{Name: "a.txt", Type: tar.TypeReg, Mode: 0o644, Body: "alpha"},
		{Name: "abs", Type: tar.TypeSymlink, Mode: 0o777, Linkname: "/etc/passwd"},
		{Name: "sub/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "sub/empty/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "sub/link", Type: tar.TypeSymlink, Mode: 0o777, Linkname: "../a.txt"},
		{Name: "sub/run.sh", Type: tar.TypeReg, Mode: 0o755, Body: "#!/bin/sh\n"},
	}
	if diff := cmp.Diff(want, readTar(t, []byte(up.Body))); diff != "" {
		t.Errorf("uploaded tar mismatch (-want +got):\n%s", diff)
	}
}

func TestCpFileToSession(t *testing.T) {
	src := filepath.Join(t.TempDir(), "tool.sh")
	if err := os.WriteFile(src, []byte("echo hi\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	os.Chmod(src, 0o750)
	tests := []struct {
		name     string
		dst      string
		stat     reply
		wantPath string
	}{
		{"new file", "demo:bin/tool", reply{status: 404, body: `{"error":{"code":"not_found","message":"no such file"}}`}, "bin/tool"},
		{"into a directory", "demo:/usr/local/bin", reply{status: 200, body: `{"name":"bin","path":"/usr/local/bin","type":"dir","size":0,"mode":"0755","mtime":"2026-11-22T10:00:00Z"}`}, "/usr/local/bin/tool.sh"},
		{"into a new directory", "demo:new/", reply{status: 404, body: `{"error":{"code":"not_found","message":"no such file"}}`}, "new/tool.sh"},
		{"onto a file", "demo:old.sh", reply{status: 200, body: `{"name":"old.sh","path":"/workspace/old.sh","type":"file","size":1,"mode":"0644","mtime":"2026-11-22T10:00:00Z"}`}, "old.sh"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFakeAPI(t, map[string]reply{
				"GET /v1/sessions/demo/files/stat": tc.stat,
				"PUT /v1/sessions/demo/files":      {status: 200, body: `{"path":"x","size":8}`},
			})
			if _, stderr, code := runCLI(t, srv, "", "cp", src, tc.dst); code != 0 {
				t.Fatalf("warren cp %s %s: exit %d, stderr %q", src, tc.dst, code, stderr)
			}
			calls := f.recorded()
			if len(calls) != 2 {
				t.Fatalf("made %d calls, want 2: %+v", len(calls), calls)
			}
			w := calls[1]
			want := url.Values{"path": {tc.wantPath}, "mode": {"0750"}}
			if w.Method != "PUT" || w.Path != "/v1/sessions/demo/files" || !cmp.Equal(w.Query, want) || w.Body != "echo hi\n" {
				t.Errorf("write = %s %s %v %q, want PUT /v1/sessions/demo/files %v %q", w.Method, w.Path, w.Query, w.Body, want, "echo hi\n")
			}
		})
	}
}

func TestCpStdinToSession(t *testing.T) {
	f, srv := newFakeAPI(t, map[string]reply{"PUT /v1/sessions/demo/files": {status: 200, body: `{"path":"/workspace/g.txt","size":3}`}})
	if _, stderr, code := runCLI(t, srv, "hi\n", "cp", "-", "demo:g.txt"); code != 0 {
		t.Fatalf("warren cp - demo:g.txt: exit %d, stderr %q", code, stderr)
	}
	calls := f.recorded()
	if len(calls) != 1 || calls[0].Body != "hi\n" || !cmp.Equal(calls[0].Query, url.Values{"path": {"g.txt"}}) {
		t.Errorf("calls = %+v, want one write of %q to g.txt without a mode", calls, "hi\n")
	}
}

func TestCpFileFromSession(t *testing.T) {
	stat := reply{status: 200, body: `{"name":"out.csv","path":"/workspace/out.csv","type":"file","size":6,"mode":"0640","mtime":"2026-11-22T10:00:00Z"}`}
	routes := map[string]reply{
		"GET /v1/sessions/demo/files/stat": stat,
		"GET /v1/sessions/demo/files":      {status: 200, header: http.Header{"Content-Type": {"application/octet-stream"}}, body: "a,b\n1\n"},
	}
	t.Run("to a new file", func(t *testing.T) {
		f, srv := newFakeAPI(t, routes)
		dst := filepath.Join(t.TempDir(), "copy.csv")
		if _, stderr, code := runCLI(t, srv, "", "cp", "demo:out.csv", dst); code != 0 {
			t.Fatalf("warren cp: exit %d, stderr %q", code, stderr)
		}
		checkFile(t, dst, "a,b\n1\n", 0o640)
		if calls := f.recorded(); len(calls) != 2 || calls[1].Query.Get("path") != "out.csv" {
			t.Errorf("calls = %+v, want stat and read of out.csv", calls)
		}
	})
	t.Run("into a directory", func(t *testing.T) {
		_, srv := newFakeAPI(t, routes)
		dir := t.TempDir()
		if _, stderr, code := runCLI(t, srv, "", "cp", "demo:out.csv", dir); code != 0 {
			t.Fatalf("warren cp: exit %d, stderr %q", code, stderr)
		}
		checkFile(t, filepath.Join(dir, "out.csv"), "a,b\n1\n", 0o640)
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("directory holds %d entries, want only out.csv (no temporary file left)", len(entries))
		}
	})
	t.Run("to stdout", func(t *testing.T) {
		_, srv := newFakeAPI(t, routes)
		stdout, stderr, code := runCLI(t, srv, "", "cp", "demo:out.csv", "-")
		if code != 0 || stdout != "a,b\n1\n" {
			t.Errorf("warren cp demo:out.csv - = exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	})
	t.Run("missing", func(t *testing.T) {
		_, srv := newFakeAPI(t, map[string]reply{"GET /v1/sessions/demo/files/stat": {status: 404,
			body: `{"error":{"code":"not_found","message":"no such file: nope"}}`}})
		dst := filepath.Join(t.TempDir(), "x")
		_, stderr, code := runCLI(t, srv, "", "cp", "demo:nope", dst)
		if code != 1 || stderr != "warren: stat demo:nope: not_found: no such file: nope\n" {
			t.Errorf("exit %d, stderr %q", code, stderr)
		}
		if _, err := os.Stat(dst); err == nil {
			t.Errorf("%s was created", dst)
		}
	})
}

func checkFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	if string(b) != content {
		t.Errorf("%s holds %q, want %q", p, b, content)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != mode {
		t.Errorf("%s has mode %v, want %v", p, fi.Mode().Perm(), mode)
	}
}

// buildTar makes a tar from entries.
func buildTar(t *testing.T, entries []tarEntry) string {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Typeflag: e.Type, Mode: e.Mode, Linkname: e.Linkname, Size: int64(len(e.Body)), ModTime: now}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.Body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestCpDirectoryFromSession(t *testing.T) {
	stat := reply{status: 200, body: `{"name":"results","path":"/workspace/results","type":"dir","size":0,"mode":"0755","mtime":"2026-11-22T10:00:00Z"}`}
	good := buildTar(t, []tarEntry{
		{Name: "a.txt", Type: tar.TypeReg, Mode: 0o600, Body: "alpha"},
		{Name: "sub/", Type: tar.TypeDir, Mode: 0o750},
		{Name: "sub/b.txt", Type: tar.TypeReg, Mode: 0o644, Body: "beta"},
		{Name: "sub/link", Type: tar.TypeSymlink, Linkname: "../a.txt"},
		{Name: "sub/hard", Type: tar.TypeLink, Linkname: "a.txt"},
	})
	t.Run("into an existing directory", func(t *testing.T) {
		f, srv := newFakeAPI(t, map[string]reply{
			"GET /v1/sessions/demo/files/stat": stat,
			"GET /v1/sessions/demo/archive":    {status: 200, header: http.Header{"Content-Type": {"application/x-tar"}}, body: good},
		})
		dst := t.TempDir()
		if _, stderr, code := runCLI(t, srv, "", "cp", "demo:results", dst); code != 0 {
			t.Fatalf("warren cp: exit %d, stderr %q", code, stderr)
		}
		out := filepath.Join(dst, "results")
		checkFile(t, filepath.Join(out, "a.txt"), "alpha", 0o600)
		checkFile(t, filepath.Join(out, "sub", "b.txt"), "beta", 0o644)
		checkFile(t, filepath.Join(out, "sub", "hard"), "alpha", 0o600)
		if l, err := os.Readlink(filepath.Join(out, "sub", "link")); err != nil || l != "../a.txt" {
			t.Errorf("sub/link = %q, %v; want a symlink to ../a.txt", l, err)
		}
		if fi, err := os.Stat(filepath.Join(out, "sub")); err != nil || fi.Mode().Perm() != 0o750 {
			t.Errorf("sub: %v, %v; want mode 0750", fi, err)
		}
		if calls := f.recorded(); len(calls) != 2 || calls[1].Path != "/v1/sessions/demo/archive" || calls[1].Query.Get("path") != "results" {
			t.Errorf("calls = %+v, want stat and archive of results", calls)
		}
	})
	t.Run("to stdout as a tar", func(t *testing.T) {
		_, srv := newFakeAPI(t, map[string]reply{
			"GET /v1/sessions/demo/files/stat": stat,
			"GET /v1/sessions/demo/archive":    {status: 200, body: good},
		})
		stdout, stderr, code := runCLI(t, srv, "", "cp", "demo:results", "-")
		if code != 0 || stdout != good {
			t.Errorf("exit %d, stderr %q, stdout is the tar: %v", code, stderr, stdout == good)
		}
	})

	// Hostile archives: nothing may land outside the destination.
	outside := t.TempDir()
	hostile := []struct {
		name     string
		wantCode int // a symlink that is replaced is harmless
		entries  []tarEntry
	}{
		{"dot-dot", 1, []tarEntry{{Name: "../../escaped", Type: tar.TypeReg, Mode: 0o644, Body: "x"}}},
		{"through an absolute symlink", 1, []tarEntry{
			{Name: "escape", Type: tar.TypeSymlink, Linkname: outside},
			{Name: "escape/escaped", Type: tar.TypeReg, Mode: 0o644, Body: "x"},
		}},
		{"through a relative symlink", 1, []tarEntry{
			{Name: "escape", Type: tar.TypeSymlink, Linkname: "../../../../../../../../" + outside},
			{Name: "escape/escaped", Type: tar.TypeReg, Mode: 0o644, Body: "x"},
		}},
		{"a symlink replaced by a file", 0, []tarEntry{
			{Name: "escaped", Type: tar.TypeSymlink, Linkname: filepath.Join(outside, "escaped")},
			{Name: "escaped", Type: tar.TypeReg, Mode: 0o644, Body: "x"},
		}},
		{"a hard link out", 1, []tarEntry{{Name: "escaped", Type: tar.TypeLink, Linkname: "../../etc/passwd"}}},
	}
	for _, tc := range hostile {
		t.Run("hostile "+tc.name, func(t *testing.T) {
			_, srv := newFakeAPI(t, map[string]reply{
				"GET /v1/sessions/demo/files/stat": stat,
				"GET /v1/sessions/demo/archive":    {status: 200, body: buildTar(t, tc.entries)},
			})
			dst := filepath.Join(t.TempDir(), "a", "b", "c", "dst")
			_, stderr, code := runCLI(t, srv, "", "cp", "demo:results", dst)
			if code != tc.wantCode {
				t.Errorf("warren cp = exit %d, want %d (stderr %q)", code, tc.wantCode, stderr)
			}
			if _, err := os.Lstat(filepath.Join(outside, "escaped")); err == nil {
				t.Errorf("an entry landed outside the destination")
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(filepath.Dir(dst)), "escaped")); err == nil {
				t.Errorf("an entry landed next to the destination")
			}
		})
	}
}

func TestCpNeedsOneSessionSide(t *testing.T) {
	_, srv := newFakeAPI(t, nil)
	for _, args := range [][]string{{"cp", "a", "b"}, {"cp", "s:a", "t:b"}, {"cp", "./x:y", "/tmp/z"}} {
		if _, stderr, code := runCLI(t, srv, "", args...); code != 1 || !strings.Contains(stderr, "exactly one of SRC and DST") {
			t.Errorf("warren %q = exit %d, stderr %q", args, code, stderr)
		}
	}
}

func TestParseLocation(t *testing.T) {
	tests := []struct {
		in   string
		want location
	}{
		{"demo:/workspace/a", location{remote: true, session: "demo", path: "/workspace/a"}},
		{"demo:", location{remote: true, session: "demo", path: "."}},
		{"my-box_2:rel/p", location{remote: true, session: "my-box_2", path: "rel/p"}},
		{"./a:b", location{path: "./a:b"}},
		{"/abs/a:b", location{path: "/abs/a:b"}},
		{":x", location{path: ":x"}},
		{"plain", location{path: "plain"}},
		{"-", location{path: "-"}},
	}
	for _, tc := range tests {
		if got := parseLocation(tc.in); got != tc.want {
			t.Errorf("parseLocation(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestImageImport(t *testing.T) {
	img := `{"name":"rootfs","digest":"sha256:abc","size":100,"created_at":"2026-11-22T10:00:00Z"}`
	t.Run("directory", func(t *testing.T) {
		dir := makeTree(t)
		f, srv := newFakeAPI(t, map[string]reply{"POST /v1/images": {status: 201, body: img}})
		stdout, stderr, code := runCLI(t, srv, "", "image", "import", "rootfs", dir)
		if code != 0 || stdout != "rootfs sha256:abc\n" {
			t.Fatalf("warren image import = exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		calls := f.recorded()
		if len(calls) != 1 || calls[0].Query.Get("name") != "rootfs" {
			t.Fatalf("calls = %+v, want one POST /v1/images?name=rootfs", calls)
		}
		var names []string
		uid, gid := os.Getuid(), os.Getgid()
		for _, e := range readTar(t, []byte(calls[0].Body)) {
			names = append(names, e.Name)
			if e.Uid != uid || e.Gid != gid {
				t.Errorf("%s owned by %d:%d, want the files' owner %d:%d", e.Name, e.Uid, e.Gid, uid, gid)
			}
		}
		want := []string{"a.txt", "abs", "sub/", "sub/empty/", "sub/link", "sub/run.sh"}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("image tar entries mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("tarball as is", func(t *testing.T) {
		tarball := filepath.Join(t.TempDir(), "rootfs.tar.gz")
		content := "\x1f\x8b\x08 not really gzip"
		if err := os.WriteFile(tarball, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		f, srv := newFakeAPI(t, map[string]reply{"POST /v1/images": {status: 201, body: img}})
		if _, stderr, code := runCLI(t, srv, "", "image", "import", "rootfs", tarball); code != 0 {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		if calls := f.recorded(); len(calls) != 1 || calls[0].Body != content {
			t.Errorf("calls = %+v, want the tarball sent as is", calls)
		}
	})
}

func TestTarRoundTrip(t *testing.T) {
	src := makeTree(t)
	dst := filepath.Join(t.TempDir(), "out")
	r, wait := tarDir(src, tarOptions{})
	if err := extractTar(r, dst, nil); err != nil {
		t.Fatalf("extractTar() error: %v", err)
	}
	if err := wait(); err != nil {
		t.Fatalf("tarDir() error: %v", err)
	}
	checkFile(t, filepath.Join(dst, "a.txt"), "alpha", 0o644)
	checkFile(t, filepath.Join(dst, "sub", "run.sh"), "#!/bin/sh\n", 0o755)
	if l, _ := os.Readlink(filepath.Join(dst, "abs")); l != "/etc/passwd" {
		t.Errorf("abs links to %q, want /etc/passwd (kept as a link, never followed)", l)
	}
	if fi, err := os.Stat(filepath.Join(dst, "sub", "empty")); err != nil || !fi.IsDir() {
		t.Errorf("sub/empty: %v, want a directory", err)
	}
}

func TestFormatting(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0B"}, {1023, "1023B"}, {1024, "1KiB"}, {1536, "1.5KiB"}, {12 << 20, "12MiB"}, {5 << 30, "5GiB"}, {2560 << 20, "2.5GiB"}} {
		if got := humanBytes(tc.n); got != tc.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{0, "0s"}, {59 * time.Second, "59s"}, {90 * time.Second, "1m"}, {3 * time.Hour, "3h"}, {47 * time.Hour, "47h"}, {72 * time.Hour, "3d"}} {
		if got := shortDuration(tc.d); got != tc.want {
			t.Errorf("shortDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	if got := secondsUp(1500 * time.Millisecond); got != 2 {
		t.Errorf("secondsUp(1.5s) = %d, want 2", got)
	}
	if got := millisUp(1500 * time.Microsecond); got != 2 {
		t.Errorf("millisUp(1.5ms) = %d, want 2", got)
	}
}

// withNode is s as a fleet lists it, held by node.
func withNode(s api.Session, node string) api.Session {
	s.Node = node
	return s
}
