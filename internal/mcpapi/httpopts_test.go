package mcpapi

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestHostAllowed(t *testing.T) {
	h := NewHTTPHandler(NewServer(&fakeBackend{}, Options{Log: slog.New(slog.DiscardHandler)}),
		HTTPOptions{AllowedHosts: []string{"Warren.Example.com", " proxy.internal "}}).(*httpHandler)
	open := NewHTTPHandler(NewServer(&fakeBackend{}, Options{}), HTTPOptions{AllowedHosts: []string{"*"}}).(*httpHandler)
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7433}
	public := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 7433}
	for _, tc := range []struct {
		local    net.Addr
		host     string
		want     bool
		wantOpen bool
	}{
		{loopback, "127.0.0.1:7433", true, true},
		{loopback, "localhost:7433", true, true},
		{loopback, "[::1]:7433", true, true},
		{loopback, "warren.example.com", true, true},
		{loopback, "WARREN.EXAMPLE.COM:443", true, true},
		{loopback, "proxy.internal:8080", true, true},
		{loopback, "evil.example.com", false, true},
		{loopback, "127.0.0.1.evil.example.com", false, true},
		{public, "evil.example.com", true, true}, // not a loopback connection: not checked
	} {
		r := httptest.NewRequest("POST", "/mcp", nil)
		r.Host = tc.host
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tc.local))
		if got := h.hostAllowed(r); got != tc.want {
			t.Errorf("hostAllowed(Host %q on %v) = %v, want %v", tc.host, tc.local, got, tc.want)
		}
		if got := open.hostAllowed(r); got != tc.wantOpen {
			t.Errorf("with \"*\": hostAllowed(Host %q on %v) = %v, want %v", tc.host, tc.local, got, tc.wantOpen)
		}
	}
}

func TestCallsCancel(t *testing.T) {
	c := newCalls()
	boundOf := func(ctx context.Context) context.Context { return ctx.Value(boundKey{}).(context.Context) }
	a, doneA := c.bind(context.Background(), "alice", "int64:7")
	if n := c.cancel("bob", "int64:7"); n != 0 || boundOf(a).Err() != nil {
		t.Errorf("another caller's cancel: %d calls, err %v; want it to reach nothing", n, boundOf(a).Err())
	}
	if n := c.cancel("alice", "string:7"); n != 0 || boundOf(a).Err() != nil {
		t.Errorf("a cancel of id \"7\" reached id 7")
	}
	b, doneB := c.bind(context.Background(), "alice", "int64:7")
	if n := c.cancel("alice", "int64:7"); n != 2 || boundOf(a).Err() != nil || boundOf(b).Err() != nil {
		t.Errorf("an ambiguous cancel: %d calls; want 2, and none cancelled", n)
	}
	doneB()
	if n := c.cancel("alice", "int64:7"); n != 1 || !errors.Is(context.Cause(boundOf(a)), errClientCancelled) {
		t.Errorf("cancel: %d calls, cause %v; want the one call cancelled by the client", n, context.Cause(boundOf(a)))
	}
	doneA()
	if len(c.m) != 0 {
		t.Errorf("calls left registered: %v", c.m)
	}
	// A tool's context ends with the call's bound context.
	ctx, done := c.bind(context.Background(), "alice", "int64:8")
	tctx, stop := callContext(ctx)
	defer stop()
	c.cancel("alice", "int64:8")
	<-tctx.Done()
	if !errors.Is(context.Cause(tctx), errClientCancelled) {
		t.Errorf("the tool's context ended with %v", context.Cause(tctx))
	}
	done()
}

func TestPeek(t *testing.T) {
	for _, tc := range []struct {
		body   string
		code   int64 // 0: no error
		method string
		batch  bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, 0, "tools/call", false},
		{` [{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 0, "", true},
		{`not json`, jsonrpc.CodeParseError, "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"`, jsonrpc.CodeParseError, "", false},
		{`[{"jsonrpc":"2.0"`, jsonrpc.CodeParseError, "", false},
		{``, jsonrpc.CodeParseError, "", false},
		{`{"id":1,"method":"ping"}`, jsonrpc.CodeInvalidRequest, "", false},
		{`"a string"`, jsonrpc.CodeInvalidRequest, "", false},
		{`{"jsonrpc":"2.0","method":7}`, jsonrpc.CodeInvalidRequest, "", false},
	} {
		m, err := peek([]byte(tc.body))
		var code int64
		if err != nil {
			code = err.(*jsonrpc.Error).Code
		}
		if code != tc.code || (err == nil && (m == nil) != tc.batch) || (m != nil && m.Method != tc.method) {
			t.Errorf("peek(%q) = %+v, %v; want code %d, method %q, batch %v", tc.body, m, err, tc.code, tc.method, tc.batch)
		}
	}
}
