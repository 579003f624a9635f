package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

type sseEvent struct {
	name, id string
	data     []byte
	at       time.Duration
}

// readSSE posts or gets url and returns the events as they arrive on ch.
func streamSSE(t *testing.T, h *daemontest.Harness, ctx context.Context, method, url, body string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	req.Header.Set("Accept", "text/event-stream")
	start := time.Now()
	resp, err := h.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	ch := make(chan sseEvent) // unbuffered: a slow reader here is slow on the wire
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					ev.at = time.Since(start)
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = []byte(strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	return ch, resp
}

func chunkBytes(t *testing.T, data []byte) (api.OutputChunk, []byte) {
	t.Helper()
	var c api.OutputChunk
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("decode chunk %s: %v", data, err)
	}
	if c.Base64 != "" {
		b, err := base64.StdEncoding.DecodeString(c.Base64)
		if err != nil {
			t.Fatal(err)
		}
		return c, b
	}
	return c, []byte(c.Text)
}

func TestStreamingExec(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	body := `{"command":"echo one; sleep 0.6; echo two >&2; printf '\\303'; sleep 0.2; printf '\\251\\n'; (exit 3)"}`
	events, resp := streamSSE(t, h, bg, "POST", h.URL+"/v1/sessions/s/exec", body)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	var got []string
	var exit api.ExecResult
	var first time.Duration
	for ev := range events {
		switch ev.name {
		case "stdout", "stderr":
			_, b := chunkBytes(t, ev.data)
			if first == 0 {
				first = ev.at
			}
			got = append(got, ev.name+":"+string(b))
		case "exit":
			json.Unmarshal(ev.data, &exit)
			if ev.at < 700*time.Millisecond {
				t.Errorf("exit came after %v, before the command could end", ev.at)
			}
		default:
			t.Errorf("unexpected event %s %s", ev.name, ev.data)
		}
	}
	// The first chunk arrives while the command still sleeps.
	if first == 0 || first > 500*time.Millisecond {
		t.Errorf("first output after %v; want it long before the command ends", first)
	}
	want := []string{"stdout:one\n", "stderr:two\n", "stdout:é\n"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events = %q, want %q (a split UTF-8 character arrives whole)", got, want)
	}
	if exit.ExitCode != 3 || exit.Stdout != "" {
		t.Errorf("exit event = %+v", exit)
	}
	// State carries over as with plain exec.
	res, _ := h.Client.Exec(bg, "s", &api.ExecRequest{Command: "echo $?"})
	if res.Stdout != "3\n" {
		t.Errorf("after a streamed exec: %q", res.Stdout)
	}
	// An error before the stream starts is the ordinary envelope.
	status, _, env, _ := raw(t, h, "POST", "/v1/sessions/nope/exec", `{"command":"true"}`)
	if status != 404 || env.Error.Code != "not_found" {
		t.Errorf("streamed exec of an unknown session = %d %+v", status, env)
	}
}

func startProc(t *testing.T, h *daemontest.Harness, sid string, req api.StartProcessRequest) api.Process {
	t.Helper()
	b, _ := json.Marshal(req)
	status, _, env, body := raw(t, h, "POST", "/v1/sessions/"+sid+"/processes", string(b))
	if status != 201 {
		t.Fatalf("start process: %d %+v", status, env)
	}
	var p api.Process
	json.Unmarshal([]byte(body), &p)
	return p
}

func getProc(t *testing.T, h *daemontest.Harness, sid, pid string) api.Process {
	t.Helper()
	_, _, _, body := raw(t, h, "GET", "/v1/sessions/"+sid+"/processes/"+pid, "")
	var p api.Process
	json.Unmarshal([]byte(body), &p)
	return p
}

