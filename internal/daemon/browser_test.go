package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// ttys counts the session's terminal processes that are running.
func ttys(t *testing.T, h *daemontest.Harness, sid string) int {
	t.Helper()
	list, err := rawList(t, h, sid)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range list {
		if p.TTY && p.State == "running" {
			n++
		}
	}
	return n
}

// dialShell opens the shell WebSocket with header and returns the
// connection, or the status and envelope of the refusal.
func dialShell(t *testing.T, ctx context.Context, h *daemontest.Harness, query string, header http.Header) (*websocket.Conn, int, api.Error) {
	t.Helper()
	u := "ws" + strings.TrimPrefix(h.URL, "http") + "/v1/sessions/s/shell" + query
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: header})
	if err == nil {
		return c, http.StatusSwitchingProtocols, api.Error{}
	}
	if resp == nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	defer resp.Body.Close()
	var env api.Error
	json.NewDecoder(resp.Body).Decode(&env)
	return nil, resp.StatusCode, env
}

// firstMessage reads the daemon's first text message of a shell.
func firstMessage(t *testing.T, ctx context.Context, c *websocket.Conn) api.ShellMessage {
	t.Helper()
	typ, data, err := c.Read(ctx)
	var m api.ShellMessage
	if err != nil || typ != websocket.MessageText || json.Unmarshal(data, &m) != nil {
		t.Fatalf("first message = %v %q %v", typ, data, err)
	}
	return m
}

