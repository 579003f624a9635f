package edge

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestTLSListener: the daemon's own TLS serves HTTP/1.1 and HTTP/2 (ALPN)
// with r.TLS set, answers net/http's own refusals in the envelope inside
// TLS, and plain HTTP on the port with a clear 400 in the envelope.
func TestTLSListener(t *testing.T) {
	ca := testutil.NewTestCA(t, t.TempDir(), "127.0.0.1")
	cert, err := tls.LoadX509KeyPair(ca.CertFile, ca.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &protocols, ConnContext: TLSConnContext, ReadHeaderTimeout: 5 * time.Second,
		Handler: TLSRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s tls=%v", r.Proto, r.TLS != nil && r.TLS.HandshakeComplete)
		}))}
	go func() { _ = srv.Serve(TLSListener(raw, &tls.Config{Certificates: []tls.Certificate{cert}})) }()
	t.Cleanup(func() { srv.Close() })
	url := "https://" + raw.Addr().String() + "/"
	clientTLS := &tls.Config{RootCAs: ca.Pool}

	for _, tc := range []struct {
		name string
		h2   bool
		want string
	}{{"HTTP/1.1", false, "HTTP/1.1 tls=true"}, {"HTTP/2", true, "HTTP/2.0 tls=true"}} {
		var p http.Protocols
		p.SetHTTP1(!tc.h2)
		p.SetHTTP2(tc.h2)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS, Protocols: &p}}
		resp, err := c.Get(url)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != tc.want {
			t.Fatalf("%s = %d %q, want %q", tc.name, resp.StatusCode, b, tc.want)
		}
	}

	// A malformed request inside TLS: net/http's refusal, in the envelope.
	conn, err := tls.Dial("tcp", raw.Addr().String(), clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(conn, "GET / HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n")
	checkEnvelope(t, "a malformed header over TLS", conn, 400, "refused before it was routed")
	conn.Close()

	// Plain HTTP on the TLS port.
	plain, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(plain, "GET /v1/sessions HTTP/1.1\r\nHost: x\r\n\r\n")
	checkEnvelope(t, "plain HTTP on the TLS port", plain, 400, "https://")
	plain.Close()
}

// checkEnvelope reads one answer from c: status and an error envelope
// whose message holds msg.
func checkEnvelope(t *testing.T, what string, c net.Conn, status int, msg string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer resp.Body.Close()
	var e api.Error
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != status || !strings.Contains(e.Error.Message, msg) || e.Error.Code == "" {
		t.Fatalf("%s = %d %+v (%v), want %d with %q", what, resp.StatusCode, e, err, status, msg)
	}
}
