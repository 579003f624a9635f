package edge

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// TestIdleBodies: a stalled body is cut after the idle time with
// invalid_argument, whatever the transport (here a plain handler, as
// MCP's), except a streaming RPC's, which may stay quiet.
func TestIdleBodies(t *testing.T) {
	const idle = 200 * time.Millisecond
	srv := httptest.NewServer(IdleBodies(idle, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s", errdefs.ClassOf(err))
		if err == nil {
			io.WriteString(w, " none")
		}
	})))
	defer srv.Close()
	for _, tc := range []struct {
		ct   string
		want string // "" for no answer within 2 s
	}{
		{"application/json", "invalid_argument"},
		{"application/grpc", ""},
		{"application/connect+proto", ""},
	} {
		c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: 10\r\n\r\nabc", tc.ct)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		got := ""
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			got = string(b)
		}
		if got != tc.want {
			t.Errorf("%s: a stalled body answered %q; want %q", tc.ct, got, tc.want)
		}
		c.Close()
	}
}
