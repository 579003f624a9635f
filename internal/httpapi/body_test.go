package httpapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
)

// bodyServer is the API on a real listener with a short body idle
// timeout. Its handlers that decode a body fail before they reach the
// (absent) session manager.
func bodyServer(t *testing.T, idle time.Duration) string {
	srv := httptest.NewServer(New(Config{BodyIdleTimeout: idle}).Handler())
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestBodyStalls: a client that sends its headers and then nothing, or
// stops in the middle of its body, is answered 400 and let go after the
// idle timeout, not held for ever.
func TestBodyStalls(t *testing.T) {
	const idle = 300 * time.Millisecond
	addr := bodyServer(t, idle)
	for _, sent := range []string{"", `{"image":`} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		fmt.Fprintf(c, "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n%s", sent)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("body %q then nothing: no answer: %v", sent, err)
		}
		var e api.Error
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		took := time.Since(start)
		if resp.StatusCode != 400 || e.Error.Code != "invalid_argument" || !strings.Contains(e.Error.Message, "stalled") {
			t.Errorf("body %q then nothing: %d %+v", sent, resp.StatusCode, e)
		}
		if took < idle || took > idle+2*time.Second {
			t.Errorf("body %q then nothing was answered after %v; want about %v", sent, took, idle)
		}
	}
}

// TestSlowBodyNotCut: the timeout is per read, not per body: a body that
// keeps coming, slower than the idle timeout in all, is read to its end.
func TestSlowBodyNotCut(t *testing.T) {
	const idle = 300 * time.Millisecond
	addr := bodyServer(t, idle)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"no_such_field":"` + strings.Repeat("a", 8) + `"}`
	fmt.Fprintf(c, "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))
	for i := range len(body) {
		io.WriteString(c, body[i:i+1])
		time.Sleep(idle / 4) // 7 idle periods in all
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	var e api.Error
	json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(e.Error.Message, "no_such_field") {
		t.Errorf("a slow but steady body: %d %+v; want the decoder's word on the unknown field", resp.StatusCode, e)
	}
}

// TestUnreadBodyStalls: a handler that answers without reading the body
// (here: no such route) is not held up by a body that never comes, which
// net/http would otherwise wait for before it sends the answer.
func TestUnreadBodyStalls(t *testing.T) {
	const idle = 300 * time.Millisecond
	addr := bodyServer(t, idle)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/no-such-thing HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || time.Since(start) > idle+2*time.Second {
		t.Errorf("unknown route with a body that never comes: %d after %v", resp.StatusCode, time.Since(start))
	}
}
