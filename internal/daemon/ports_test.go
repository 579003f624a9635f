package daemon_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

var (
	portServerOnce sync.Once
	portServerBin  []byte
	portServerErr  error
)

// portServer builds testdata/portserver, a static program, once.
func portServer(t testing.TB) []byte {
	t.Helper()
	portServerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "warren-portserver-")
		if err != nil {
			portServerErr = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "portserver")
		cmd := exec.Command("go", "build", "-o", out, "./testdata/portserver")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			portServerErr = err
			portServerBin = b
			return
		}
		portServerBin, portServerErr = os.ReadFile(out)
	})
	if portServerErr != nil {
		t.Fatalf("build portserver: %v\n%s", portServerErr, portServerBin)
	}
	return portServerBin
}

// startPortServer creates session id (network none, the default) and runs
// the port server in it: HTTP on any address, port 8000 (Go binds [::],
// dual-stack), TCP echo on 127.0.0.1:9000.
func startPortServer(t *testing.T, h *daemontest.Harness, id string) {
	t.Helper()
	s, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if s.Network != "none" {
		t.Fatalf("session network = %q, want none", s.Network)
	}
	if _, err := h.Client.WriteFile(bg, id, "/tmp/portserver", bytes.NewReader(portServer(t)), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.Exec(bg, id, &api.ExecRequest{Command: "nohup /tmp/portserver -http 0.0.0.0:8000 -echo 127.0.0.1:9000 >/tmp/ps.log 2>&1 &"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		ports, err := h.Client.ListPorts(bg, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(ports) == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the port server does not listen after 15s: %+v", ports)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// seen is what the port server answers: the request it got.
type seen struct {
	Method, Path, Host string
	RawQuery           string `json:"raw_query"`
	Header             http.Header
	Body               string
}

func get(t *testing.T, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func TestPortsListAndProxy(t *testing.T) {
	h := daemontest.Start(t, nil)
	startPortServer(t, h, "web")

	ports, err := h.Client.ListPorts(bg, "web")
	if err != nil {
		t.Fatal(err)
	}
	want := []api.Port{
		{Port: 8000, Addresses: []string{"::"}, Path: "/v1/sessions/web/ports/8000/"},
		{Port: 9000, Addresses: []string{"127.0.0.1"}, LoopbackOnly: true, Path: "/v1/sessions/web/ports/9000/"},
	}
	gotJSON, _ := json.Marshal(ports)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("ListPorts = %s, want %s", gotJSON, wantJSON)
	}

	// With the API key: the server inside gets the request, without
	// warren's credentials, with the X-Forwarded headers.
	req, _ := http.NewRequest("POST", h.URL+"/v1/sessions/web/ports/8000/a/b%2Fc?x=1&token=", strings.NewReader("hello"))
	req.Header.Set("X-API-Key", h.AdminKey)
	req.Header.Set("X-App", "kept")
	status, hdr, body := get(t, req)
	var s seen
	if status != 200 || json.Unmarshal(body, &s) != nil {
		t.Fatalf("proxied POST = %d %s", status, body)
	}
	if s.Method != "POST" || s.Path != "/a/b/c" || s.RawQuery != "x=1" || s.Body != "hello" || s.Header.Get("X-App") != "kept" {
		t.Errorf("the server inside saw %+v", s)
	}
	for _, k := range []string{"Authorization", "X-Api-Key"} {
		if v := s.Header.Get(k); v != "" {
			t.Errorf("warren's credential %s reached the server inside: %q", k, v)
		}
	}
	if s.Header.Get("X-Forwarded-For") == "" || s.Header.Get("X-Forwarded-Prefix") != "/v1/sessions/web/ports/8000" || s.Host != "localhost:8000" {
		t.Errorf("forwarded headers: %v, host %q", s.Header, s.Host)
	}
	if !strings.HasPrefix(hdr.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("the path form's answer has no sandboxing CSP: %v", hdr)
	}

	// Without credentials: 401 with the envelope.
	req, _ = http.NewRequest("GET", h.URL+"/v1/sessions/web/ports/8000/", nil)
	if status, _, body := get(t, req); status != 401 || !strings.Contains(string(body), `"unauthenticated"`) {
		t.Errorf("no credentials = %d %s, want 401", status, body)
	}

	// A browser's token in the URL: it is taken, and not passed on.
	tok, err := h.Client.CreateToken(bg, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequest("GET", h.URL+"/v1/sessions/web/ports/8000/page?token="+tok.Token+"&y=2", nil)
	status, _, body = get(t, req)
	s = seen{}
	if status != 200 || json.Unmarshal(body, &s) != nil || s.RawQuery != "y=2" {
		t.Errorf("with ?token= = %d %s", status, body)
	}

	// The port's path without its slash redirects to it.
	req, _ = http.NewRequest("GET", h.URL+"/v1/sessions/web/ports/8000?token="+tok.Token, nil)
	if status, hdr, _ := get(t, req); status != 308 || !strings.HasPrefix(hdr.Get("Location"), "/v1/sessions/web/ports/8000/?token=") {
		t.Errorf("port path without slash = %d, Location %q", status, hdr.Get("Location"))
	}

	// A WebSocket through the proxy, echoed by the server inside.
	ws, _, err := websocket.Dial(bg, "ws"+strings.TrimPrefix(h.URL, "http")+"/v1/sessions/web/ports/8000/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + h.AdminKey}}})
	if err != nil {
		t.Fatalf("WebSocket through the proxy: %v", err)
	}
	for _, msg := range []string{"one", strings.Repeat("x", 100000)} {
		if err := ws.Write(bg, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		ws.SetReadLimit(1 << 20)
		_, b, err := ws.Read(bg)
		if err != nil || string(b) != msg {
			t.Fatalf("echo of %d bytes = %d bytes, %v", len(msg), len(b), err)
		}
	}
	ws.Close(websocket.StatusNormalClosure, "")
	// A foreign page's WebSocket is refused (the browser would attach
	// whatever it holds), unless it authenticates with ?token=.
	wsURL := "ws" + strings.TrimPrefix(h.URL, "http") + "/v1/sessions/web/ports/8000/ws"
	_, resp, err := websocket.Dial(bg, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{
		"Authorization": {"Bearer " + h.AdminKey}, "Origin": {"https://evil.example"}}})
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Errorf("a foreign origin's WebSocket through the proxy = %v, %v; want 403", resp, err)
	}
	ws, _, err = websocket.Dial(bg, wsURL+"?token="+tok.Token, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
	if err != nil {
		t.Errorf("a WebSocket with ?token= through the proxy: %v", err)
	} else {
		ws.Close(websocket.StatusNormalClosure, "")
	}

	// Errors: nothing listening, a bad port, another tenant's session.
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/v1/sessions/web/ports/8001/", 503, "unavailable"},
		{"/v1/sessions/web/ports/0/", 400, "invalid_argument"},
		{"/v1/sessions/web/ports/99999/", 400, "invalid_argument"},
		{"/v1/sessions/nope/ports/8000/", 404, "not_found"},
	} {
		req, _ := http.NewRequest("GET", h.URL+tc.path, nil)
		req.Header.Set("Authorization", "Bearer "+h.AdminKey)
		if status, _, body := get(t, req); status != tc.status || !strings.Contains(string(body), `"`+tc.code+`"`) {
			t.Errorf("GET %s = %d %s, want %d %s", tc.path, status, body, tc.status, tc.code)
		}
	}
	other := newKey(t, h, api.CreateKeyRequest{Tenant: "other", Name: "o"})
	r := as(t, h, bearer(other.Secret), "GET", "/v1/sessions/web/ports/8000/", "")
	if r.status != 404 {
		t.Errorf("another tenant's proxy request = %d %s, want 404", r.status, r.body)
	}
	r = as(t, h, bearer(other.Secret), "GET", "/v1/sessions/web/ports", "")
	if r.status != 404 {
		t.Errorf("another tenant's port list = %d %s, want 404", r.status, r.body)
	}

	// After delete, nothing answers (and the harness checks for leaks).
	if err := h.Client.DeleteSession(bg, "web"); err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequest("GET", h.URL+"/v1/sessions/web/ports/8000/", nil)
	req.Header.Set("Authorization", "Bearer "+h.AdminKey)
	if status, _, _ := get(t, req); status != 404 {
		t.Errorf("proxy after delete = %d, want 404", status)
	}
}

func TestPortForward(t *testing.T) {
	h := daemontest.Start(t, nil)
	startPortServer(t, h, "fw")
	c, err := h.Client.PortForward(bg, "fw", 9000)
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("echo me "), 50000)
	go c.Write(msg)
	got := make([]byte, len(msg))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo through port-forward: %v (equal %v)", err, bytes.Equal(got, msg))
	}
	c.Close()

	if _, err := h.Client.PortForward(bg, "fw", 9001); err == nil || !strings.Contains(err.Error(), "port 9001") {
		t.Errorf("port-forward to nothing = %v, want unavailable naming the port", err)
	}
	// A plain GET (no upgrade) gets the envelope.
	r := as(t, h, bearer(h.AdminKey), "GET", "/v1/sessions/fw/port-forward/9000", "")
	if r.status != 400 || r.err.Error.Code != "invalid_argument" {
		t.Errorf("port-forward without upgrade = %d %s", r.status, r.body)
	}

	// Deleting the session ends a forward in flight: its socket lived in
	// the sandbox's network namespace.
	c, err = h.Client.PortForward(bg, "fw", 9000)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := h.Client.DeleteSession(bg, "fw"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
		t.Errorf("a forward after its session was deleted read %d, %v; want it closed", n, err)
	}
}

func TestPortPreviewHost(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.PreviewDomain = "preview.test" })
	startPortServer(t, h, "dev")
	ports, err := h.Client.ListPorts(bg, "dev")
	if err != nil || len(ports) == 0 || ports[0].PreviewHost != "8000-dev.preview.test" {
		t.Fatalf("ListPorts = %+v, %v; want preview hosts", ports, err)
	}
	at := func(path string, hdr http.Header) (int, http.Header, []byte) {
		req, _ := http.NewRequest("GET", h.URL+path, nil)
		req.Host = "8000-dev.preview.test:7433"
		for k, v := range hdr {
			req.Header[k] = v
		}
		return get(t, req)
	}
	// The whole path is the app's, /v1/... included.
	status, _, body := at("/v1/sessions?q=1", bearer(h.AdminKey))
	var s seen
	if status != 200 || json.Unmarshal(body, &s) != nil || s.Path != "/v1/sessions" || s.RawQuery != "q=1" || s.Header.Get("X-Forwarded-Prefix") != "" {
		t.Fatalf("preview host = %d %s", status, body)
	}
	status, _, body = at("//a/../b/", bearer(h.AdminKey))
	s = seen{}
	if status != 200 || json.Unmarshal(body, &s) != nil || s.Path != "/b/" {
		t.Errorf("an unclean path on a preview host = %d %s, want the server to see /b/", status, body)
	}
	if status, _, _ := at("/", nil); status != 401 {
		t.Errorf("preview host without credentials = %d, want 401", status)
	}
	// A browser: ?token= once, then the cookie; a page of another site
	// cannot use the cookie.
	tok, err := h.Client.CreateToken(bg, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	status, hdr, _ := at("/app?token="+tok.Token+"&z=3", nil)
	cookie := hdr.Get("Set-Cookie")
	if status != 303 || hdr.Get("Location") != "/app?z=3" || !strings.Contains(cookie, "HttpOnly") {
		t.Fatalf("first visit with ?token= = %d, Location %q, cookie %q", status, hdr.Get("Location"), cookie)
	}
	jar := http.Header{"Cookie": {strings.Split(cookie, ";")[0] + `; app=1\2`}, "Sec-Fetch-Site": {"same-origin"}}
	status, _, body = at("/app?z=3", jar)
	s = seen{}
	if status != 200 || json.Unmarshal(body, &s) != nil || strings.Contains(s.Header.Get("Cookie"), "warren") || s.Header.Get("Cookie") != `app=1\2` {
		t.Errorf("with the cookie = %d %s", status, body)
	}
	jar.Set("Sec-Fetch-Site", "same-site")
	if status, _, _ := at("/", jar); status != 401 {
		t.Errorf("the cookie from another preview host = %d, want 401", status)
	}
	// Hosts that are not preview hosts reach the API as ever.
	req, _ := http.NewRequest("GET", h.URL+"/v1/sessions", nil)
	req.Host = "dev.preview.test"
	req.Header.Set("Authorization", "Bearer "+h.AdminKey)
	if status, _, body := get(t, req); status != 200 || !strings.Contains(string(body), `"sessions"`) {
		t.Errorf("a non-preview host = %d %s", status, body)
	}
}

func TestPortPublic(t *testing.T) {
	h := daemontest.Start(t, nil)
	startPortServer(t, h, "pub")
	put := func(public bool) reply {
		return as(t, h, bearer(h.AdminKey), "PUT", "/v1/sessions/pub/ports/8000", `{"public":`+map[bool]string{true: "true", false: "false"}[public]+`}`)
	}
	anon := func() int {
		return as(t, h, nil, "GET", "/v1/sessions/pub/ports/8000/x", "").status
	}
	// The tenant may not, by default.
	if r := put(true); r.status != 403 || r.err.Error.Code != "permission_denied" || !strings.Contains(r.err.Error.Message, "allow_public_ports") {
		t.Fatalf("public port by default = %d %s, want 403 naming the setting", r.status, r.body)
	}
	if st := anon(); st != 401 {
		t.Errorf("anonymous request to a private port = %d, want 401", st)
	}
	yes := true
	if _, err := h.Client.PutTenant(bg, "default", &api.Tenant{Policy: api.TenantPolicy{AllowPublicPorts: &yes}}); err != nil {
		t.Fatal(err)
	}
	r := put(true)
	var p api.Port
	if r.status != 200 || json.Unmarshal(r.body, &p) != nil || !p.Public || p.Port != 8000 {
		t.Fatalf("public port allowed = %d %s", r.status, r.body)
	}
	if st := anon(); st != 200 {
		t.Errorf("anonymous request to a public port = %d, want 200", st)
	}
	other := newKey(t, h, api.CreateKeyRequest{Tenant: "other", Name: "o"})
	if r := as(t, h, bearer(other.Secret), "GET", "/v1/sessions/pub/ports/8000/x", ""); r.status != 200 {
		t.Errorf("another tenant's caller to a public port = %d, want 200", r.status)
	}
	if r := as(t, h, bearer(flipLast(other.Secret)), "GET", "/v1/sessions/pub/ports/8000/x", ""); r.status != 401 {
		t.Errorf("a wrong key to a public port = %d, want 401", r.status)
	}
	// Another tenant cannot publish the same port of a session of the
	// same id; only the public port is open, not the rest of the API.
	if st := as(t, h, nil, "GET", "/v1/sessions/pub/ports/9000/", "").status; st != 401 {
		t.Errorf("anonymous request to another port = %d, want 401", st)
	}
	if st := as(t, h, nil, "GET", "/v1/sessions/pub/ports", "").status; st != 401 {
		t.Errorf("anonymous port list = %d, want 401", st)
	}
	if r := put(false); r.status != 200 {
		t.Fatalf("make private = %d %s", r.status, r.body)
	}
	if st := anon(); st != 401 {
		t.Errorf("anonymous request after making it private = %d, want 401", st)
	}
	if r := as(t, h, bearer(h.AdminKey), "PUT", "/v1/sessions/pub/ports/8000", `{"public":"yes"}`); r.status != 400 {
		t.Errorf("bad body = %d %s", r.status, r.body)
	}
}

// BenchmarkPortProxy measures a small GET through the proxy (a new
// connection into the sandbox's namespace per request) next to the same
// GET over a port-forward connection that stays open.
func BenchmarkPortProxy(b *testing.B) {
	h := daemontest.Start(b, nil)
	s, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "bench"})
	if err != nil || s.Network != "none" {
		b.Fatal(err)
	}
	bin := portServer(b)
	if _, err := h.Client.WriteFile(bg, "bench", "/tmp/portserver", bytes.NewReader(bin), 0o755); err != nil {
		b.Fatal(err)
	}
	if _, err := h.Client.Exec(bg, "bench", &api.ExecRequest{Command: "nohup /tmp/portserver -http 127.0.0.1:8000 >/dev/null 2>&1 &"}); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ports, _ := h.Client.ListPorts(bg, "bench"); len(ports) == 1 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the port server does not listen")
		}
	}
	b.Run("proxy", func(b *testing.B) {
		for b.Loop() {
			req, _ := http.NewRequest("GET", h.URL+"/v1/sessions/bench/ports/8000/x", nil)
			req.Header.Set("Authorization", "Bearer "+h.AdminKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.Run("port-forward-keepalive", func(b *testing.B) {
		c, err := h.Client.PortForward(bg, "bench", 8000)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for b.Loop() {
			io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