// collect reads a process's output events until the stream ends.
func collect(t *testing.T, h *daemontest.Harness, sid, pid string, offset int64, follow bool, stopAt int) (out []byte, gaps []api.OutputGap, exit *api.ProcessExit, lastID string) {
	t.Helper()
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	url := fmt.Sprintf("%s/v1/sessions/%s/processes/%s/output?offset=%d&follow=%v", h.URL, sid, pid, offset, follow)
	events, _ := streamSSE(t, h, ctx, "GET", url, "")
	expect := offset
	for ev := range events {
		switch ev.name {
		case "output":
			c, b := chunkBytes(t, ev.data)
			if c.Offset == nil || *c.Offset != expect {
				t.Errorf("chunk at offset %d, want %d", deref(c.Offset), expect)
			}
			expect += int64(len(b))
			out = append(out, b...)
			lastID = ev.id
			if ev.id != strconv.FormatInt(expect, 10) {
				t.Errorf("event id %s, want %d", ev.id, expect)
			}
			if stopAt > 0 && len(out) >= stopAt {
				cancel() // a dropped connection
				for range events {
				}
				return out, gaps, exit, lastID
			}
		case "gap":
			var g api.OutputGap
			json.Unmarshal(ev.data, &g)
			gaps = append(gaps, g)
			expect = g.To
		case "exit":
			exit = &api.ProcessExit{}
			json.Unmarshal(ev.data, exit)
		}
	}
	return out, gaps, exit, lastID
}

func TestProcesses(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	h.Client.Exec(bg, "s", &api.ExecRequest{Command: "cd /tmp && export FROM_SHELL=yes"})
	start := time.Now()
	p := startProc(t, h, "s", api.StartProcessRequest{Command: "pwd; echo $FROM_SHELL; for i in $(seq 1 30); do echo line$i; sleep 0.02; done; echo err >&2; exit 4"})
	if time.Since(start) > time.Second || p.State != "running" || p.ID == "" {
		t.Fatalf("start returned %+v after %v; want a running process at once", p, time.Since(start))
	}
	// A client that drops out and comes back with the last offset it saw
	// misses nothing.
	part, _, _, lastID := collect(t, h, "s", p.ID, 0, true, 40)
	off, _ := strconv.ParseInt(lastID, 10, 64)
	rest, gaps, exit, _ := collect(t, h, "s", p.ID, off, true, 0)
	var want bytes.Buffer
	want.WriteString("/tmp\nyes\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	want.WriteString("err\n")
	if got := string(part) + string(rest); got != want.String() || len(gaps) != 0 {
		t.Errorf("output across a reconnect = %q (gaps %v), want %q", got, gaps, want.String())
	}
	if exit == nil || exit.ExitCode != 4 {
		t.Errorf("exit event = %+v, want exit code 4", exit)
	}
	got := getProc(t, h, "s", p.ID)
	if got.State != "exited" || got.ExitCode == nil || *got.ExitCode != 4 || got.EndedAt == nil || got.OutputBytes != int64(want.Len()) {
		t.Errorf("process after exit = %+v", got)
	}
	// Without follow, the available output and the exit.
	again, _, exit2, _ := collect(t, h, "s", p.ID, 0, false, 0)
	if string(again) != want.String() || exit2 == nil {
		t.Errorf("re-read from 0 = %q, exit %+v", again, exit2)
	}
	// Raw mode from an offset.
	req, _ := http.NewRequest("GET", h.URL+"/v1/sessions/s/processes/"+p.ID+"/output?offset=10", nil)
	req.Header.Set("Accept", "application/octet-stream")
	resp, err := h.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rawOut, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(rawOut) != want.String()[10:] || resp.Header.Get("Warren-Output-Offset") != "10" {
		t.Errorf("raw output from 10 = %q, offset header %q", rawOut, resp.Header.Get("Warren-Output-Offset"))
	}

	// stdin, signals, kill.
	cat := startProc(t, h, "s", api.StartProcessRequest{Argv: []string{"cat"}, Stdin: true})
	status, _, _, body := raw(t, h, "POST", "/v1/sessions/s/processes/"+cat.ID+"/stdin?eof=true", "hello stdin")
	if status != 200 || !strings.Contains(body, `"written":11`) {
		t.Errorf("stdin: %d %s", status, body)
	}
	out, _, ex, _ := collect(t, h, "s", cat.ID, 0, true, 0)
	if string(out) != "hello stdin" || ex == nil || ex.ExitCode != 0 {
		t.Errorf("cat of stdin = %q, exit %+v", out, ex)
	}
	sl := startProc(t, h, "s", api.StartProcessRequest{Command: "sleep 100"})
	if status, _, env, _ := raw(t, h, "POST", "/v1/sessions/s/processes/"+sl.ID+"/signal", `{"signal":"TERM"}`); status != 204 {
		t.Errorf("signal: %d %+v", status, env)
	}
	_, _, ex, _ = collect(t, h, "s", sl.ID, 0, true, 0)
	if ex == nil || ex.Signal != "SIGTERM" {
		t.Errorf("after SIGTERM: exit %+v", ex)
	}
	lo := startProc(t, h, "s", api.StartProcessRequest{Command: "sleep 100 & sleep 100"})
	if status, _, env, _ := raw(t, h, "DELETE", "/v1/sessions/s/processes/"+lo.ID, ""); status != 204 {
		t.Errorf("kill: %d %+v", status, env)
	}
	if status, _, _, _ := raw(t, h, "GET", "/v1/sessions/s/processes/"+lo.ID, ""); status != 404 {
		t.Errorf("a killed process still answers: %d", status)
	}
	res, _ := h.Client.Exec(bg, "s", &api.ExecRequest{Command: "pgrep -c sleep || true"})
	if strings.TrimSpace(res.Stdout) != "0" {
		t.Errorf("sleeps left after kill: %q", res.Stdout)
	}
	// Bad input.
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/sessions/s/processes", `{}`},
		{"POST", "/v1/sessions/s/processes/" + cat.ID + "/signal", `{"signal":"NOPE"}`},
		{"GET", "/v1/sessions/s/processes/p999", ""},
		{"POST", "/v1/sessions/s/processes/" + cat.ID + "/resize", `{"cols":80,"rows":24}`},
		{"GET", "/v1/sessions/s/processes/" + cat.ID + "/output?offset=x", ""},
	} {
		status, _, env, _ := raw(t, h, tc.method, tc.path, tc.body)
		if status < 400 || status >= 500 || env.Error.Code == "" {
			t.Errorf("%s %s %s = %d %+v, want a 4xx envelope", tc.method, tc.path, tc.body, status, env)
		}
	}
	list, _ := rawList(t, h, "s")
	if len(list) != 3 {
		t.Errorf("list = %d processes, want 3 (the killed one is gone)", len(list))
	}
}

