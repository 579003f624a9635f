package daemon_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
)

var bg = context.Background()

// TestQuickStart is the README's walk-through.
func TestQuickStart(t *testing.T) {
	h := daemontest.Start(t, nil)
	c := h.Client
	s, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != "demo" || s.State != "running" || s.Cwd != "/workspace" || s.Limits.MemoryMB != 512 {
		t.Errorf("created session = %+v", s)
	}
	res, err := c.Exec(bg, "demo", &api.ExecRequest{Command: "cd /tmp && export A=1 && echo hi"})
	if err != nil || res.Stdout != "hi\n" || res.ExitCode != 0 {
		t.Fatalf("first exec = %+v, %v", res, err)
	}
	res, err = c.Exec(bg, "demo", &api.ExecRequest{Command: "pwd; echo $A; ls /proc | grep -c '^[0-9]'"})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 3 || lines[0] != "/tmp" || lines[1] != "1" || len(lines[2]) != 1 {
		t.Errorf("second exec stdout = %q, want /tmp, 1 and a handful of PIDs", res.Stdout)
	}
	if _, err := c.WriteFile(bg, "demo", "app.py", strings.NewReader("print('hello')\n"), 0); err != nil {
		t.Fatal(err)
	}
	res, err = c.Exec(bg, "demo", &api.ExecRequest{Command: "cat /workspace/app.py"})
	if err != nil || res.Stdout != "print('hello')\n" {
		t.Errorf("the file did not land in /workspace: %+v %v", res, err)
	}
	got, err := c.GetSession(bg, "demo")
	if err != nil || got.Cwd != "/tmp" || got.Usage == nil || got.Usage.Pids == 0 {
		t.Errorf("GetSession = %+v, %v; want cwd /tmp and usage", got, err)
	}
	if err := c.DeleteSession(bg, "demo"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSession(bg, "demo"); !client.IsNotFound(err) {
		t.Errorf("GetSession after delete = %v, want not_found", err)
	}
}

// raw sends a request and decodes the error envelope if any.
func raw(t *testing.T, h *daemontest.Harness, method, path, body string) (int, http.Header, api.Error, string) {
	t.Helper()
	req, _ := http.NewRequest(method, h.URL+path, strings.NewReader(body))
	resp, err := h.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var env api.Error
	json.Unmarshal(b, &env)
	return resp.StatusCode, resp.Header, env, string(b)
}

func TestAPIErrors(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.Session.MaxFileBytes = 1 << 20 })
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	huge := `{"command":"` + strings.Repeat("x", 9<<20) + `"}`
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"malformed json", "POST", "/v1/sessions", `{"id":`, 400, "invalid_argument"},
		{"not an object", "POST", "/v1/sessions", `[1,2]`, 400, "invalid_argument"},
		{"unknown field", "POST", "/v1/sessions", `{"idd":"x"}`, 400, "invalid_argument"},
		{"trailing data", "POST", "/v1/sessions", `{} {}`, 400, "invalid_argument"},
		{"wrong type", "POST", "/v1/sessions", `{"ttl_seconds":"soon"}`, 400, "invalid_argument"},
		{"bad id", "POST", "/v1/sessions", `{"id":"../etc"}`, 400, "invalid_argument"},
		{"bad id dot", "POST", "/v1/sessions", `{"id":"."}`, 400, "invalid_argument"},
		{"bad id comma", "POST", "/v1/sessions", `{"id":"a,lowerdir=/"}`, 400, "invalid_argument"},
		{"unknown image", "POST", "/v1/sessions", `{"image":"nope"}`, 400, "invalid_argument"},
		{"bad network", "POST", "/v1/sessions", `{"network":"host"}`, 400, "invalid_argument"},
		{"disk limit unsupported", "POST", "/v1/sessions", `{"limits":{"disk_mb":10}}`, 400, "invalid_argument"},
		{"memory too high", "POST", "/v1/sessions", `{"limits":{"memory_mb":99999999}}`, 400, "invalid_argument"},
		{"negative ttl", "POST", "/v1/sessions", `{"ttl_seconds":-1}`, 400, "invalid_argument"},
		{"bad env name", "POST", "/v1/sessions", `{"env":{"A B":"x"}}`, 400, "invalid_argument"},
		{"relative cwd", "POST", "/v1/sessions", `{"cwd":"tmp"}`, 400, "invalid_argument"},
		{"oversize body", "POST", "/v1/sessions/s/exec", huge, 413, "too_large"},
		{"unknown session get", "GET", "/v1/sessions/nope", "", 404, "not_found"},
		{"unknown session exec", "POST", "/v1/sessions/nope/exec", `{"command":"true"}`, 404, "not_found"},
		{"unknown session delete", "DELETE", "/v1/sessions/nope", "", 404, "not_found"},
		{"unknown session file", "GET", "/v1/sessions/nope/files?path=x", "", 404, "not_found"},
		{"exec neither", "POST", "/v1/sessions/s/exec", `{}`, 400, "invalid_argument"},
		{"exec both", "POST", "/v1/sessions/s/exec", `{"command":"x","argv":["x"]}`, 400, "invalid_argument"},
		{"exec empty argv0", "POST", "/v1/sessions/s/exec", `{"argv":[""]}`, 400, "invalid_argument"},
		{"exec negative timeout", "POST", "/v1/sessions/s/exec", `{"command":"true","timeout_ms":-5}`, 400, "invalid_argument"},
		{"exec timeout too long", "POST", "/v1/sessions/s/exec", `{"command":"true","timeout_ms":99999999999}`, 400, "invalid_argument"},
		{"exec bad base64", "POST", "/v1/sessions/s/exec", `{"command":"cat","stdin_base64":"***"}`, 400, "invalid_argument"},
		{"exec both stdins", "POST", "/v1/sessions/s/exec", `{"command":"cat","stdin":"a","stdin_base64":"YQ=="}`, 400, "invalid_argument"},
		{"exec NUL", "POST", "/v1/sessions/s/exec", `{"command":"echo \u0000"}`, 400, "invalid_argument"},
		{"file without path", "GET", "/v1/sessions/s/files", "", 400, "invalid_argument"},
		{"missing file", "GET", "/v1/sessions/s/files?path=/nope", "", 404, "not_found"},
		{"read a directory", "GET", "/v1/sessions/s/files?path=/etc", "", 400, "invalid_argument"},
		{"bad mode", "PUT", "/v1/sessions/s/files?path=x&mode=999", "x", 400, "invalid_argument"},
		{"bad recursive", "DELETE", "/v1/sessions/s/files?path=x&recursive=maybe", "", 400, "invalid_argument"},
		{"file too large", "PUT", "/v1/sessions/s/files?path=big", strings.Repeat("x", 2<<20), 413, "too_large"},
		{"remove root", "DELETE", "/v1/sessions/s/files?path=/&recursive=true", "", 400, "invalid_argument"},
		{"list a file", "GET", "/v1/sessions/s/files/list?path=/etc/passwd", "", 400, "invalid_argument"},
		{"mkdir over a file", "POST", "/v1/sessions/s/files/mkdir?path=/etc/passwd/x", "", 409, "conflict"},
		{"unknown route", "GET", "/v2/nothing", "", 404, "not_found"},
		{"image without name", "POST", "/v1/images", "", 400, "invalid_argument"},
		{"bad image name", "POST", "/v1/images?name=../x", "", 400, "invalid_argument"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, _, env, body := raw(t, h, tc.method, tc.path, tc.body)
			if status != tc.status || env.Error.Code != tc.code || env.Error.Message == "" {
				t.Errorf("%s %s = %d %s, want %d with code %s", tc.method, tc.path, status, trim(body), tc.status, tc.code)
			}
		})
	}
	// Wrong methods get 405 with the envelope and an Allow header.
	status, hdr, env, _ := raw(t, h, "PATCH", "/v1/sessions/s", "")
	if status != 405 || env.Error.Code == "" || !strings.Contains(hdr.Get("Allow"), "DELETE") {
		t.Errorf("PATCH /v1/sessions/s = %d %+v Allow %q", status, env, hdr.Get("Allow"))
	}
	// The daemon still serves, and the session still works.
	res, err := h.Client.Exec(bg, "s", &api.ExecRequest{Command: "echo fine"})
	if err != nil || res.Stdout != "fine\n" {
		t.Errorf("after the bad requests: %+v %v", res, err)
	}
}

