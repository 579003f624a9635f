package daemon_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/api"
	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/api/gen/warren/v1/warrenv1connect"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// rawReply sends head (the request line and headers, without the blank
// line) and body over one TCP connection, half-closes it, and reads the
// answer: how a client whose body ends early, or never comes, looks to
// the daemon.
func rawReply(t *testing.T, h *daemontest.Harness, head, body string, wait time.Duration) reply {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(h.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if h.AdminKey != "" {
		head += "\r\nAuthorization: Bearer " + h.AdminKey
	}
	if _, err := io.WriteString(c, head+"\r\nHost: x\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s: no answer: %v", strings.SplitN(head, "\r\n", 2)[0], err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, body: b}
	json.Unmarshal(b, &r.err)
	return r
}

// wantError checks that r is the error envelope with status and code, and
// that its message names every word in words.
func wantError(t *testing.T, what string, r reply, status int, code string, words ...string) {
	t.Helper()
	if r.status != status || r.err.Error.Code != code {
		t.Errorf("%s: %d %s; want %d %s", what, r.status, r.body, status, code)
		return
	}
	for _, w := range words {
		if !strings.Contains(r.err.Error.Message, w) {
			t.Errorf("%s: the message %q does not name %q", what, r.err.Error.Message, w)
		}
	}
}

// TestOutOfRangeValues: numbers past a maximum are refused with 400 and
// the field's name and maximum, not wrapped around into tiny durations (a
// ttl_seconds of 18446744074 seconds used to become a few seconds and the
// session was reaped at once), on REST, Connect and MCP alike.
func TestOutOfRangeValues(t *testing.T) {
	h := daemontest.Start(t, nil)
	for _, tc := range []struct{ body, field, max string }{
		{`{"ttl_seconds":18446744074}`, "ttl_seconds", "604800"},
		{`{"ttl_seconds":9223372036854775807}`, "ttl_seconds", "604800"},
		{`{"max_lifetime_seconds":18446744074}`, "max_lifetime_seconds", ""},
	} {
		r := as(t, h, bearer(h.AdminKey), "POST", "/v1/sessions", tc.body)
		wantError(t, "create "+tc.body, r, 400, "invalid_argument", tc.field, tc.max)
	}
	cc := warrenv1connect.NewSessionServiceClient(http.DefaultClient, h.URL, connect.WithProtoJSON())
	creq := connect.NewRequest(&warrenv1.CreateSessionRequest{TtlSeconds: 18446744074})
	creq.Header().Set("Authorization", "Bearer "+h.AdminKey)
	if _, err := cc.CreateSession(t.Context(), creq); connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "ttl_seconds") {
		t.Errorf("Connect create with ttl_seconds 18446744074: %v; want invalid_argument naming ttl_seconds", err)
	}

	s, err := h.Client.CreateSession(t.Context(), &api.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"command":"true","timeout_ms":9223372036854775807}`,
		`{"command":"true","timeout_ms":18446744073710}`,
	} {
		r := as(t, h, bearer(h.AdminKey), "POST", "/v1/sessions/"+s.ID+"/exec", body)
		wantError(t, "exec "+body, r, 400, "invalid_argument", "timeout_ms", "3600000")
	}
	xc := warrenv1connect.NewExecServiceClient(http.DefaultClient, h.URL, connect.WithProtoJSON())
	xreq := connect.NewRequest(&warrenv1.ExecRequest{SessionId: s.ID, Command: "true", TimeoutMs: 18446744073710})
	xreq.Header().Set("Authorization", "Bearer "+h.AdminKey)
	if _, err := xc.Exec(t.Context(), xreq); connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "timeout_ms") {
		t.Errorf("Connect exec with a huge timeout_ms: %v; want invalid_argument naming timeout_ms", err)
	}
	cs := mcpConnect(t, h, h.AdminKey)
	if txt := callErr(t, cs, "create_session", map[string]any{"ttl_seconds": int64(18446744074)}, "invalid_argument"); !strings.Contains(txt, "ttl_seconds") {
		t.Errorf("MCP create_session with ttl_seconds 18446744074: %q does not name ttl_seconds", txt)
	}
	if txt := callErr(t, cs, "exec", map[string]any{"session_id": s.ID, "command": "true", "timeout_ms": int64(18446744073710)}, "invalid_argument"); !strings.Contains(txt, "timeout_ms") {
		t.Errorf("MCP exec with a huge timeout_ms: %q does not name timeout_ms", txt)
	}
	// The session was not reaped meanwhile.
	if _, err := h.Client.GetSession(t.Context(), s.ID); err != nil {
		t.Errorf("session after the refusals: %v", err)
	}
}

// TestTruncatedBodyNotRun: a complete JSON object whose body then ends
// early (Content-Length promised more) or goes on with more JSON is
// refused with 400 and never run.
func TestTruncatedBodyNotRun(t *testing.T) {
	h := daemontest.Start(t, nil)
	s, err := h.Client.CreateSession(t.Context(), &api.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	path := "/v1/sessions/" + s.ID + "/exec"
	body := `{"command":"touch /tmp/ran1"}`
	r := rawReply(t, h, fmt.Sprintf("POST %s HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: %d", path, len(body)+20), body, 10*time.Second)
	wantError(t, "exec with a body that ends early", r, 400, "invalid_argument")
	r = as(t, h, bearer(h.AdminKey), "POST", path, `{"command":"touch /tmp/ran2"}{"comm`)
	wantError(t, "exec with trailing partial JSON", r, 400, "invalid_argument")
	r = as(t, h, bearer(h.AdminKey), "POST", path, `{"command":"touch /tmp/ran3"} x`)
	wantError(t, "exec with trailing garbage", r, 400, "invalid_argument")
	res, err := h.Client.Exec(t.Context(), s.ID, &api.ExecRequest{Command: "ls /tmp/ran* 2>&1; true"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Stdout, "ran") && !strings.Contains(res.Stdout, "No such file") {
		t.Errorf("a refused body ran: %q", res.Stdout)
	}
}

// TestEarlyEndingBodies: an upload, archive or stdin whose body ends
// before its Content-Length is a client mistake, 400, not a 500.
func TestEarlyEndingBodies(t *testing.T) {
	h := daemontest.Start(t, nil)
	s, err := h.Client.CreateSession(t.Context(), &api.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r := as(t, h, bearer(h.AdminKey), "POST", "/v1/sessions/"+s.ID+"/processes", `{"command":"cat","stdin":true}`)
	var p api.Process
	if r.status != 201 && r.status != 200 || json.Unmarshal(r.body, &p) != nil {
		t.Fatalf("start process: %d %s", r.status, r.body)
	}
	base := "/v1/sessions/" + s.ID
	for _, tc := range []struct{ what, head string }{
		{"file upload", "PUT " + base + "/files?path=/tmp/f HTTP/1.1"},
		{"archive upload", "PUT " + base + "/archive?path=/tmp HTTP/1.1\r\nContent-Type: application/x-tar"},
		{"stdin", "POST " + base + "/processes/" + p.ID + "/stdin HTTP/1.1"},
		{"image import", "POST /v1/images?name=cut HTTP/1.1\r\nContent-Type: application/x-tar"},
		{"snapshot import", "PUT /v1/snapshots/cut/import HTTP/1.1\r\nContent-Type: application/x-tar"},
	} {
		// The start of a good tar (a file's header and some of its
		// bytes), which is also fine as a file's or stdin's start.
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: "f", Mode: 0o644, Size: 50000})
		tw.Write(bytes.Repeat([]byte("x"), 1000))
		r := rawReply(t, h, tc.head+"\r\nContent-Length: 100000", buf.String()[:1512], 10*time.Second)
		wantError(t, tc.what+" that ends early", r, 400, "invalid_argument")
	}
}

// TestDeleteDuringUpload: a session deleted while a file streams into it
// answers the upload with 404 or 409, not a 500 about the agent.
func TestDeleteDuringUpload(t *testing.T) {
	h := daemontest.Start(t, nil)
	s, err := h.Client.CreateSession(t.Context(), &api.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("PUT", h.URL+"/v1/sessions/"+s.ID+"/files?path=/tmp/big", pr)
	done := make(chan reply, 1)
	go func() {
		resp, err := h.Do(req)
		if err != nil {
			done <- reply{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		r := reply{status: resp.StatusCode, body: b}
		json.Unmarshal(b, &r.err)
		done <- r
	}()
	chunk := make([]byte, 64<<10)
	for range 16 {
		pw.Write(chunk)
	}
	go func() {
		// Keep the body flowing while the session goes away.
		for {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if err := h.Client.DeleteSession(t.Context(), s.ID); err != nil {
		t.Fatal(err)
	}
	var r reply
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the upload did not end after its session was deleted")
	}
	pw.CloseWithError(io.ErrClosedPipe)
	if r.status != 404 && r.status != 409 {
		t.Errorf("upload into a deleted session: %d %s; want 404 or 409", r.status, r.body)
	}
}

// TestOversizedCommands: a command or argv past the limit is 413
// too_large naming the limit, for exec and processes alike, and a process
// in a directory that does not exist is 400.
func TestOversizedCommands(t *testing.T) {
	h := daemontest.Start(t, nil)
	s, err := h.Client.CreateSession(t.Context(), &api.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	base := "/v1/sessions/" + s.ID
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	huge := "echo " + strings.Repeat("a", 5<<20)
	wantError(t, "exec of a 5 MiB command", as(t, h, bearer(h.AdminKey), "POST", base+"/exec", js(api.ExecRequest{Command: huge})), 413, "too_large", "1048576")
	wantError(t, "exec of a 5 MiB argv", as(t, h, bearer(h.AdminKey), "POST", base+"/exec", js(api.ExecRequest{Argv: []string{"echo", huge}})), 413, "too_large", "1048576")
	wantError(t, "process of a 5 MiB command", as(t, h, bearer(h.AdminKey), "POST", base+"/processes", js(api.StartProcessRequest{Command: huge})), 413, "too_large")
	mid := "echo " + strings.Repeat("a", 200<<10)
	wantError(t, "process of a 200 KiB command", as(t, h, bearer(h.AdminKey), "POST", base+"/processes", js(api.StartProcessRequest{Command: mid})), 413, "too_large", "131071")
	wantError(t, "exec argv of a 200 KiB argument", as(t, h, bearer(h.AdminKey), "POST", base+"/exec", js(api.ExecRequest{Argv: []string{"echo", mid}})), 413, "too_large", "131071")
	// A command under the limits runs.
	if res, err := h.Client.Exec(t.Context(), s.ID, &api.ExecRequest{Command: "echo " + strings.Repeat("a", 100<<10) + " | wc -c"}); err != nil || strings.TrimSpace(res.Stdout) != fmt.Sprint(100<<10+1) {
		t.Errorf("exec of a 100 KiB command: %v %+v", err, res)
	}
	wantError(t, "process in a missing cwd", as(t, h, bearer(h.AdminKey), "POST", base+"/processes", `{"command":"true","cwd":"/no/such/dir"}`), 400, "invalid_argument", "/no/such/dir")
}

// TestResizeExitedTTY: resizing the terminal of a process that ended is a
// conflict, not a 500.
func TestResizeExitedTTY(t *testing.T) {
	h := daemontest.Start(t, nil)
	s, err := h.Client.CreateSession(t.Context(), &api.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	base := "/v1/sessions/" + s.ID + "/processes"
	r := as(t, h, bearer(h.AdminKey), "POST", base, `{"command":"true","tty":true}`)
	var p api.Process
	if json.Unmarshal(r.body, &p) != nil || p.ID == "" {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.State != "exited" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		json.Unmarshal(as(t, h, bearer(h.AdminKey), "GET", base+"/"+p.ID, "").body, &p)
	}
	wantError(t, "resize of an exited terminal", as(t, h, bearer(h.AdminKey), "POST", base+"/"+p.ID+"/resize", `{"cols":100,"rows":40}`), 409, "conflict")
}

// TestTransportErrorsEnveloped: what net/http answers on its own, before
// any handler runs, comes in the error envelope with net/http's status
// (edge.Listener), and a normal call on a fresh connection still works.
func TestTransportErrorsEnveloped(t *testing.T) {
	h := daemontest.Start(t, nil)
	for _, tc := range []struct {
		what, head string
		status     int
		code       string
	}{
		{"an unsupported Transfer-Encoding", "POST /v1/sessions HTTP/1.1\r\nTransfer-Encoding: gzip, chunked", 501, "invalid_argument"},
		{"two Content-Lengths", "POST /v1/sessions HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2", 400, "invalid_argument"},
		{"a malformed request line", "GET\x01 / HTTP/1.1", 400, "invalid_argument"},
		{"a malformed header", "GET /v1/sessions HTTP/1.1\r\nNo Colon Here", 400, "invalid_argument"},
		{"headers over the limit", "GET /v1/sessions HTTP/1.1\r\nX-Big: " + strings.Repeat("a", 1<<20+8<<10), 431, "too_large"},
	} {
		r := rawReply(t, h, tc.head, "", 10*time.Second)
		wantError(t, tc.what, r, tc.status, tc.code)
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tc.what, ct)
		}
	}
	if _, err := h.Client.ListSessions(t.Context()); err != nil {
		t.Errorf("the daemon after the malformed requests: %v", err)
	}
}

// TestFollowSilentProcess: following a process that prints nothing
// answers at once (the headers come before the first byte), for the event
// stream and the raw bytes alike.
func TestFollowSilentProcess(t *testing.T) {
	h := daemontest.Start(t, nil)
	s, err := h.Client.CreateSession(t.Context(), &api.CreateSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	base := "/v1/sessions/" + s.ID + "/processes"
	r := as(t, h, bearer(h.AdminKey), "POST", base, `{"command":"sleep 600"}`)
	var p api.Process
	if json.Unmarshal(r.body, &p) != nil || p.ID == "" {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	for _, accept := range []string{"text/event-stream", "application/octet-stream"} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", h.URL+base+"/"+p.ID+"/output?follow=true", nil)
		req.Header.Set("Accept", accept)
		resp, err := h.Do(req)
		if err != nil {
			t.Errorf("follow with Accept %s: no answer: %v", accept, err)
		} else {
			if resp.StatusCode != 200 {
				t.Errorf("follow with Accept %s: %d", accept, resp.StatusCode)
			}
			resp.Body.Close()
		}
		cancel()
	}
}