func rawList(t *testing.T, h *daemontest.Harness, sid string) ([]api.Process, error) {
	_, _, _, body := raw(t, h, "GET", "/v1/sessions/"+sid+"/processes", "")
	var l api.ProcessList
	err := json.Unmarshal([]byte(body), &l)
	return l.Processes, err
}

func TestProcessOutputBounded(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	// More than the kept MiB: reading from 0 later reports the gap.
	p := startProc(t, h, "s", api.StartProcessRequest{Command: "head -c 3000000 /dev/zero | tr '\\0' x"})
	_, _, _, _ = collect(t, h, "s", p.ID, 0, true, 0)
	out, gaps, exit, _ := collect(t, h, "s", p.ID, 0, false, 0)
	if len(gaps) != 1 || gaps[0].From != 0 || gaps[0].To != 3000000-(1<<20) || len(out) != 1<<20 || exit == nil {
		t.Errorf("re-read of 3 MB: %d bytes, gaps %+v, exit %v; want the last MiB and one gap", len(out), gaps, exit)
	}
	// A fast producer and a slow reader: the daemon's memory stays flat.
	before := rss(t)
	y := startProc(t, h, "s", api.StartProcessRequest{Command: "yes"})
	ctx, cancel := context.WithTimeout(bg, 2*time.Second)
	events, _ := streamSSE(t, h, ctx, "GET", h.URL+"/v1/sessions/s/processes/"+y.ID+"/output?follow=true", "")
	for range events {
		time.Sleep(20 * time.Millisecond) // a reader much slower than yes
	}
	cancel()
	if grew := rss(t) - before; grew > 64<<20 {
		t.Errorf("the daemon grew by %d MiB while yes ran into a slow reader", grew>>20)
	}
	raw(t, h, "DELETE", "/v1/sessions/s/processes/"+y.ID, "")
}

// rss is this process's resident memory: the daemon runs in it.
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}

// term reads a shell WebSocket until want shows up in the output.
func term(t *testing.T, ctx context.Context, c *websocket.Conn, want string) (string, *api.ShellMessage) {
	t.Helper()
	var screen strings.Builder
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for %q, read: %v; screen so far %q", want, err, screen.String())
		}
		if typ == websocket.MessageText {
			var m api.ShellMessage
			json.Unmarshal(data, &m)
			if m.Type == "exit" {
				return screen.String(), &m
			}
			continue
		}
		screen.Write(data)
		if want != "" && strings.Contains(screen.String(), want) {
			return screen.String(), nil
		}
	}
}

