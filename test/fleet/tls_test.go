package fleet

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/api"
	warrenv1 "github.com/warrenhq/warren/api/gen/warren/v1"
	"github.com/warrenhq/warren/api/gen/warren/v1/warrenv1connect"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestFleetTLS: nodes that serve HTTPS themselves (tls_cert_file),
// advertised at https:// and trusting the fleet's CA (fleet.ca_file): a
// session on one node is reached through the other over REST and gRPC
// (HTTP/2 over TLS on both legs), the list covers both nodes, and plain
// HTTP on a node's port gets a clear 400.
func TestFleetTLS(t *testing.T) {
	testutil.RequiresRoot(t)
	eps := embeddedEtcd(t)
	ca := testutil.NewTestCA(t, t.TempDir(), "127.0.0.1")
	clientTLS := &tls.Config{RootCAs: ca.Pool}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}}
	_, nodes, reg := newFleet(t, 2, eps, func(_ int, n *node) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		n.listen, n.hc = addr, hc
		n.extra = []string{"--tls-cert-file", ca.CertFile, "--tls-key-file", ca.KeyFile,
			"--fleet-advertise", "https://" + addr, "--fleet-ca-file", ca.CAFile}
	})
	for _, n := range nodes {
		if !strings.HasPrefix(n.url, "https://") {
			t.Fatalf("%s serves at %s, want https://", n.name, n.url)
		}
	}
	if _, err := nodes[0].c.CreateSession(bg, &api.CreateSessionRequest{ID: "tls1"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nodes[0].c.DeleteSession(bg, "tls1") })
	r, err := reg.GetSession(bg, daemon.BootstrapTenant, "tls1")
	if err != nil {
		t.Fatal(err)
	}
	var via *node
	for _, n := range nodes {
		if n.name != r.Node {
			via = n
		}
	}
	res, err := via.c.Exec(bg, "tls1", &api.ExecRequest{Command: "echo over tls"})
	if err != nil || res.Stdout != "over tls\n" {
		t.Fatalf("exec in tls1 (on %s) through %s = %+v, %v", r.Node, via.name, res, err)
	}
	var h2 http.Protocols
	h2.SetHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS, Protocols: &h2}}
	auth := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+via.key)
			return next(ctx, req)
		}
	}))
	got, err := warrenv1connect.NewExecServiceClient(h2c, via.url, auth, connect.WithGRPC()).
		Exec(bg, connect.NewRequest(&warrenv1.ExecRequest{SessionId: "tls1", Command: "hostname"}))
	if err != nil || got.Msg.GetStdout() != "tls1\n" {
		t.Fatalf("gRPC exec in tls1 through %s over TLS = %v, %v", via.name, got, err)
	}
	l, err := via.c.ListSessions(bg)
	if err != nil || len(l) != 1 || l[0].ID != "tls1" || l[0].Node != r.Node {
		t.Fatalf("list through %s = %+v, %v; want tls1 on %s", via.name, l, err, r.Node)
	}
	// Plain HTTP on a node's TLS port.
	resp, err := http.Get(strings.Replace(via.url, "https://", "http://", 1) + "/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("plain HTTP on %s's TLS port = %d, want 400", via.name, resp.StatusCode)
	}
}