// TestShellStartsNothingBeforeUpgrade: upgrades refused for their origin
// (as Chromium's from another page) or their broken handshake start no
// shell, so that after more of them than a session has terminals a proper
// one still gets its shell; and the terminal limit itself is told on the
// upgraded connection.
func TestShellStartsNothingBeforeUpgrade(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 60*time.Second)
	defer cancel()

	foreign := h.Header()
	foreign.Set("Origin", "https://evil.example")
	foreign.Set("Sec-Fetch-Site", "cross-site")
	for i := range 20 {
		c, status, env := dialShell(t, ctx, h, "", foreign)
		if c != nil {
			c.CloseNow()
			t.Fatalf("attempt %d: a WebSocket from a foreign page was upgraded", i)
		}
		if status != http.StatusForbidden || env.Error.Code != "permission_denied" || !strings.Contains(env.Error.Message, "cors_origins") {
			t.Fatalf("attempt %d: foreign origin = %d %+v, want 403 permission_denied naming cors_origins", i, status, env)
		}
	}
	broken := []struct {
		name string
		set  map[string]string
		want int
	}{
		{"no Sec-WebSocket-Key", map[string]string{"Sec-WebSocket-Version": "13"}, 400},
		{"a short Sec-WebSocket-Key", map[string]string{"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "c2hvcnQ="}, 400},
		{"version 8", map[string]string{"Sec-WebSocket-Version": "8", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, 400},
		{"no Connection: Upgrade", map[string]string{"Connection": "keep-alive", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, 400},
	}
	for _, b := range broken {
		for range 5 {
			req, _ := http.NewRequestWithContext(ctx, "GET", h.URL+"/v1/sessions/s/shell", nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			for k, v := range b.set {
				req.Header.Set(k, v)
			}
			resp, err := h.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", b.name, err)
			}
			var env api.Error
			json.NewDecoder(resp.Body).Decode(&env)
			resp.Body.Close()
			if resp.StatusCode != b.want || env.Error.Code != "invalid_argument" {
				t.Fatalf("%s = %d %+v, want %d invalid_argument", b.name, resp.StatusCode, env, b.want)
			}
		}
	}
	if n := ttys(t, h, "s"); n != 0 {
		t.Fatalf("40 refused upgrades left %d shells running, want 0", n)
	}

	// More refusals than the session has terminals, and still: a shell.
	var open []*websocket.Conn
	defer func() {
		for _, c := range open {
			c.CloseNow()
		}
	}()
	for i := range 16 {
		c, status, env := dialShell(t, ctx, h, "", h.Header())
		if c == nil {
			t.Fatalf("shell %d after the refusals = %d %+v, want it upgraded", i+1, status, env)
		}
		open = append(open, c)
		if m := firstMessage(t, ctx, c); m.Type != "process" || m.ID == "" {
			t.Fatalf("shell %d: first message %+v, want the process", i+1, m)
		}
	}
	if n := ttys(t, h, "s"); n != 16 {
		t.Errorf("16 shells, %d terminals running", n)
	}
	// The 17th is over the limit: the upgrade succeeded, nothing started,
	// and the client hears why before the close.
	c, status, _ := dialShell(t, ctx, h, "", h.Header())
	if c == nil {
		t.Fatalf("shell 17 = %d, want an upgrade that then reports the limit", status)
	}
	defer c.CloseNow()
	m := firstMessage(t, ctx, c)
	if m.Type != "error" || m.Error == nil || m.Error.Code != "resource_exhausted" {
		t.Errorf("shell 17: first message %+v, want an error resource_exhausted", m)
	}
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusTryAgainLater {
		t.Errorf("shell 17: after the error %v, want close 1013 (try again later)", err)
	}
	if n := ttys(t, h, "s"); n != 16 {
		t.Errorf("after the refused 17th, %d terminals running, want 16", n)
	}
	// The Go client reports it as the refusal it is.
	if _, err := h.Client.Shell(ctx, "s", client.ShellOptions{}); err == nil || !strings.Contains(err.Error(), "resource_exhausted") {
		t.Errorf("client Shell over the limit = %v, want resource_exhausted", err)
	}
}

// TestShellOrigins: the shell takes browser WebSockets from the daemon's
// own origin, from cors_origins, and from anywhere with ?token=.
func TestShellOrigins(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.CORSOrigins = []string{"https://console.example.com"} })
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	tok, err := h.Client.CreateToken(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, origin, site, query string
		key                       bool
		want                      int
	}{
		{name: "listed origin", origin: "https://console.example.com", site: "cross-site", key: true, want: 101},
		{name: "own origin behind a proxy", origin: "https://warren.example.com", site: "same-origin", key: true, want: 101},
		{name: "own origin, old browser", origin: h.URL, key: true, want: 101},
		{name: "unlisted origin", origin: "https://evil.example", site: "cross-site", key: true, want: 403},
		{name: "unlisted origin with a token", origin: "https://evil.example", site: "cross-site", query: "?token=" + tok.Token, want: 101},
		{name: "no browser", key: true, want: 101},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hd := http.Header{}
			if tc.key {
				hd = h.Header()
			}
			if tc.origin != "" {
				hd.Set("Origin", tc.origin)
			}
			if tc.site != "" {
				hd.Set("Sec-Fetch-Site", tc.site)
			}
			sep := "?"
			if tc.query != "" {
				sep = "&"
			}
			c, status, env := dialShell(t, ctx, h, tc.query+sep+"kill_on_close=true", hd)
			if status != tc.want {
				t.Fatalf("status %d %+v, want %d", status, env, tc.want)
			}
			if c != nil {
				if m := firstMessage(t, ctx, c); m.Type != "process" {
					t.Errorf("first message %+v, want the process", m)
				}
				c.Close(websocket.StatusNormalClosure, "")
			}
		})
	}
}