func TestShellWebSocket(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(h.URL, "http") + "/v1/sessions/s/shell?cols=100&rows=30"
	c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: h.Header()})
	if err != nil {
		t.Fatal(err)
	}
	typ, data, err := c.Read(ctx)
	var hello api.ShellMessage
	json.Unmarshal(data, &hello)
	if err != nil || typ != websocket.MessageText || hello.Type != "process" || hello.ID == "" {
		t.Fatalf("first message = %v %s %v", typ, data, err)
	}
	c.Write(ctx, websocket.MessageBinary, []byte("stty size; echo TERM=$TERM; tty\n"))
	screen, _ := term(t, ctx, c, "/dev/pts/")
	if !strings.Contains(screen, "30 100") || !strings.Contains(screen, "TERM=xterm-256color") {
		t.Errorf("screen = %q; want the size 30 100 and TERM", screen)
	}
	b, _ := json.Marshal(api.ShellMessage{Type: "resize", Cols: 120, Rows: 40})
	c.Write(ctx, websocket.MessageText, b)
	c.Write(ctx, websocket.MessageBinary, []byte("export KEEP=42; stty size\n"))
	if screen, _ := term(t, ctx, c, "40 120"); !strings.Contains(screen, "40 120") {
		t.Errorf("after resize: %q", screen)
	}
	// A dropped connection leaves the shell running; a new one attaches to
	// it with its state and recent screen.
	c.Close(websocket.StatusNormalClosure, "")
	c2, _, err := websocket.Dial(ctx, wsURL+"&process="+hello.ID, &websocket.DialOptions{HTTPHeader: h.Header()})
	if err != nil {
		t.Fatal(err)
	}
	c2.Read(ctx) // the process message
	c2.Write(ctx, websocket.MessageBinary, []byte("echo value=$KEEP\n"))
	if screen, _ := term(t, ctx, c2, "value=42"); !strings.Contains(screen, "value=42") {
		t.Errorf("reattached shell lost its state: %q", screen)
	}
	c2.Write(ctx, websocket.MessageBinary, []byte("exit 7\n"))
	_, m := term(t, ctx, c2, "")
	if m == nil || m.ExitCode == nil || *m.ExitCode != 7 {
		t.Errorf("exit message = %+v, want exit code 7", m)
	}
	if _, _, err := c2.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("after exit: %v, want a normal close", err)
	}
	// Attaching to a process that has no terminal is refused before the
	// upgrade, and so is a request that is no upgrade at all (which must not
	// leave a shell behind).
	p := startProc(t, h, "s", api.StartProcessRequest{Command: "sleep 5"})
	if _, _, err := websocket.Dial(ctx, wsURL+"&process="+p.ID, &websocket.DialOptions{HTTPHeader: h.Header()}); err == nil {
		t.Errorf("attach to a non-terminal process succeeded")
	}
	before, _ := rawList(t, h, "s")
	if status, _, env, _ := raw(t, h, "GET", "/v1/sessions/s/shell", ""); status != 400 || env.Error.Code != "invalid_argument" {
		t.Errorf("a plain GET of the shell = %d %+v", status, env)
	}
	if after, _ := rawList(t, h, "s"); len(after) != len(before) {
		t.Errorf("a plain GET of the shell started a process: %d -> %d", len(before), len(after))
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

// A process may run as another user of the image than its session's: root
// from a session of "sandbox" (what E2B's commands.run(cmd, {user: 'root'})
// needs), with root's HOME; the session's own user is untouched; an unknown
// user is the caller's mistake.
func TestProcessUser(t *testing.T) {
	h := daemontest.Start(t, nil)
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: "s", User: "sandbox"}); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, h, "s", api.StartProcessRequest{Command: "id -u; echo $HOME $USER; touch /etc/by-root && stat -c %u /etc/by-root", User: "root"})
	out, _, exit, _ := collect(t, h, "s", p.ID, 0, true, 0)
	if string(out) != "0\n/root root\n0\n" || exit == nil || exit.ExitCode != 0 {
		t.Errorf("as root: %q, exit %+v", out, exit)
	}
	p = startProc(t, h, "s", api.StartProcessRequest{Command: "id -un"})
	if out, _, _, _ := collect(t, h, "s", p.ID, 0, true, 0); string(out) != "sandbox\n" {
		t.Errorf("the session's own user after a root process: %q", out)
	}
	status, _, env, _ := raw(t, h, "POST", "/v1/sessions/s/processes", `{"command":"true","user":"nobody-here"}`)
	if status != 400 || env.Error.Code != "invalid_argument" {
		t.Errorf("unknown user: %d %+v", status, env)
	}
}
