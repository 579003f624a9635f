package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/warrenhq/warren/api"
	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/api/gen/warren/v1/warrenv1connect"
	"github.com/warrenhq/warren/api/gen/warren/v1/warrenv1grpc"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// mcpCall is the body of an MCP tools/call request.
func mcpCall(tool string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
}

// mcpHeaders are what a Streamable HTTP client sends, plus cred.
func mcpHeaders(cred http.Header) http.Header {
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	for k, v := range cred {
		h[k] = v
	}
	return h
}

// TestRefusalsAuditedAlike: a refused attempt to change something is on
// record the same way whichever transport it came by (REST, Connect,
// gRPC, MCP): the op, no tenant and the class "unauthenticated", with the
// status REST answers for it. A refused read is on record on none. The
// refusal tells the client, in WWW-Authenticate, why its key failed.
func TestRefusalsAuditedAlike(t *testing.T) {
	h := daemontest.Start(t, nil)
	ctx := t.Context()
	key := newKey(t, h, api.CreateKeyRequest{Tenant: "ra"})
	wrong := flipLast(key.Secret)

	// REST.
	r := as(t, h, bearer(wrong), "POST", "/v1/sessions", `{}`)
	if r.status != http.StatusUnauthorized || r.err.Error.Code != "unauthenticated" {
		t.Errorf("REST create with a wrong key: %d %s", r.status, r.body)
	}
	as(t, h, bearer(wrong), "GET", "/v1/sessions", "")

	// Connect (JSON, HTTP/1.1) and gRPC (h2c).
	cc := warrenv1connect.NewSessionServiceClient(http.DefaultClient, h.URL, connect.WithProtoJSON(),
		connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("Authorization", "Bearer "+wrong)
				return next(ctx, req)
			}
		})))
	_, err := cc.DeleteSession(ctx, connect.NewRequest(&warrenv1.DeleteSessionRequest{SessionId: "x"}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeUnauthenticated || !strings.Contains(ce.Meta().Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("Connect DeleteSession with a wrong key: %v, want unauthenticated with an invalid_token challenge", err)
	}
	gc := warrenv1grpc.NewSessionServiceClient(dialGRPC(t, h, wrong))
	if _, err := gc.CreateSession(ctx, &warrenv1.CreateSessionRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("gRPC CreateSession with a wrong key: %v", err)
	}
	gc.ListSessions(ctx, &warrenv1.ListSessionsRequest{})

	// MCP: a tool that changes something, and one that only reads.
	r = as(t, h, mcpHeaders(bearer(wrong)), "POST", "/mcp", mcpCall("exec"))
	if r.status != http.StatusUnauthorized || r.err.Error.Code != "unauthenticated" {
		t.Errorf("MCP exec with a wrong key: %d %s", r.status, r.body)
	}
	for _, hdr := range []http.Header{r.header} {
		if got := hdr.Get("WWW-Authenticate"); !strings.Contains(got, `error="invalid_token"`) || !strings.Contains(got, `error_description="invalid API key"`) {
			t.Errorf("MCP refusal's WWW-Authenticate = %q, want invalid_token with warren's message", got)
		}
	}
	as(t, h, mcpHeaders(bearer(wrong)), "POST", "/mcp", mcpCall("list_sessions"))

	recs, err := h.Client.QueryAudit(ctx, client.AuditQuery{Since: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, rec := range recs {
		if rec.Outcome != "unauthenticated" {
			continue
		}
		if rec.Tenant != "" || rec.KeyID != "" || rec.Status != http.StatusUnauthorized {
			t.Errorf("refused record %+v: want no tenant or key and status 401", rec)
		}
		got[rec.Op]++
	}
	want := map[string]int{"POST /v1/sessions": 1, "grpc DeleteSession": 1, "grpc CreateSession": 1, "mcp exec": 1}
	for op, n := range want {
		if got[op] != n {
			t.Errorf("refused %s on record %d times, want %d (all: %v)", op, got[op], n, got)
		}
	}
	for _, op := range []string{"GET /v1/sessions", "grpc ListSessions", "mcp list_sessions"} {
		if got[op] != 0 {
			t.Errorf("a refused read (%s) is on record: %v", op, got)
		}
	}
}

// TestAuthChallenge: RFC 6750's answers reach the client on REST and MCP:
// no credentials, the bare challenge; a wrong key, invalid_token with
// warren's own message (which MCP hosts show instead of an OAuth error).
func TestAuthChallenge(t *testing.T) {
	h := daemontest.Start(t, nil)
	for _, path := range []string{"/v1/sessions", "/mcp"} {
		body := `{}`
		if path == "/mcp" {
			body = mcpCall("list_sessions")
		}
		r := as(t, h, mcpHeaders(nil), "POST", path, body)
		if got := r.header.Get("WWW-Authenticate"); r.status != http.StatusUnauthorized || got != `Bearer realm="warren"` {
			t.Errorf("POST %s without a key: %d, WWW-Authenticate %q, want 401 and the bare challenge", path, r.status, got)
		}
		r = as(t, h, mcpHeaders(bearer("wrn_aaaaaaaaaaaa_"+strings.Repeat("b", 32))), "POST", path, body)
		want := `Bearer realm="warren", error="invalid_token", error_description="invalid API key"`
		if got := r.header.Get("WWW-Authenticate"); r.status != http.StatusUnauthorized || got != want {
			t.Errorf("POST %s with a wrong key: %d, WWW-Authenticate %q, want %q", path, r.status, got, want)
		}
	}
}

// TestClientGoneIsCanceled: a REST client that hangs up during an exec is
// logged and audited as canceled, not as an internal error with status
// 500.
func TestClientGoneIsCanceled(t *testing.T) {
	logs := &syncBuffer{}
	h := daemontest.StartWithLog(t, nil, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if r := as(t, h, bearer(h.AdminKey), "POST", "/v1/sessions", `{"id":"gone"}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", h.URL+"/v1/sessions/gone/exec", strings.NewReader(`{"command":"sleep 30"}`))
	req.Header.Set("Authorization", "Bearer "+h.AdminKey)
	req.Header.Set("X-Request-ID", "hangs-up")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("exec answered %d before the client hung up", resp.StatusCode)
	}
	l := logs.waitLine(t, "request", map[string]any{"request_id": "hangs-up"})
	if l["status"] != float64(499) || l["canceled"] != true {
		t.Errorf("access line of a client that hung up: %v, want status 499 and canceled", l)
	}
	for _, l := range logs.lines() {
		if l["msg"] == "internal error" {
			t.Errorf("a client that hung up is logged as an internal error: %v", l)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		recs, err := h.Client.QueryAudit(t.Context(), client.AuditQuery{Since: "1h"})
		if err != nil {
			t.Fatal(err)
		}
		var exec *api.AuditRecord
		for i := range recs {
			if recs[i].Op == "POST /v1/sessions/{id}/exec" {
				exec = &recs[i]
			}
		}
		if exec != nil {
			if exec.Outcome != "canceled" || exec.Session != "gone" {
				t.Errorf("audit record of the exec: %+v, want outcome canceled", exec)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit record of the exec: %+v", recs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The session's shell is free again for the next command.
	if r := as(t, h, bearer(h.AdminKey), "POST", "/v1/sessions/gone/exec", `{"command":"echo ok"}`); r.status != http.StatusOK || !strings.Contains(string(r.body), `"ok\n"`) {
		t.Errorf("exec after a hang-up: %d %s", r.status, r.body)
	}
	as(t, h, bearer(h.AdminKey), "DELETE", "/v1/sessions/gone", "")
}

// TestGRPCHealthAndUnknown: grpc.health.v1 answers a stock gRPC client
// without a key (SERVING; NOT_FOUND for a service warren does not serve;
// Watch is Unimplemented), and Connect's JSON form too; a procedure
// nobody serves is Unimplemented in the caller's protocol, not REST's 404.
func TestGRPCHealthAndUnknown(t *testing.T) {
	h := daemontest.Start(t, nil)
	ctx := t.Context()
	conn := dialGRPC(t, h, "")
	hc := healthpb.NewHealthClient(conn)
	for _, svc := range []string{"", "warren.v1.SessionService"} {
		res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) = %v, %v; want SERVING", svc, res, err)
		}
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope.Service"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check(nope.Service): %v, want NotFound", err)
	}
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("Watch: %v, want Unimplemented", err)
	}

	r := as(t, h, http.Header{"Content-Type": {"application/json"}}, "POST", "/grpc.health.v1.Health/Check", `{}`)
	var body map[string]string
	if json.Unmarshal(r.body, &body); r.status != http.StatusOK || body["status"] != "SERVING" {
		t.Errorf("Connect JSON health check: %d %s", r.status, r.body)
	}

	// An unknown procedure, over gRPC and over gRPC-Web.
	err = conn.Invoke(ctx, "/warren.v1.NoSuchService/Call", &warrenv1.ListSessionsRequest{}, &warrenv1.ListSessionsResponse{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("gRPC call of an unknown procedure: %v, want Unimplemented", err)
	}
	req, _ := http.NewRequest("POST", h.URL+"/warren.v1.NoSuchService/Call", strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Header.Set("Content-Type", "application/grpc-web+proto")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(resp.Header.Get("Grpc-Status")+string(b), "12") || strings.Contains(string(b), "not_found") {
		t.Errorf("gRPC-Web call of an unknown procedure: %d %v %q, want grpc-status 12", resp.StatusCode, resp.Header, b)
	}
	// REST's own 404 is unchanged.
	if r := as(t, h, bearer(h.AdminKey), "POST", "/warren.v1.NoSuchService/Call", `{}`); r.status != http.StatusNotFound || r.err.Error.Code != "not_found" {
		t.Errorf("a JSON POST to an unknown path: %d %s, want REST's 404", r.status, r.body)
	}
}

// TestOAuthDiscoveryAnswered: the OAuth steps an MCP host tries after a
// 401 (metadata, then registration at /register) get a 404 whose message
// says how to authenticate: the host shows that body to its user.
func TestOAuthDiscoveryAnswered(t *testing.T) {
	h := daemontest.Start(t, nil)
	for _, c := range []struct{ method, path string }{
		{"GET", "/.well-known/oauth-protected-resource/mcp"},
		{"GET", "/.well-known/oauth-authorization-server"},
		{"POST", "/register"},
	} {
		r := as(t, h, http.Header{"Content-Type": {"application/json"}}, c.method, c.path, `{}`)
		if r.status != http.StatusNotFound || r.err.Error.Code != "not_found" || !strings.Contains(r.err.Error.Message, "'Authorization: Bearer KEY'") || strings.ContainsAny(string(r.body), `<>\`) {
			t.Errorf("%s %s: %d %s, want 404 saying how to authenticate", c.method, c.path, r.status, r.body)
		}
	}
	if r := as(t, h, nil, "GET", "/nope", ""); r.status != http.StatusNotFound || strings.Contains(r.err.Error.Message, "OAuth") {
		t.Errorf("GET /nope: %d %s, want the plain 404", r.status, r.body)
	}
}
