package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/warrenhq/warren/api"
)

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []sseEvent
	}{
		{
			name: "one event",
			in:   "event: stdout\ndata: {\"text\":\"hi\"}\n\n",
			want: []sseEvent{{name: "stdout", data: `{"text":"hi"}`}},
		},
		{
			name: "lines in data, CRLF, comments and a byte order mark",
			in:   "\ufeff: keep-alive\r\nevent:exit\r\ndata: a\r\ndata:  b\r\n: more\r\ndata\r\n\r\n",
			want: []sseEvent{{name: "exit", data: "a\n b\n"}},
		},
		{
			name: "CR alone ends lines",
			in:   "event: x\rdata: 1\r\revent: y\rdata: 2\r\r",
			want: []sseEvent{{name: "x", data: "1"}, {name: "y", data: "2"}},
		},
		{
			name: "default name, ids that last, unknown fields",
			in:   "data: 1\nid: 7\nretry: 100\nfoo: bar\n\ndata: 2\n\nid\ndata: 3\n\n",
			want: []sseEvent{{name: "message", data: "1", id: "7"}, {name: "message", data: "2", id: "7"}, {name: "message", data: "3"}},
		},
		{
			name: "an event without data is not dispatched, and its name does not leak",
			in:   "event: gap\n\ndata: x\n\n",
			want: []sseEvent{{name: "message", data: "x"}},
		},
		{
			name: "an id with NUL is ignored",
			in:   "id: 5\ndata: a\n\nid: 6\x00\ndata: b\n\n",
			want: []sseEvent{{name: "message", data: "a", id: "5"}, {name: "message", data: "b", id: "5"}},
		},
		{
			name: "an event cut off by the end is dropped",
			in:   "event: a\ndata: 1\n\nevent: b\ndata: 2\n",
			want: []sseEvent{{name: "a", data: "1"}},
		},
		{
			name: "empty",
			in:   "",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// One byte at a time, so that a CR and its LF arrive apart.
			r := newSSEReader(&oneByteReader{strings.NewReader(tc.in)})
			var got []sseEvent
			for {
				ev, err := r.next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("next() error: %v", err)
				}
				got = append(got, ev)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(sseEvent{})); diff != "" {
				t.Errorf("events of %q mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

type oneByteReader struct{ r io.Reader }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

func TestSSEReaderBounds(t *testing.T) {
	long := "data: " + strings.Repeat("x", maxSSELine) + "\n\n"
	if _, err := newSSEReader(strings.NewReader(long)).next(); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("next() of an endless line = %v, want an error", err)
	}
	var b strings.Builder
	line := "data: " + strings.Repeat("y", 1<<20) + "\n"
	for range maxSSEEvent/(1<<20) + 1 {
		b.WriteString(line)
	}
	b.WriteString("\n")
	if _, err := newSSEReader(strings.NewReader(b.String())).next(); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("next() of an endless event = %v, want an error", err)
	}
}

// sseServer answers with status 200 and the event stream events, flushing
// after each, and records the request.
func sseServer(t *testing.T, header http.Header, events ...string) (*httptest.Server, *seen) {
	t.Helper()
	got := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*got = seen{
			method: r.Method, path: r.URL.EscapedPath(), query: r.URL.Query(),
			contentType: r.Header.Get("Content-Type"), accept: r.Header.Get("Accept"),
			auth: r.Header.Get("Authorization"), body: b,
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(200)
		for _, ev := range events {
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// output is what onOutput received.
type output struct {
	Stream, Data string
}

func collect(outs *[]output) func(string, []byte) error {
	return func(stream string, p []byte) error {
		*outs = append(*outs, output{stream, string(p)})
		return nil
	}
}

func TestExecStream(t *testing.T) {
	checkGoroutines(t)
	srv, got := sseServer(t, nil,
		": stream open\n\n",
		"event: stdout\ndata: {\"text\":\"héllo\\n\"}\n\n",
		"event: stderr\ndata: {\"base64\":\"/wAB\"}\n\n",
		"event: progress\ndata: {}\n\n", // unknown: skipped
		"event: stdout\ndata: {\"text\":\"\"}\n\n",
		"event: stdout\r\ndata: {\"text\":\"bye\"}\r\n\r\n",
		"event: exit\ndata: {\"stdout\":\"\",\"stderr\":\"\",\"exit_code\":3,\"duration_ms\":12.5,\"timed_out\":true,\"truncated\":false,\"shell_restarted\":false,\"oom_killed\":true,\"signal\":\"SIGKILL\"}\n\n",
	)
	var outs []output
	res, err := New(srv.URL, WithToken("s3cret")).ExecStream(t.Context(), "demo", &api.ExecRequest{Command: "x"}, collect(&outs))
	if err != nil {
		t.Fatalf("ExecStream() error: %v", err)
	}
	want := &api.ExecResult{ExitCode: 3, DurationMs: 12.5, TimedOut: true, OOMKilled: true, Signal: "SIGKILL"}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("ExecStream() result mismatch (-want +got):\n%s", diff)
	}
	wantOuts := []output{{"stdout", "héllo\n"}, {"stderr", "\xff\x00\x01"}, {"stdout", "bye"}}
	if diff := cmp.Diff(wantOuts, outs); diff != "" {
		t.Errorf("ExecStream() output mismatch (-want +got):\n%s", diff)
	}
	if got.method != "POST" || got.path != "/v1/sessions/demo/exec" || got.accept != "text/event-stream" ||
		got.contentType != "application/json" || got.auth != "Bearer s3cret" || string(got.body) != `{"command":"x"}` {
		t.Errorf("request = %+v, want POST /v1/sessions/demo/exec, Accept text/event-stream, the JSON body and the token", got)
	}
}

// TestExecStreamIsLive shows that output reaches onOutput while the command
// still runs.
func TestExecStreamIsLive(t *testing.T) {
	checkGoroutines(t)
	seenFirst := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: stdout\ndata: {\"text\":\"first\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-seenFirst:
		case <-time.After(10 * time.Second):
			io.WriteString(w, "event: error\ndata: {\"error\":{\"code\":\"internal\",\"message\":\"the client never saw the first chunk\"}}\n\n")
			return
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "event: exit\ndata: {\"exit_code\":0}\n\n")
	}))
	defer srv.Close()
	_, err := New(srv.URL).ExecStream(t.Context(), "demo", &api.ExecRequest{Command: "x"}, func(_ string, p []byte) error {
		if string(p) == "first" {
			close(seenFirst)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ExecStream() error: %v", err)
	}
}

func TestExecStreamFailures(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name     string
		status   int
		ctype    string
		body     string
		onOutput func(string, []byte) error
		check    func(t *testing.T, err error)
	}{
		{
			name: "error before the stream", status: 404, ctype: "application/json",
			body: `{"error":{"code":"not_found","message":"session \"x\" not found"}}`,
			check: func(t *testing.T, err error) {
				var e *Error
				if !errors.As(err, &e) || e.StatusCode != 404 || e.Code != "not_found" {
					t.Errorf("error = %#v, want a not_found *Error with status 404", err)
				}
			},
		},
		{
			name: "error event", status: 200, ctype: "text/event-stream",
			body: "event: stdout\ndata: {\"text\":\"a\"}\n\nevent: error\ndata: {\"error\":{\"code\":\"unavailable\",\"message\":\"the sandbox died\"}}\n\n",
			check: func(t *testing.T, err error) {
				want := &Error{StatusCode: 503, Code: "unavailable", Message: "the sandbox died"}
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("error = %v (%T), want *Error", err, err)
				}
				if diff := cmp.Diff(want, e); diff != "" {
					t.Errorf("error mismatch (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "error event that is no envelope", status: 200, ctype: "text/event-stream",
			body: "event: error\ndata: oops\n\n",
			check: func(t *testing.T, err error) {
				if Code(err) != "internal" || !strings.Contains(err.Error(), "oops") {
					t.Errorf("error = %v, want internal naming the data", err)
				}
			},
		},
		{
			name: "stream ends without exit", status: 200, ctype: "text/event-stream",
			body: "event: stdout\ndata: {\"text\":\"a\"}\n\n",
			check: func(t *testing.T, err error) {
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("error = %v, want io.ErrUnexpectedEOF", err)
				}
			},
		},
		{
			name: "bad base64", status: 200, ctype: "text/event-stream",
			body: "event: stdout\ndata: {\"base64\":\"!!\"}\n\n",
			check: func(t *testing.T, err error) {
				if err == nil || !strings.Contains(err.Error(), "base64") {
					t.Errorf("error = %v, want a base64 error", err)
				}
			},
		},
		{
			name: "onOutput fails", status: 200, ctype: "text/event-stream",
			body:     "event: stdout\ndata: {\"text\":\"a\"}\n\nevent: exit\ndata: {\"exit_code\":0}\n\n",
			onOutput: func(string, []byte) error { return errBoom },
			check: func(t *testing.T, err error) {
				if err != errBoom {
					t.Errorf("error = %v, want onOutput's error as is", err)
				}
			},
		},
		{
			name: "unexpected type", status: 200, ctype: "text/plain", body: "hello",
			check: func(t *testing.T, err error) {
				if err == nil || !strings.Contains(err.Error(), `"text/plain"`) {
					t.Errorf("error = %v, want one naming the type", err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			srv, _ := fakeDaemon(t, tc.status, http.Header{"Content-Type": {tc.ctype}}, tc.body)
			res, err := New(srv.URL).ExecStream(t.Context(), "x", &api.ExecRequest{Command: "x"}, tc.onOutput)
			if res != nil {
				t.Errorf("ExecStream() result = %+v, want nil", res)
			}
			tc.check(t, err)
		})
	}
}

// TestExecStreamOfPlainResult covers a daemon that ignores Accept and
// answers the JSON result.
func TestExecStreamOfPlainResult(t *testing.T) {
	srv, _ := fakeDaemon(t, 200, http.Header{"Content-Type": {"application/json; charset=utf-8"}},
		`{"stdout":"\ufffdEL","stdout_base64":"f0VM","stderr":"warn\n","exit_code":1,"duration_ms":3,"timed_out":false,"truncated":true,"shell_restarted":false,"oom_killed":false}`)
	var outs []output
	res, err := New(srv.URL).ExecStream(t.Context(), "x", &api.ExecRequest{Command: "x"}, collect(&outs))
	if err != nil {
		t.Fatalf("ExecStream() error: %v", err)
	}
	if diff := cmp.Diff(&api.ExecResult{ExitCode: 1, DurationMs: 3, Truncated: true}, res); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]output{{"stdout", "\x7fEL"}, {"stderr", "warn\n"}}, outs); diff != "" {
		t.Errorf("output mismatch (-want +got):\n%s", diff)
	}
}

func TestExecStreamContextCancel(t *testing.T) {
	checkGoroutines(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: stdout\ndata: {\"text\":\"a\"}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	_, err := New(srv.URL).ExecStream(ctx, "x", &api.ExecRequest{Command: "sleep 100"}, func(string, []byte) error {
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ExecStream() after cancel = %v, want context.Canceled", err)
	}
}

func int64p(v int64) *int64 { return &v }

func chunk(t *testing.T, c api.OutputChunk) string {
	t.Helper()
	return mustJSON(t, c)
}

func TestProcessOutput(t *testing.T) {
	checkGoroutines(t)
	srv, got := sseServer(t, nil,
		"retry: 1000\n\n",
		"event: output\nid: 13\ndata: "+chunk(t, api.OutputChunk{Offset: int64p(10), Stream: "stdout", Text: "abc"})+"\n\n",
		"event: gap\ndata: {\"from\":13,\"to\":20}\n\n",
		"event: output\nid: 22\ndata: "+chunk(t, api.OutputChunk{Offset: int64p(20), Stream: "stderr", Base64: "/w8="})+"\n\n",
		": no offset in the next one: the id says where it ends\n",
		"event: output\nid: 25\ndata: "+chunk(t, api.OutputChunk{Stream: "stdout", Text: "xyz"})+"\n\n",
		"event: exit\ndata: {\"exit_code\":137,\"signal\":\"SIGKILL\"}\n\n",
		"event: output\ndata: {\"text\":\"after exit: never read\"}\n\n",
	)
	var events []ProcessEvent
	err := New(srv.URL).ProcessOutput(t.Context(), "demo", "p1", 10, true, func(ev ProcessEvent) error {
		events = append(events, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("ProcessOutput() error: %v", err)
	}
	want := []ProcessEvent{
		{Kind: ProcessEventOutput, Offset: 10, Next: 13, Stream: "stdout", Data: []byte("abc")},
		{Kind: ProcessEventGap, Offset: 13, Next: 20, Gap: &api.OutputGap{From: 13, To: 20}},
		{Kind: ProcessEventOutput, Offset: 20, Next: 22, Stream: "stderr", Data: []byte{0xff, 0x0f}},
		{Kind: ProcessEventOutput, Offset: 22, Next: 25, Stream: "stdout", Data: []byte("xyz")},
		{Kind: ProcessEventExit, Offset: 25, Next: 25, Exit: &api.ProcessExit{ExitCode: 137, Signal: "SIGKILL"}},
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("ProcessOutput() events mismatch (-want +got):\n%s", diff)
	}
	wantQuery := url.Values{"offset": {"10"}, "follow": {"true"}}
	if got.method != "GET" || got.path != "/v1/sessions/demo/processes/p1/output" || got.accept != "text/event-stream" || !cmp.Equal(wantQuery, got.query) {
		t.Errorf("request = %s %s?%v Accept %q, want GET /v1/sessions/demo/processes/p1/output?%v Accept text/event-stream",
			got.method, got.path, got.query, got.accept, wantQuery)
	}
}

func TestProcessOutputEnds(t *testing.T) {
	out := "event: output\ndata: " + `{"offset":0,"stream":"stdout","text":"a"}` + "\n\n"
	t.Run("without follow, at the output so far", func(t *testing.T) {
		srv, got := sseServer(t, nil, out)
		n := 0
		err := New(srv.URL).ProcessOutput(t.Context(), "demo", "p1", 0, false, func(ProcessEvent) error { n++; return nil })
		if err != nil || n != 1 {
			t.Errorf("ProcessOutput() = %v after %d events, want nil after 1", err, n)
		}
		if got.query.Get("follow") != "false" {
			t.Errorf("follow = %q, want false", got.query.Get("follow"))
		}
	})
	t.Run("with follow, cut off before exit", func(t *testing.T) {
		srv, _ := sseServer(t, nil, out)
		err := New(srv.URL).ProcessOutput(t.Context(), "demo", "p1", 0, true, nil)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("ProcessOutput() = %v, want io.ErrUnexpectedEOF", err)
		}
	})
	t.Run("onEvent fails", func(t *testing.T) {
		srv, _ := sseServer(t, nil, out)
		errStop := errors.New("stop")
		if err := New(srv.URL).ProcessOutput(t.Context(), "demo", "p1", 0, true, func(ProcessEvent) error { return errStop }); err != errStop {
			t.Errorf("ProcessOutput() = %v, want onEvent's error", err)
		}
	})
	t.Run("unknown process", func(t *testing.T) {
		srv, _ := fakeDaemon(t, 404, http.Header{"Content-Type": {"application/json"}}, `{"error":{"code":"not_found","message":"no process p9"}}`)
		if err := New(srv.URL).ProcessOutput(t.Context(), "demo", "p9", 0, false, nil); !IsNotFound(err) {
			t.Errorf("ProcessOutput() = %v, want not_found", err)
		}
	})
}

func TestReadProcessOutput(t *testing.T) {
	srv, got := fakeDaemon(t, 200, http.Header{"Content-Type": {"application/octet-stream"}, "Warren-Output-Offset": {"4096"}}, "\x00raw")
	rc, start, err := New(srv.URL).ReadProcessOutput(t.Context(), "demo", "p 1", 100, true)
	if err != nil {
		t.Fatalf("ReadProcessOutput() error: %v", err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "\x00raw" || start != 4096 {
		t.Errorf("ReadProcessOutput() = %q, %v, start %d; want %q from 4096", b, err, start, "\x00raw")
	}
	wantQuery := url.Values{"offset": {"100"}, "follow": {"true"}}
	if got.path != "/v1/sessions/demo/processes/p%201/output" || got.accept != "application/octet-stream" || !cmp.Equal(wantQuery, got.query) {
		t.Errorf("request = %s?%v Accept %q", got.path, got.query, got.accept)
	}

	// Without the header the bytes start where they were asked for.
	srv, _ = fakeDaemon(t, 200, nil, "x")
	rc, start, err = New(srv.URL).ReadProcessOutput(t.Context(), "demo", "p1", 7, false)
	if err != nil || start != 7 {
		t.Errorf("ReadProcessOutput() without header: start %d, %v; want 7", start, err)
	}
	if rc != nil {
		rc.Close()
	}
	srv, _ = fakeDaemon(t, 200, http.Header{"Warren-Output-Offset": {"soon"}}, "x")
	if _, _, err := New(srv.URL).ReadProcessOutput(t.Context(), "demo", "p1", 0, false); err == nil {
		t.Errorf("ReadProcessOutput() with a bad header: no error")
	}
}

func TestProcessCalls(t *testing.T) {
	code := 0
	ended := t0.Add(time.Minute)
	proc := api.Process{ID: "p1", Command: "sleep 1", State: "exited", Pid: 42, ExitCode: &code,
		StartedAt: t0, EndedAt: &ended, OutputBytes: 10, OutputStart: 0}
	tests := []struct {
		name       string
		call       func(context.Context, *Client) (any, error)
		wantMethod string
		wantPath   string
		wantQuery  url.Values
		wantCT     string
		wantBody   string
		status     int
		respBody   string
		want       any
	}{
		{
			name: "StartProcess",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.StartProcess(ctx, "demo", &api.StartProcessRequest{Command: "sleep 1", TTY: true, Cols: 100, Rows: 30, Stdin: true})
			},
			wantMethod: "POST", wantPath: "/v1/sessions/demo/processes", wantCT: "application/json",
			wantBody: `{"command":"sleep 1","tty":true,"cols":100,"rows":30,"stdin":true}`,
			status:   201, respBody: mustJSON(t, proc), want: &proc,
		},
		{
			name:       "ListProcesses",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.ListProcesses(ctx, "demo") },
			wantMethod: "GET", wantPath: "/v1/sessions/demo/processes",
			status: 200, respBody: mustJSON(t, api.ProcessList{Processes: []api.Process{proc}}), want: []api.Process{proc},
		},
		{
			name:       "GetProcess escapes the id",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.GetProcess(ctx, "demo", "p/1") },
			wantMethod: "GET", wantPath: "/v1/sessions/demo/processes/p%2F1",
			status: 200, respBody: mustJSON(t, proc), want: &proc,
		},
		{
			name: "SignalProcess",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.SignalProcess(ctx, "demo", "p1", "TERM")
			},
			wantMethod: "POST", wantPath: "/v1/sessions/demo/processes/p1/signal", wantCT: "application/json",
			wantBody: `{"signal":"TERM"}`, status: 204,
		},
		{
			name: "ResizeProcess",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.ResizeProcess(ctx, "demo", "p1", 120, 40)
			},
			wantMethod: "POST", wantPath: "/v1/sessions/demo/processes/p1/resize", wantCT: "application/json",
			wantBody: `{"cols":120,"rows":40}`, status: 204,
		},
		{
			name:       "KillProcess",
			call:       func(ctx context.Context, c *Client) (any, error) { return nil, c.KillProcess(ctx, "demo", "p1") },
			wantMethod: "DELETE", wantPath: "/v1/sessions/demo/processes/p1", status: 204,
		},
		{
			name: "WriteStdin with eof",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.WriteStdin(ctx, "demo", "p1", strings.NewReader("\x00in\n"), true)
			},
			wantMethod: "POST", wantPath: "/v1/sessions/demo/processes/p1/stdin", wantQuery: url.Values{"eof": {"true"}},
			wantCT: "application/octet-stream", wantBody: "\x00in\n",
			status: 200, respBody: `{"written":4}`, want: int64(4),
		},
		{
			name: "WriteStdin",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.WriteStdin(ctx, "demo", "p1", strings.NewReader("x"), false)
			},
			wantMethod: "POST", wantPath: "/v1/sessions/demo/processes/p1/stdin",
			wantCT: "application/octet-stream", wantBody: "x",
			status: 200, respBody: `{"written":1}`, want: int64(1),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, got := fakeDaemon(t, tc.status, http.Header{"Content-Type": {"application/json"}}, tc.respBody)
			res, err := tc.call(t.Context(), New(srv.URL, WithToken("s3cret")))
			if err != nil {
				t.Fatalf("%s: unexpected error: %v", tc.name, err)
			}
			if diff := cmp.Diff(tc.want, res); diff != "" {
				t.Errorf("%s result mismatch (-want +got):\n%s", tc.name, diff)
			}
			wantQuery := tc.wantQuery
			if wantQuery == nil {
				wantQuery = url.Values{}
			}
			if got.method != tc.wantMethod || got.path != tc.wantPath || !cmp.Equal(wantQuery, got.query) {
				t.Errorf("request = %s %s?%v, want %s %s?%v", got.method, got.path, got.query, tc.wantMethod, tc.wantPath, wantQuery)
			}
			if got.contentType != tc.wantCT || got.auth != "Bearer s3cret" {
				t.Errorf("Content-Type, Authorization = %q, %q; want %q, Bearer s3cret", got.contentType, got.auth, tc.wantCT)
			}
			if tc.wantCT == "application/json" {
				if !jsonEqual(t, tc.wantBody, got.body) {
					t.Errorf("request body = %s, want %s", got.body, tc.wantBody)
				}
			} else if string(got.body) != tc.wantBody {
				t.Errorf("request body = %q, want %q", got.body, tc.wantBody)
			}
		})
	}
}