func trim(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

func TestIdempotentCreate(t *testing.T) {
	h := daemontest.Start(t, nil)
	var mu sync.Mutex
	statuses := map[int]int{}
	var created []string
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _, _, body := raw(t, h, "POST", "/v1/sessions", `{"id":"same","labels":{"k":"v"}}`)
			var s api.Session
			json.Unmarshal([]byte(body), &s)
			mu.Lock()
			statuses[status]++
			created = append(created, s.CreatedAt.String())
			mu.Unlock()
		}()
	}
	wg.Wait()
	if statuses[201] != 1 || statuses[200] != 7 {
		t.Errorf("8 concurrent creates of one id: statuses %v, want one 201 and seven 200", statuses)
	}
	slices.Sort(created)
	if created[0] != created[len(created)-1] {
		t.Errorf("creates returned different sessions: %v", created)
	}
	list, _ := h.Client.ListSessions(bg)
	if len(list) != 1 {
		t.Errorf("ListSessions = %d sessions, want 1", len(list))
	}
}

func TestMaxSessions(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.Session.MaxSessions = 2 })
	for _, id := range []string{"a", "b"} {
		if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "c"})
	if client.Code(err) != "resource_exhausted" {
		t.Fatalf("third session = %v, want resource_exhausted", err)
	}
	// The existing id still answers: idempotence is not capacity.
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "a"}); err != nil {
		t.Errorf("re-create of an existing id at capacity: %v", err)
	}
	h.Client.DeleteSession(bg, "a")
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "c"}); err != nil {
		t.Errorf("create after a delete freed room: %v", err)
	}
}

