package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/api"
	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/api/gen/warren/v1/warrenv1connect"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/network/nettest"
)

// TestNetworkRPC: the network over gRPC/Connect (a create with rules, the
// policy read and changed live, the denials listed, the bytes in usage),
// and POST /v1/run with a network.
func TestNetworkRPC(t *testing.T) {
	w := nettest.NewWorld(t)
	t.Cleanup(func() { checkNetworkClean(t, w) })
	h := daemontest.Start(t, func(c *config.Config) {
		c.Network.NetNS = w.HostPath
		c.Network.DNSUpstream = []string{nettest.UpstreamAddr}
	})
	ctx := t.Context()
	opts := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+h.AdminKey)
			return next(ctx, req)
		}
	}))
	sessions := warrenv1connect.NewSessionServiceClient(http.DefaultClient, h.URL, opts)
	execs := warrenv1connect.NewExecServiceClient(http.DefaultClient, h.URL, opts)
	nets := warrenv1connect.NewNetworkServiceClient(http.DefaultClient, h.URL, opts)

	if _, err := sessions.CreateSession(ctx, connect.NewRequest(&warrenv1.CreateSessionRequest{Id: "g", NetworkAllow: []string{"allowed.test"}})); err != nil {
		t.Fatal(err)
	}
	p, err := nets.GetNetwork(ctx, connect.NewRequest(&warrenv1.GetNetworkRequest{SessionId: "g"}))
	if err != nil || p.Msg.GetMode() != "allowlist" || len(p.Msg.GetAllow()) != 1 {
		t.Fatalf("GetNetwork: %v %v", p, err)
	}
	res, err := execs.Exec(ctx, connect.NewRequest(&warrenv1.ExecRequest{SessionId: "g", Command: "curl -sS -m 5 http://allowed.test/; curl -sS -m 5 http://other.test/"}))
	if err != nil || !strings.HasPrefix(res.Msg.GetStdout(), "hello from allowed.test") {
		t.Fatalf("exec: %v %v", res, err)
	}
	// The name check from a real client: twin.test shares allowed.test's
	// address; curl is told the address, as a client with a cached answer
	// or a hosts file would be.
	res, err = execs.Exec(ctx, connect.NewRequest(&warrenv1.ExecRequest{SessionId: "g", Command: "curl -sS -m 5 -w ' %{http_code}' --resolve twin.test:80:198.51.100.10 http://twin.test/"}))
	if err != nil || !strings.HasPrefix(res.Msg.GetStdout(), "warren: the session's network policy refuses host twin.test") || !strings.HasSuffix(res.Msg.GetStdout(), " 403") {
		t.Errorf("plain HTTP to a refused name on an allowed address: %v %v", res, err)
	}
	res, err = execs.Exec(ctx, connect.NewRequest(&warrenv1.ExecRequest{SessionId: "g", Command: "curl -sSk -m 5 --resolve twin.test:443:198.51.100.10 https://twin.test/; echo \" exit=$?\""}))
	if err != nil || !strings.Contains(res.Msg.GetStdout(), "exit=35") && !strings.Contains(res.Msg.GetStdout(), "exit=56") {
		t.Errorf("HTTPS to a refused name on an allowed address: %v %v; want a reset during the handshake", res, err)
	}
	res, err = execs.Exec(ctx, connect.NewRequest(&warrenv1.ExecRequest{SessionId: "g", Command: "curl -sSk -m 5 https://allowed.test/"}))
	if err != nil || !strings.HasPrefix(res.Msg.GetStdout(), "hello from allowed.test (SNI allowed.test)") {
		t.Errorf("HTTPS to an allowed name: %v %v", res, err)
	}
	ds, err := nets.ListNetworkDenials(ctx, connect.NewRequest(&warrenv1.ListNetworkDenialsRequest{SessionId: "g"}))
	var kinds []string
	for _, d := range ds.Msg.GetDenials() {
		kinds = append(kinds, d.GetProto()+" "+d.GetHost())
	}
	if err != nil || len(ds.Msg.GetDenials()) == 0 || ds.Msg.GetDenials()[0].GetHost() != "other.test" || ds.Msg.GetDenials()[0].GetTime() == nil ||
		!slices.Contains(kinds, "http twin.test") || !slices.Contains(kinds, "tls twin.test") {
		t.Errorf("ListNetworkDenials: %v %v; want other.test (dns), twin.test (http, tls)", kinds, err)
	}
	if _, err := nets.UpdateNetwork(ctx, connect.NewRequest(&warrenv1.UpdateNetworkRequest{SessionId: "g", Allow: []string{"a.*.test"}})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("UpdateNetwork with a bad rule: %v", err)
	}
	if p, err := nets.UpdateNetwork(ctx, connect.NewRequest(&warrenv1.UpdateNetworkRequest{SessionId: "g", Allow: []string{"other.test"}})); err != nil || p.Msg.GetAllow()[0] != "other.test" {
		t.Errorf("UpdateNetwork: %v %v", p, err)
	}
	if res, err := execs.Exec(ctx, connect.NewRequest(&warrenv1.ExecRequest{SessionId: "g", Command: "curl -sS -m 5 http://other.test/"})); err != nil || !strings.HasPrefix(res.Msg.GetStdout(), "hello from other.test") {
		t.Errorf("after UpdateNetwork: %v %v", res, err)
	}
	gs, err := sessions.GetSession(ctx, connect.NewRequest(&warrenv1.GetSessionRequest{SessionId: "g"}))
	if err != nil || gs.Msg.GetSession().GetUsage().GetNetworkInBytes() == 0 {
		t.Errorf("usage over RPC lacks the network's bytes: %v %v", gs, err)
	}
	if _, err := sessions.DeleteSession(ctx, connect.NewRequest(&warrenv1.DeleteSessionRequest{SessionId: "g"})); err != nil {
		t.Fatal(err)
	}

	// Run, over RPC and REST, with a network.
	rr, err := execs.Run(ctx, connect.NewRequest(&warrenv1.RunRequest{Command: "curl -sS -m 5 http://twin.test/", Network: "open"}))
	if err != nil || !strings.HasPrefix(rr.Msg.GetStdout(), "hello from twin.test") {
		t.Errorf("Run with network open: %v %v", rr, err)
	}
	r := as(t, h, bearer(h.AdminKey), "POST", "/v1/run", `{"command":"curl -sS -m 5 http://allowed.test/; curl -sS -m 5 http://other.test/","network":{"allow":["allowed.test"]}}`)
	var er api.ExecResult
	if r.status != 200 || json.Unmarshal(r.body, &er) != nil || !strings.HasPrefix(er.Stdout, "hello from allowed.test") || er.ExitCode == 0 {
		t.Errorf("POST /v1/run with an allow-list = %d %s", r.status, r.body)
	}
	if r := as(t, h, bearer(h.AdminKey), "POST", "/v1/run", `{"command":"true","network":{"allow":["a.*.test"]}}`); r.status != 400 {
		t.Errorf("POST /v1/run with a bad rule = %d %s", r.status, r.body)
	}
}