// TestShellTextInput: keystrokes sent as text messages (wscat, xterm.js's
// attach addon) are typed into the terminal; the resize message still
// resizes.
func TestShellTextInput(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	c, status, env := dialShell(t, ctx, h, "?kill_on_close=true", h.Header())
	if c == nil {
		t.Fatalf("dial = %d %+v", status, env)
	}
	defer c.CloseNow()
	firstMessage(t, ctx, c)
	// One keystroke a message, as xterm.js sends them, then a line.
	for _, k := range []string{"e", "c", "h", "o", " ", "t", "y", "p", "e", "d", "-", "$", "((", "6*7", "))", "\r"} {
		if err := c.Write(ctx, websocket.MessageText, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if screen, _ := term(t, ctx, c, "typed-42"); !strings.Contains(screen, "typed-42") {
		t.Fatalf("screen %q, want the typed command's output", screen)
	}
	b, _ := json.Marshal(api.ShellMessage{Type: "resize", Cols: 91, Rows: 33})
	c.Write(ctx, websocket.MessageText, b)
	c.Write(ctx, websocket.MessageText, []byte("stty size\r"))
	if screen, _ := term(t, ctx, c, "33 91"); !strings.Contains(screen, "33 91") {
		t.Errorf("after a resize message: %q", screen)
	}
	// Text that is JSON but no control message is typed too.
	c.Write(ctx, websocket.MessageText, []byte(`echo '["not","a","message"]' | tr -d '[]"'`+"\r"))
	if screen, _ := term(t, ctx, c, "not,a,message"); !strings.Contains(screen, "not,a,message") {
		t.Errorf("JSON text input: %q", screen)
	}
}

// TestCORS: a page of a listed origin can call REST (preflight and all),
// Connect and gRPC-Web; a page of another origin cannot change anything.
func TestCORS(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.CORSOrigins = []string{"https://console.example.com"} })
	do := func(method, path, origin string, hdr map[string]string, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, h.URL+path, strings.NewReader(body))
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if method != "OPTIONS" {
			h.Authorize(req)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, path := range []string{"/v1/sessions", "/warren.v1.SessionService/ListSessions", "/mcp"} {
		resp := do("OPTIONS", path, "https://console.example.com", map[string]string{
			"Access-Control-Request-Method":  "POST",
			"Access-Control-Request-Headers": "authorization, content-type, connect-protocol-version, x-grpc-web",
		}, "")
		if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "https://console.example.com" {
			t.Errorf("preflight of %s = %d, Allow-Origin %q", path, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	resp := do("POST", "/v1/sessions", "https://console.example.com", map[string]string{"Content-Type": "application/json"}, `{"id":"c1"}`)
	if resp.StatusCode != 201 || resp.Header.Get("Access-Control-Allow-Origin") != "https://console.example.com" ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Retry-After") {
		t.Errorf("POST from the listed origin = %d, Allow-Origin %q, Expose %q", resp.StatusCode,
			resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Access-Control-Expose-Headers"))
	}
	resp = do("POST", "/warren.v1.SessionService/ListSessions", "https://console.example.com", map[string]string{
		"Content-Type": "application/json", "Connect-Protocol-Version": "1"}, `{}`)
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") == "" {
		t.Errorf("Connect call from the listed origin = %d, Allow-Origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	resp = do("POST", "/warren.v1.SessionService/ListSessions", "https://console.example.com", map[string]string{
		"Content-Type": "application/grpc-web+proto", "X-Grpc-Web": "1"}, "\x00\x00\x00\x00\x00")
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") == "" ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Grpc-Status") {
		t.Errorf("gRPC-Web call from the listed origin = %d, Allow-Origin %q, Expose %q", resp.StatusCode,
			resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Get("Access-Control-Expose-Headers"))
	}

	// Another origin: no preflight, and no simple request either.
	if resp := do("OPTIONS", "/v1/sessions", "https://evil.example", map[string]string{"Access-Control-Request-Method": "POST"}, ""); resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin = %d, Allow-Origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	if resp := do("POST", "/v1/sessions", "https://evil.example", map[string]string{"Content-Type": "text/plain"}, `{"id":"evil"}`); resp.StatusCode != 403 {
		t.Errorf("a text/plain POST from another origin = %d, want 403", resp.StatusCode)
	}
	if _, err := h.Client.GetSession(bg, "evil"); err == nil {
		t.Errorf("the refused POST created its session")
	}
}