func TestIdleExpiry(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "short", TTLSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "busy", TTLSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	// A call that outlasts the TTL keeps its session alive.
	res, err := h.Client.Exec(bg, "busy", &api.ExecRequest{Command: "sleep 2.5; echo done"})
	if err != nil || res.Stdout != "done\n" {
		t.Fatalf("long call on a short-TTL session: %+v %v", res, err)
	}
	if _, err := h.Client.GetSession(bg, "short"); !client.IsNotFound(err) {
		t.Errorf("idle session after its TTL: %v, want not_found", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := h.Client.GetSession(bg, "busy")
		if client.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("busy session never expired after its call")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestRun(t *testing.T) {
	h := daemontest.Start(t, nil)
	res, err := h.Client.Run(bg, &api.RunRequest{ExecRequest: api.ExecRequest{Command: "echo $((6*7)); hostname >&2; exit 4"}})
	if err != nil || res.Stdout != "42\n" || res.ExitCode != 4 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	list, err := h.Client.ListSessions(bg)
	if err != nil || len(list) != 0 {
		t.Errorf("sessions after a run: %v %v", list, err)
	}
	st, _ := h.Client.Stats(bg)
	if st == nil || st.Sessions != 0 {
		t.Errorf("Stats after a run = %+v", st)
	}
}

func TestExecResultFields(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "x", Limits: &api.Limits{MemoryMB: 64}}); err != nil {
		t.Fatal(err)
	}
	res, err := h.Client.Exec(bg, "x", &api.ExecRequest{Command: `printf 'ok\xff'; printf 'warn' >&2`})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(res.StdoutBase64)
	if !bytes.Equal(raw, []byte("ok\xff")) || res.Stdout != "ok\uFFFD" || res.Stderr != "warn" || res.StderrBase64 != "" {
		t.Errorf("binary output: %+v", res)
	}
	stdin := "hello"
	res, _ = h.Client.Exec(bg, "x", &api.ExecRequest{Command: "tr a-z A-Z", Stdin: &stdin})
	if res.Stdout != "HELLO" {
		t.Errorf("stdin: %+v", res)
	}
	res, _ = h.Client.Exec(bg, "x", &api.ExecRequest{Command: "sleep 10", TimeoutMs: 200})
	if !res.TimedOut {
		t.Errorf("timeout: %+v", res)
	}
	res, _ = h.Client.Exec(bg, "x", &api.ExecRequest{Command: "seq 100000", MaxOutputBytes: 100})
	if !res.Truncated || len(res.Stdout) != 100 {
		t.Errorf("output cap: truncated %v, %d bytes", res.Truncated, len(res.Stdout))
	}
	res, _ = h.Client.Exec(bg, "x", &api.ExecRequest{Command: "tail /dev/zero"})
	if !res.OOMKilled {
		t.Errorf("memory hog: %+v", res)
	}
	res, _ = h.Client.Exec(bg, "x", &api.ExecRequest{Argv: []string{"sh", "-c", "kill -KILL $$"}})
	if res.Signal != "SIGKILL" || res.ExitCode != 137 || res.OOMKilled {
		t.Errorf("killed argv: %+v", res)
	}
}

func TestFilesAPI(t *testing.T) {
	h := daemontest.Start(t, nil)
	c := h.Client
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "f", Cwd: "/srv/app"}); err != nil {
		t.Fatal(err)
	}
	w, err := c.WriteFile(bg, "f", "src/main.sh", strings.NewReader("echo main\n"), 0o755)
	if err != nil || w.Size != 10 {
		t.Fatalf("WriteFile = %+v, %v", w, err)
	}
	res, _ := c.Exec(bg, "f", &api.ExecRequest{Command: "./src/main.sh; stat -c %a src/main.sh"})
	if res.Stdout != "main\n755\n" {
		t.Errorf("relative path against the creation cwd: %+v", res)
	}
	e, err := c.StatFile(bg, "f", "/srv/app/src/main.sh")
	if err != nil || e.Mode != "0755" || e.Type != "file" || e.Size != 10 {
		t.Errorf("StatFile = %+v, %v", e, err)
	}
	if _, err := c.Mkdir(bg, "f", "a/b/c"); err != nil {
		t.Fatal(err)
	}
	ents, err := c.ListFiles(bg, "f", ".")
	names := []string{}
	for _, e := range ents {
		names = append(names, e.Name+":"+e.Type)
	}
	if err != nil || !cmp.Equal(names, []string{"a:dir", "src:dir"}) {
		t.Errorf("ListFiles = %v, %v", names, err)
	}
	rc, err := c.ReadFile(bg, "f", "src/main.sh")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "echo main\n" {
		t.Errorf("ReadFile = %q", b)
	}
	ar, err := c.DownloadArchive(bg, "f", "/srv/app")
	if err != nil {
		t.Fatal(err)
	}
	tarball, _ := io.ReadAll(ar)
	ar.Close()
	if _, err := c.UploadArchive(bg, "f", "/copy", bytes.NewReader(tarball)); err != nil {
		t.Fatal(err)
	}
	res, _ = c.Exec(bg, "f", &api.ExecRequest{Command: "cat /copy/src/main.sh; test -d /copy/a/b/c && echo dirs"})
	if res.Stdout != "echo main\ndirs\n" {
		t.Errorf("archive round trip: %+v", res)
	}
	if err := c.RemoveFile(bg, "f", "a", true); err != nil {
		t.Error(err)
	}
	if _, err := c.StatFile(bg, "f", "a"); !client.IsNotFound(err) {
		t.Errorf("StatFile after remove = %v", err)
	}
}

