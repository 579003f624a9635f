package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestPortForward forwards a local port through a fake daemon whose
// port-forward WebSocket echoes, and checks what the daemon was asked.
func TestPortForward(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		switch r.URL.Path {
		case "/v1/sessions/demo":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"id":"demo","state":"running"}`))
		case "/v1/sessions/demo/port-forward/8000":
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			nc := websocket.NetConn(context.Background(), c, websocket.MessageBinary)
			io.Copy(nc, nc)
			nc.Close()
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			w.Write([]byte(`{"error":{"code":"unavailable","message":"nothing listens on port 8001 inside the sandbox"}}`))
		}
	}))
	defer srv.Close()

	// A free local port.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	local := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(local)

	ctx, cancel := context.WithCancel(t.Context())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	env := map[string]string{"WARREN_ADDR": srv.URL, "WARREN_TOKEN": "env-token"}
	go func() {
		done <- run(ctx, []string{"port-forward", "demo", port + ":8000", "0:8001"}, &app{
			stdin: strings.NewReader(""), stdout: &out, stderr: &errOut,
			getenv: func(k string) string { return env[k] }, now: time.Now,
		})
	}()
	var c net.Conn
	for deadline := time.Now().Add(5 * time.Second); ; {
		if c, err = net.Dial("tcp", local); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("port-forward does not listen on %s: %v (stderr %q)", local, err, errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	msg := bytes.Repeat([]byte("ping "), 10000)
	go c.Write(msg)
	got := make([]byte, len(msg))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo through port-forward: %v", err)
	}
	// The second mapping's remote port has nothing: the connection is
	// closed and stderr says why.
	var second string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasSuffix(line, "-> 8001") {
			second = strings.Fields(line)[2]
		}
	}
	if second == "" {
		t.Fatalf("stdout %q names no listener for 8001", out.String())
	}
	c2, err := net.Dial("tcp", second)
	if err != nil {
		t.Fatal(err)
	}
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c2.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("a forward to nothing read %d, %v; want EOF", n, err)
	}
	c2.Close()

	cancel() // an interrupt ends it, with the connection in flight
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code %d, stderr %q", code, errOut.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("port-forward did not end after its context was canceled")
	}
	c.Close()
	if !strings.Contains(errOut.String(), "nothing listens on port 8001") {
		t.Errorf("stderr %q does not say why the forward to 8001 failed", errOut.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) < 2 || paths[0] != "GET /v1/sessions/demo Bearer env-token" || paths[1] != "GET /v1/sessions/demo/port-forward/8000 Bearer env-token" {
		t.Errorf("the daemon was asked %q", paths)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