func jsonEqual(t *testing.T, want string, got []byte) bool {
	t.Helper()
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		return false
	}
	return cmp.Equal(w, g)
}

func TestProcessLimit(t *testing.T) {
	srv, _ := fakeDaemon(t, 429, http.Header{"Content-Type": {"application/json"}},
		`{"error":{"code":"resource_exhausted","message":"the session holds its maximum of 64 processes"}}`)
	_, err := New(srv.URL).StartProcess(t.Context(), "demo", &api.StartProcessRequest{Argv: []string{"true"}})
	if Code(err) != "resource_exhausted" {
		t.Errorf("StartProcess() = %v, want resource_exhausted", err)
	}
}

func TestStatusOfCode(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 409, 413, 429, 503, 500} {
		if got := statusOfCode(codeOfStatus(status)); got != status {
			t.Errorf("statusOfCode(codeOfStatus(%d)) = %d", status, got)
		}
	}
	if got := statusOfCode("something_new"); got != 500 {
		t.Errorf("statusOfCode(something_new) = %d, want 500", got)
	}
}

func ExampleClient_ExecStream() {
	c := New("http://127.0.0.1:7433")
	res, err := c.ExecStream(context.Background(), "demo", &api.ExecRequest{Command: "make test"},
		func(stream string, p []byte) error {
			fmt.Printf("%s: %q\n", stream, p)
			return nil
		})
	if err != nil {
		return
	}
	fmt.Println("exit code", res.ExitCode)
}
