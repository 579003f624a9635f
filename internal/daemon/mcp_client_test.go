package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// rpcReply is an HTTP answer of /mcp: its status and the JSON-RPC messages
// of its body, whether application/json or an SSE stream.
type rpcReply struct {
	status int
	header http.Header
	body   []byte
	msgs   []map[string]any
}

// postMCP posts one JSON-RPC message to /mcp as a client of protocol
// revision version does ("" sends no MCP-Protocol-Version), with host as
// the Host header if set, and reads the whole answer.
func postMCP(ctx context.Context, h *daemontest.Harness, version, host, body string) (*rpcReply, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", h.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	h.Authorize(req)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	r := &rpcReply{status: resp.StatusCode, header: resp.Header, body: b}
	if err != nil {
		return r, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(data), &m) == nil {
					r.msgs = append(r.msgs, m)
				}
			}
		}
	} else if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		var m map[string]any
		if json.Unmarshal(b, &m) == nil {
			r.msgs = append(r.msgs, m)
		}
	}
	return r, nil
}

// last is the reply's last message (the response, after any
// notifications).
func (r *rpcReply) last() map[string]any {
	if len(r.msgs) == 0 {
		return nil
	}
	return r.msgs[len(r.msgs)-1]
}

func rpcErrorCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// waitForFile waits until path exists in session id.
func waitForFile(t *testing.T, h *daemontest.Harness, id, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := h.Client.StatFile(context.Background(), id, path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear in session %s", path, id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shellFree runs a command in the session's shell and fails the test unless
// it answers within a few seconds (the cancelled command no longer holds
// the shell) and no `sleep 120` runs in the session any more.
func shellFree(t *testing.T, h *daemontest.Harness, id string) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// "slee[p]" keeps grep from finding its own command line.
	res, err := h.Client.Exec(ctx, id, &api.ExecRequest{Command: `rm -f /tmp/started; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' | grep -c "slee[p] 120"`})
	if err != nil || time.Since(start) > 5*time.Second {
		t.Fatalf("the shell after the cancel: %v after %v; want it free at once", err, time.Since(start))
	}
	if res.Stdout != "0\n" {
		t.Fatalf("sleep 120 still runs in the session after the cancel (%q)", res.Stdout)
	}
}

// TestMCPCancelHTTP: a tools/call over HTTP ends, and the command it runs
// with it, when the client sends notifications/cancelled (in a POST of its
// own, as clients of 2025-11-25 do) or hangs up, and the session's shell is
// free at once; the same with the official Go client on 2026-07-28.
func TestMCPCancelHTTP(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(context.Background(), &api.CreateSessionRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"exec","arguments":{"session_id":"c1","command":"touch /tmp/started; sleep 120; echo late"}}}`

	t.Run("notification", func(t *testing.T) {
		got := make(chan *rpcReply, 1)
		go func() {
			r, err := postMCP(context.Background(), h, "2025-11-25", "", call)
			if err != nil {
				t.Errorf("the call's POST: %v", err)
			}
			got <- r
		}()
		waitForFile(t, h, "c1", "/tmp/started")
		// Another client of another key with the same id cancels nothing.
		other := newKey(t, h, api.CreateKeyRequest{Tenant: "default", Admin: true})
		oh := *h
		oh.AdminKey = other.Secret
		if r, err := postMCP(context.Background(), &oh, "2025-11-25", "", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`); err != nil || r.status != http.StatusAccepted {
			t.Fatalf("another key's cancel: %v %v", r, err)
		}
		select {
		case r := <-got:
			t.Fatalf("another key's cancel ended the call: %s", r.body)
		case <-time.After(time.Second):
		}
		start := time.Now()
		r, err := postMCP(context.Background(), h, "2025-11-25", "", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"test"}}`)
		if err != nil || r.status != http.StatusAccepted {
			t.Fatalf("POST notifications/cancelled: %v %v", r, err)
		}
		select {
		case r := <-got:
			res, _ := r.last()["result"].(map[string]any)
			if r.last()["id"] != float64(7) || res["isError"] != true || !strings.Contains(string(r.body), "cancelled") {
				t.Errorf("the cancelled call answered %s", r.body)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the call still runs 15s after its cancel")
		}
		t.Logf("cancel to answer: %v", time.Since(start))
		shellFree(t, h, "c1")
	})

	t.Run("hangup", func(t *testing.T) {
		ctx, hangUp := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			postMCP(ctx, h, "2025-11-25", "", call)
		}()
		waitForFile(t, h, "c1", "/tmp/started")
		hangUp()
		<-done
		shellFree(t, h, "c1")
	})

	t.Run("go client 2026-07-28", func(t *testing.T) {
		cs := mcpConnect(t, h, h.AdminKey)
		if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
			t.Errorf("the Go SDK's client negotiated %q, want 2026-07-28", v)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"session_id": "c1", "command": "touch /tmp/started; sleep 120"}})
			errc <- err
		}()
		waitForFile(t, h, "c1", "/tmp/started")
		cancel()
		if err := <-errc; err == nil {
			t.Error("a cancelled CallTool returned no error")
		}
		shellFree(t, h, "c1")
	})
}

// TestMCPProgress: a call that carries a progress token hears how long it
// has run, on both protocol revisions.
func TestMCPProgress(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(context.Background(), &api.CreateSessionRequest{ID: "p1"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	// 2025-11-25, on the wire: notifications come on the call's SSE
	// stream before its result.
	wg.Go(func() {
		r, err := postMCP(context.Background(), h, "2025-11-25", "",
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"progressToken":"tok-3"},"name":"exec","arguments":{"session_id":"p1","argv":["sleep","6"]}}}`)
		if err != nil {
			t.Errorf("POST: %v", err)
			return
		}
		var progress int
		for _, m := range r.msgs {
			if m["method"] == "notifications/progress" {
				p, _ := m["params"].(map[string]any)
				if p["progressToken"] != "tok-3" || !strings.Contains(fmt.Sprint(p["message"]), "exec running for") {
					t.Errorf("progress %v", p)
				}
				progress++
			}
		}
		if progress == 0 || r.last()["id"] != float64(3) {
			t.Errorf("2025-11-25: %d progress notifications, last message %v; want at least one, then the result", progress, r.last())
		}
	})
	// 2026-07-28, with the Go SDK's client.
	wg.Go(func() {
		var mu sync.Mutex
		var got []*mcp.ProgressNotificationParams
		c := mcp.NewClient(&mcp.Implementation{Name: "progress-test", Version: "1"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				got = append(got, r.Params)
				mu.Unlock()
			},
		})
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
			Endpoint: h.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{h.AdminKey}}, MaxRetries: -1,
		}, nil)
		if err != nil {
			t.Errorf("connect: %v", err)
			return
		}
		defer cs.Close()
		params := &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"session_id": "p1", "argv": []string{"sleep", "6"}}}
		params.SetProgressToken("tok-go")
		res, err := cs.CallTool(context.Background(), params)
		if err != nil || res.IsError {
			t.Errorf("CallTool: %v %v", res, err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 || got[0].ProgressToken != "tok-go" || got[0].Progress <= 0 {
			t.Errorf("2026-07-28: progress %+v; want at least one for tok-go", got)
		}
	})
	wg.Wait()
	// Without a token, none.
	r, err := postMCP(context.Background(), h, "2025-11-25", "",
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"exec","arguments":{"session_id":"p1","argv":["sleep","6"]}}}`)
	if err != nil || len(r.msgs) != 1 {
		t.Errorf("a call without a progress token: %v, %d messages; want only the result", err, len(r.msgs))
	}
}

// TestMCPProtocolErrors: what a client sees of a body that is not JSON, a
// method MCP does not have, and the revisions it negotiates.
func TestMCPProtocolErrors(t *testing.T) {
	h := daemontest.Start(t, nil)
	ctx := context.Background()
	for _, version := range []string{"", "2025-11-25", "2025-06-18"} {
		r, err := postMCP(ctx, h, version, "", `{"jsonrpc":"2.0","id":9,"method":"no/such/method","params":{}}`)
		if err != nil || r.status != http.StatusOK || rpcErrorCode(r.last()) != -32601 || r.last()["id"] != float64(9) {
			t.Errorf("unknown method (revision %q): %v %d %s; want 200 with JSON-RPC -32601 for id 9", version, err, r.status, r.body)
		}
	}
	// 2026-07-28: the SDK's own answer, -32601 in a 404.
	r, err := postMCP(ctx, h, "2026-07-28", "", `{"jsonrpc":"2.0","id":9,"method":"no/such/method","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	if err != nil || r.status != http.StatusNotFound || rpcErrorCode(r.last()) != -32601 {
		t.Errorf("unknown method on 2026-07-28: %v %d %s; want 404 with -32601", err, r.status, r.body)
	}
	for _, body := range []string{"not json", `{"jsonrpc":"2.0","id":1,"method":"tools/list"`} {
		r, err := postMCP(ctx, h, "2025-11-25", "", body)
		if err != nil || r.status != http.StatusBadRequest || rpcErrorCode(r.last()) != -32700 || r.last()["id"] != nil {
			t.Errorf("body %q: %v %d %s; want 400 with JSON-RPC -32700", body, err, r.status, r.body)
		}
	}
	// Older clients negotiate their revision.
	for _, v := range []string{"2025-11-25", "2025-06-18", "2025-03-26"} {
		r, err := postMCP(ctx, h, "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+v+`","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}`)
		res, _ := r.last()["result"].(map[string]any)
		if err != nil || res["protocolVersion"] != v {
			t.Errorf("initialize with %s: %v %s", v, err, r.body)
		}
		caps, _ := res["capabilities"].(map[string]any)
		if tools, _ := caps["tools"].(map[string]any); tools == nil || tools["listChanged"] == true || caps["logging"] != nil {
			t.Errorf("capabilities %v: want tools without listChanged, no logging", caps)
		}
	}
}