func TestOpenAPIMatchesRoutes(t *testing.T) {
	h := daemontest.Start(t, nil)
	doc, err := api.OpenAPIRoutes()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc, h.Daemon.API().Routes()); diff != "" {
		t.Errorf("api/openapi.yaml and the served routes differ (-document +served):\n%s", diff)
	}
	for _, p := range []string{"/openapi.yaml", "/openapi.json"} {
		status, _, _, body := raw(t, h, "GET", p, "")
		if status != 200 || !strings.Contains(body, "/v1/sessions/{id}/exec") {
			t.Errorf("GET %s = %d", p, status)
		}
	}
}

func TestShutdownLeavesNothing(t *testing.T) {
	h := daemontest.Start(t, nil)
	for i := range 3 {
		id := fmt.Sprintf("s%d", i)
		if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
		h.Client.Exec(bg, id, &api.ExecRequest{Command: "sleep 1000 & nohup sleep 999 >/dev/null 2>&1 & echo x > /tmp/f"})
	}
	// A call in flight at shutdown ends with the session.
	done := make(chan error, 1)
	go func() {
		_, err := h.Client.Exec(bg, "s0", &api.ExecRequest{Command: "sleep 60"})
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	h.Stop()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("a call in flight outlived the daemon's shutdown")
	}
	// CheckLeaks (registered by startDaemon) verifies nothing remains.
}

func TestDiskLimit(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "d", Limits: &api.Limits{DiskMB: 32}}); err != nil {
		t.Fatal(err)
	}
	res, err := h.Client.Exec(bg, "d", &api.ExecRequest{Command: "dd if=/dev/zero of=/big bs=1M count=64"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || (!strings.Contains(res.Stderr, "No space left") && !strings.Contains(res.Stderr, "quota exceeded")) {
		t.Errorf("writing 64 MiB into a 32 MiB layer: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	s, err := h.Client.GetSession(bg, "d")
	if err != nil || s.Limits.DiskMB != 32 || s.Usage == nil || s.Usage.DiskBytes < 16<<20 || s.Usage.DiskBytes > 33<<20 {
		t.Errorf("GetSession = %+v, %v; want disk_mb 32 and usage near the limit", s, err)
	}
	// The session still works, and deleting it frees the space.
	res, _ = h.Client.Exec(bg, "d", &api.ExecRequest{Command: "rm /big && echo freed > /small && cat /small"})
	if res.Stdout != "freed\n" {
		t.Errorf("after the disk filled: %+v", res)
	}
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "u", User: "sandbox"}); err != nil {
		t.Fatal(err)
	}
	res, _ = h.Client.Exec(bg, "u", &api.ExecRequest{Command: "id -un"})
	if res.Stdout != "sandbox\n" {
		t.Errorf("user sandbox: %+v", res)
	}
	_, err = h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "v", User: "nosuchuser"})
	if client.Code(err) != "invalid_argument" {
		t.Errorf("unknown user = %v, want invalid_argument", err)
	}
}
