package daemon_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// sseRequest sends a request for an event stream, with Last-Event-ID if
// lastID is not "-", and returns the status and the whole body.
func sseRequest(t *testing.T, h *daemontest.Harness, method, path, body, lastID string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, h.URL+path, strings.NewReader(body))
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "-" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := h.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestExecStreamReconnect: a client that repeats a streamed exec with
// Last-Event-ID (as EventSource-style clients reconnect) never runs the
// command again: 409 when it lost the stream midway, 204 when it had it
// all. The stream says how long to wait before reconnecting.
func TestExecStreamReconnect(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	path := "/v1/sessions/s/exec"
	body := `{"command":"echo run >> /tmp/runs; echo one; echo two >&2"}`
	status, stream := sseRequest(t, h, "POST", path, body, "-")
	if status != 200 {
		t.Fatalf("exec stream = %d %s", status, stream)
	}
	if !strings.HasPrefix(stream, "retry: 3000\n\n") {
		t.Errorf("the stream does not start with retry: %q", stream)
	}
	// stdout and stderr are read apart, so either may come first; the ids
	// count the events in the order they were sent.
	for _, want := range []string{"event: stdout\nid: ", "event: stderr\nid: ", "\nid: 1\n", "\nid: 2\n", "event: exit\nid: end\n"} {
		if !strings.Contains(stream, want) {
			t.Errorf("stream lacks %q:\n%s", want, stream)
		}
	}

	// Cut off after the first event: the repeat is refused.
	status, answer := sseRequest(t, h, "POST", path, body, "1")
	if status != http.StatusConflict || !strings.Contains(answer, `"code":"conflict"`) || !strings.Contains(answer, "/processes") {
		t.Errorf("reconnect midway = %d %s, want 409 conflict pointing to processes", status, answer)
	}
	// A JSON client that sends the header is no exception.
	req, _ := http.NewRequest("POST", h.URL+path, strings.NewReader(body))
	req.Header.Set("Last-Event-ID", "2")
	if resp, err := h.Do(req); err != nil || resp.StatusCode != http.StatusConflict {
		t.Errorf("a JSON exec with Last-Event-ID = %v %v, want 409", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	// After the whole stream: 204, and an EventSource stops.
	if status, answer := sseRequest(t, h, "POST", path, body, "end"); status != http.StatusNoContent || answer != "" {
		t.Errorf("reconnect after the end = %d %q, want 204 and nothing", status, answer)
	}
	res, err := h.Client.Exec(bg, "s", &api.ExecRequest{Command: "wc -l < /tmp/runs"})
	if err != nil || strings.TrimSpace(res.Stdout) != "1" {
		t.Errorf("the command ran %q times (%v), want once", strings.TrimSpace(res.Stdout), err)
	}
}

// TestProcessOutputReconnectAfterExit: an EventSource on a process's
// output reconnects whenever the stream ends; once the process has exited
// and the client has all its output, it gets 204 and stops. Before that it
// resumes where it was.
func TestProcessOutputReconnectAfterExit(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, command, out string }{
		{"with output", "echo hello; echo world", "world"},
		{"without output", "true", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProc(t, h, "s", api.StartProcessRequest{Command: tc.command})
			path := "/v1/sessions/s/processes/" + p.ID + "/output?follow=true"
			status, stream := sseRequest(t, h, "GET", path, "", "-")
			if status != 200 || !strings.HasPrefix(stream, "retry: 3000\n\n") || !strings.Contains(stream, "event: exit\n") || !strings.Contains(stream, tc.out) {
				t.Fatalf("output = %d %q", status, stream)
			}
			// The exit event's id is where the output ends.
			exitAt := strings.Index(stream, "event: exit\nid: ")
			if exitAt < 0 {
				t.Fatalf("the exit event has no id: %q", stream)
			}
			lastID, _, _ := strings.Cut(stream[exitAt+len("event: exit\nid: "):], "\n")
			if want := getProc(t, h, "s", p.ID).OutputBytes; lastID != strconvI(want) {
				t.Errorf("exit id %q, want the output's end %d", lastID, want)
			}
			if status, answer := sseRequest(t, h, "GET", path, "", lastID); status != http.StatusNoContent || answer != "" {
				t.Errorf("reconnect after the exit = %d %q, want 204", status, answer)
			}
			// A reconnect from before the end still gets the rest.
			if tc.out != "" {
				status, rest := sseRequest(t, h, "GET", path, "", "6")
				if status != 200 || !strings.Contains(rest, "world") || strings.Contains(rest, "hello") || !strings.Contains(rest, "event: exit") {
					t.Errorf("reconnect from 6 = %d %q, want world and the exit", status, rest)
				}
			}
		})
	}
}

func strconvI(n int64) string { return strconv.FormatInt(n, 10) }