// TestMCPAllowedHosts: a loopback daemon refuses a foreign Host header on
// /mcp (DNS rebinding) unless mcp_allowed_hosts names it, as a reverse
// proxy on the same host sends it.
func TestMCPAllowedHosts(t *testing.T) {
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	h := daemontest.Start(t, nil)
	ctx := context.Background()
	r, err := postMCP(ctx, h, "2025-11-25", "warren.example.com", list)
	var env api.Error
	if err != nil || r.status != http.StatusForbidden || json.Unmarshal(r.body, &env) != nil || env.Error.Code != "permission_denied" || !strings.Contains(env.Error.Message, "mcp_allowed_hosts") {
		t.Errorf("a foreign Host by default: %v %d %s; want 403 permission_denied naming mcp_allowed_hosts", err, r.status, r.body)
	}
	for _, host := range []string{"", "localhost", "127.0.0.1:1"} {
		if r, err := postMCP(ctx, h, "2025-11-25", host, list); err != nil || r.status != http.StatusOK {
			t.Errorf("Host %q: %v %d %s", host, err, r.status, r.body)
		}
	}

	p := daemontest.Start(t, func(c *config.Config) { c.MCPAllowedHosts = "warren.example.com, proxy.internal" })
	for host, want := range map[string]int{
		"warren.example.com":     http.StatusOK,
		"WARREN.example.com:443": http.StatusOK,
		"proxy.internal":         http.StatusOK,
		"evil.example.com":       http.StatusForbidden,
	} {
		r, err := postMCP(ctx, p, "2025-11-25", host, list)
		if err != nil || r.status != want {
			t.Errorf("Host %q with mcp_allowed_hosts: %v %d %s, want %d", host, err, r.status, r.body, want)
		}
		if want == http.StatusOK {
			res, _ := r.last()["result"].(map[string]any)
			if tools, _ := res["tools"].([]any); len(tools) != 14 {
				t.Errorf("Host %q: tools/list answered %s", host, r.body)
			}
		}
	}
}
