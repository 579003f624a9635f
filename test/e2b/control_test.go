package e2b

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// call sends an E2B control-plane request with the E2B key and decodes a
// JSON answer into out (if not nil); it returns the status.
func call(t *testing.T, h *daemontest.Harness, key, method, path, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, h.URL+"/e2b"+path, strings.NewReader(body))
	req.Header.Set("X-API-KEY", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// exec runs a command through warren's own API as the admin; it returns
// the status and the answer.
func exec1(t *testing.T, h *daemontest.Harness, id, cmd string) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"command": cmd})
	req, _ := http.NewRequest(http.MethodPost, h.URL+"/v1/sessions/"+id+"/exec", strings.NewReader(string(b)))
	resp, err := h.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestPauseResume pauses an E2B sandbox and checks, through warren's own
// API, that its processes are frozen (a call is refused, a counter stops)
// and that connect thaws it with its processes and files as they were.
// Then a sandbox created with onTimeout "pause" is paused, not deleted,
// at its timeout.
func TestPauseResume(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) {})
	key := e2bKey(t, h)
	var sb struct {
		SandboxID, EnvdAccessToken, EnvdVersion string
	}
	if st := call(t, h, key, "POST", "/sandboxes", `{"templateID":"base","timeout":60,"metadata":{"suite":"pause"}}`, &sb); st != 201 {
		t.Fatalf("create: %d", st)
	}
	if sb.EnvdAccessToken == "" || sb.EnvdVersion < "0.6.4" {
		t.Fatalf("create answered %+v", sb)
	}
	// A counter in the background, as the sandbox's user.
	if st, out := exec1(t, h, sb.SandboxID, "whoami > /home/user/who; (while :; do echo x >> /home/user/ticks; sleep 0.05; done) >/dev/null 2>&1 &"); st != 200 {
		t.Fatalf("exec: %d %v", st, out)
	}
	time.Sleep(300 * time.Millisecond)
	if st := call(t, h, key, "POST", "/sandboxes/"+sb.SandboxID+"/pause", "", nil); st != 204 {
		t.Fatalf("pause: %d", st)
	}
	if st := call(t, h, key, "POST", "/sandboxes/"+sb.SandboxID+"/pause", "", nil); st != 409 {
		t.Fatalf("second pause: %d, want 409", st)
	}
	var info struct{ State string }
	if call(t, h, key, "GET", "/sandboxes/"+sb.SandboxID, "", &info); info.State != "paused" {
		t.Fatalf("state %q after pause", info.State)
	}
	if st, out := exec1(t, h, sb.SandboxID, "true"); st != 409 {
		t.Fatalf("exec in a paused session: %d %v, want 409", st, out)
	}
	// envd traffic for a paused sandbox is E2B's 502.
	req, _ := http.NewRequest("GET", h.URL+"/e2b/health", nil)
	req.Header.Set("E2b-Sandbox-Id", sb.SandboxID)
	req.Header.Set("X-Access-Token", sb.EnvdAccessToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 502 {
		t.Fatalf("envd /health of a paused sandbox: %v %v, want 502", resp, err)
	}
	if st := call(t, h, key, "POST", "/sandboxes/"+sb.SandboxID+"/connect", `{"timeout":60}`, nil); st != 201 {
		t.Fatalf("connect to a paused sandbox: %d, want 201", st)
	}
	_, a := exec1(t, h, sb.SandboxID, "wc -l < /home/user/ticks; cat /home/user/who")
	time.Sleep(300 * time.Millisecond)
	_, b := exec1(t, h, sb.SandboxID, "wc -l < /home/user/ticks")
	if a["stdout"] == b["stdout"] || !strings.HasSuffix(a["stdout"].(string), "user\n") {
		t.Fatalf("after resume the counter reads %v then %v (it must run again, as user)", a["stdout"], b["stdout"])
	}
	if st := call(t, h, key, "POST", "/sandboxes/"+sb.SandboxID+"/connect", `{"timeout":60}`, nil); st != 200 {
		t.Fatalf("connect to a running sandbox: %d, want 200", st)
	}

	// Its logs are its audit trail.
	var logs struct {
		Logs []struct{ Message string }
	}
	if st := call(t, h, key, "GET", "/v2/sandboxes/"+sb.SandboxID+"/logs", "", &logs); st != 200 {
		t.Fatalf("logs: %d", st)
	}
	var ops []string
	for _, l := range logs.Logs {
		ops = append(ops, l.Message)
	}
	if got := strings.Join(ops, "|"); !strings.Contains(got, "e2b create sandbox: ok") || !strings.Contains(got, "e2b pause sandbox: ok") ||
		!strings.Contains(got, "e2b pause sandbox: conflict") || !strings.Contains(got, "e2b connect sandbox: ok") {
		t.Fatalf("logs: %s", got)
	}

	// The deprecated form, as the E2B CLI reads it: each line is JSON
	// with a level and a logger.
	var v1 struct {
		Logs []struct{ Line string }
	}
	if st := call(t, h, key, "GET", "/sandboxes/"+sb.SandboxID+"/logs?start=0", "", &v1); st != 200 || len(v1.Logs) != len(logs.Logs) {
		t.Fatalf("v1 logs: %d, %d lines for %d entries", st, len(v1.Logs), len(logs.Logs))
	}
	var line struct{ Level, Logger string }
	if err := json.Unmarshal([]byte(v1.Logs[0].Line), &line); err != nil || line.Level != "info" || line.Logger != "warren.audit" {
		t.Fatalf("v1 log line %q: %+v %v", v1.Logs[0].Line, line, err)
	}

	// onTimeout pause.
	var auto struct{ SandboxID string }
	call(t, h, key, "POST", "/sandboxes", `{"templateID":"base","timeout":1,"autoPause":true}`, &auto)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got struct{ State string }
		st := call(t, h, key, "GET", "/sandboxes/"+auto.SandboxID, "", &got)
		if st == 200 && got.State == "paused" {
			break
		}
		if st != 200 || time.Now().After(deadline) {
			t.Fatalf("a sandbox with onTimeout pause: %d %q", st, got.State)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, id := range []string{sb.SandboxID, auto.SandboxID} {
		if st := call(t, h, key, "DELETE", "/sandboxes/"+id, "", nil); st != 204 {
			t.Fatalf("kill %s: %d", id, st)
		}
	}
	if st := call(t, h, key, "DELETE", "/sandboxes/"+sb.SandboxID, "", nil); st != 404 {
		t.Fatalf("second kill: %d, want 404", st)
	}
}

// TestBadInput checks that bad requests get E2B's error body with a 4xx,
// never a 500.
func TestBadInput(t *testing.T) {
	h := daemontest.Start(t, nil)
	key := e2bKey(t, h)
	for _, c := range []struct {
		method, path, body, key string
		status                  int
	}{
		{"POST", "/sandboxes", `{`, key, 400},
		{"POST", "/sandboxes", ``, key, 400},
		{"POST", "/sandboxes", `{"templateID":"no-such-template"}`, key, 404},
		{"POST", "/sandboxes", `{"templateID":"../../etc"}`, key, 404},
		{"POST", "/sandboxes", `{"timeout":-1}`, key, 400},
		{"POST", "/sandboxes", `{"metadata":{"warren.dev/x":"y"}}`, key, 400},
		{"POST", "/sandboxes", `{"metadata":{"bad key!":"y"}}`, key, 400},
		{"POST", "/sandboxes", `{}`, "e2b_" + strings.Repeat("0", 40), 401},
		{"POST", "/sandboxes", `{}`, "e2b_xyz", 401},
		{"GET", "/sandboxes/nope", ``, key, 404},
		{"POST", "/sandboxes/nope/timeout", `{"timeout":5}`, key, 404},
		{"POST", "/sandboxes/nope/timeout", `{"timeout":"5"}`, key, 400},
		{"GET", "/v2/sandboxes?limit=0", ``, key, 400},
		{"GET", "/v2/sandboxes?state=dead", ``, key, 400},
		{"GET", "/sandboxes/nope/metrics?start=x", ``, key, 400},
		{"POST", "/sandboxes/nope/fork", `{"count":0}`, key, 400},
		{"DELETE", "/templates/nope", ``, key, 404},
		{"GET", "/templates/aliases/nope", ``, key, 404},
		{"GET", "/no/such/route", ``, key, 404},
	} {
		var e struct {
			Code    int
			Message string
		}
		st := call(t, h, c.key, c.method, c.path, c.body, &e)
		if st != c.status || e.Code != c.status || e.Message == "" {
			t.Errorf("%s %s %s: %d %+v, want %d with E2B's error body", c.method, c.path, c.body, st, e, c.status)
		}
	}
}

// TestEnvdHost checks envd's other address, the host
// 49983-<id>.<preview_domain>, and that envd traffic needs the sandbox's
// token: none is 401, another sandbox's is 401, an unknown sandbox is 502.
func TestEnvdHost(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.PreviewDomain = "sb.test" })
	key := e2bKey(t, h)
	var a, b struct {
		SandboxID, EnvdAccessToken string
		Domain                     *string
	}
	call(t, h, key, "POST", "/sandboxes", `{"timeout":60}`, &a)
	call(t, h, key, "POST", "/sandboxes", `{"timeout":60}`, &b)
	if a.Domain == nil || *a.Domain != "sb.test" {
		t.Fatalf("create answered domain %v, want sb.test", a.Domain)
	}
	health := func(host, id, token string) int {
		req, _ := http.NewRequest("GET", h.URL+"/e2b/health", nil)
		if host != "" {
			req, _ = http.NewRequest("GET", h.URL+"/health", nil)
			req.Host = host
		}
		if id != "" {
			req.Header.Set("E2b-Sandbox-Id", id)
		}
		if token != "" {
			req.Header.Set("X-Access-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		host, id, token string
		want            int
	}{
		{"49983-" + a.SandboxID + ".sb.test", "", a.EnvdAccessToken, 204},
		{"49983-" + a.SandboxID + ".sb.test:7433", "", a.EnvdAccessToken, 204},
		{"49983-" + a.SandboxID + ".sb.test", "", b.EnvdAccessToken, 401},
		{"", a.SandboxID, a.EnvdAccessToken, 204},
		{"", a.SandboxID, b.EnvdAccessToken, 401},
		{"", a.SandboxID, "", 401},
		{"", "nope", a.EnvdAccessToken, 502},
	} {
		if got := health(c.host, c.id, c.token); got != c.want {
			t.Errorf("host %q id %q: %d, want %d", c.host, c.id, got, c.want)
		}
	}
}
