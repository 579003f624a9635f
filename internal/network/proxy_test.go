package network

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// fetchHTTP sends GET / with Host host on a connection to addr and reads
// the answer.
func fetchHTTP(c net.Conn, br *bufio.Reader, host string) (*http.Response, string, error) {
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
		return nil, "", err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// tlsGet connects to addr from the sandbox with server name sni ("" for
// none) and fetches / over HTTP/1.1.
func (s *sandbox) tlsGet(w *world, addr, sni string) (string, error) {
	c, err := s.dial(addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	cfg := &tls.Config{ServerName: sni, RootCAs: w.Roots}
	if sni == "" {
		// No SNI: Go sends none when ServerName is empty; the
		// certificate then has no name to be checked against.
		cfg.InsecureSkipVerify = true
	}
	tc := tls.Client(c, cfg)
	if err := tc.Handshake(); err != nil {
		return "", err
	}
	host := sni
	if host == "" {
		host, _, _ = net.SplitHostPort(addr)
	}
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestNameCheck: allowed.test and twin.test share 198.51.100.10; only
// allowed.test is allowed. twin.test is refused over HTTP (403 with a
// reason) and HTTPS (a reset, at once) even on the shared address, both
// recorded; allowed.test works over both; a ClientHello without a server
// name to the allowed address goes through (documented in NETWORKING.md).
func TestNameCheck(t *testing.T) {
	w := newWorld(t)
	m := w.manager(t)
	s := w.sandbox(t)
	s.attach(t, m, "sbx1", policy(t, m, "allowlist", []string{"allowed.test"}, nil))
	if r, err := s.resolve(s.info.Gateway.String(), "allowed.test", "udp"); err != nil || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "198.51.100.10" {
		t.Fatalf("resolve allowed.test: %v %v", r, err)
	}
	const shared = "198.51.100.10"

	// HTTP: the allowed name works; the other on the same address gets a
	// 403 naming warren's policy, at once.
	wantOK(t, s, "allowed.test", 80)
	c, err := s.dial(shared + ":80")
	must(t, err)
	br := bufio.NewReader(c)
	start := time.Now()
	resp, body, err := fetchHTTP(c, br, "twin.test")
	c.Close()
	if err != nil || resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(body, "warren: ") || !strings.Contains(body, "twin.test") || strings.Count(body, "\n") != 1 {
		t.Errorf("HTTP Host twin.test on the shared address: %v %q %v; want 403 and one line naming warren's policy", resp, body, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the 403 took %v", took)
	}
	wantDenial(t, m, "sbx1", Denial{Host: "twin.test", Port: 80, Proto: "http", Reason: reasonHost + ": not on the allow-list"})

	// A keep-alive connection cannot ask a second, refused host after an
	// allowed first one.
	c, err = s.dial(shared + ":80")
	must(t, err)
	br = bufio.NewReader(c)
	if resp, body, err := fetchHTTP(c, br, "allowed.test"); err != nil || resp.StatusCode != 200 || !strings.HasPrefix(body, "hello from allowed.test") {
		t.Errorf("first request on a keep-alive connection: %v %q %v", resp, body, err)
	}
	if resp, body, err := fetchHTTP(c, br, "twin.test"); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("second request with a refused Host on the same connection: %v %q %v; want 403", resp, body, err)
	}
	c.Close()

	// A POST that waits for "100 Continue" is answered before its body is
	// sent: the proxy does not hold the head back while it waits for the
	// body (the server answers at once, without reading the body).
	c, err = s.dial(shared + ":80")
	must(t, err)
	c.SetDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: allowed.test\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
		t.Errorf("a POST with Expect: 100-continue got no answer before its body: %v", err)
	} else {
		resp.Body.Close()
	}
	c.Close()

	// HTTPS: the server name decides, TLS is not terminated (the
	// certificate is the server's own, checked against w.Roots).
	if body, err := s.tlsGet(w, shared+":443", "allowed.test"); err != nil || !strings.HasPrefix(body, "hello from allowed.test (SNI allowed.test)") {
		t.Errorf("HTTPS to allowed.test: %q %v", body, err)
	}
	start = time.Now()
	if body, err := s.tlsGet(w, shared+":443", "twin.test"); err == nil {
		t.Errorf("HTTPS with SNI twin.test on the shared address worked: %q", body)
	} else if took := time.Since(start); took > time.Second {
		t.Errorf("HTTPS with a refused SNI failed after %v (%v); want a reset at once", took, err)
	}
	wantDenial(t, m, "sbx1", Denial{Host: "twin.test", Port: 443, Proto: "tls", Reason: reasonSNI + ": not on the allow-list"})
	// No server name at all: the address is allowed, and a server shared
	// by many names cannot pick a refused one without being told its
	// name: it goes through.
	if body, err := s.tlsGet(w, shared+":443", ""); err != nil || !strings.Contains(body, "(SNI )") {
		t.Errorf("HTTPS without SNI to an allowed address: %q %v", body, err)
	}
	// Empty lines before a request are skipped, as servers do: the Host
	// is still checked.
	c, err = s.dial(shared + ":80")
	must(t, err)
	c.SetDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c, "\r\n\r\nGET / HTTP/1.1\r\nHost: twin.test\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a request after empty lines with a refused Host: %v %v; want 403", resp, err)
	}
	c.Close()
	// Another protocol has no name to check: to an address allowed only
	// through a name it is refused.
	c, err = s.dial(shared + ":80")
	must(t, err)
	c.Write([]byte("\x00\x01 not http"))
	c.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := c.Read(make([]byte, 1)); n > 0 || err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("another protocol on port 80: read %d %v; want the connection reset", n, err)
	}
	c.Close()
	wantDenial(t, m, "sbx1", Denial{Host: shared, Port: 80, Proto: "tcp", Kind: "no_name",
		Reason: "no name to check: neither TLS nor HTTP/1 on port 80, and the address is allowed only by name"})
	// A handshake the check cannot read is refused (fail closed): it could
	// carry a name a server reads.
	c, err = s.dial(shared + ":443")
	must(t, err)
	c.Write([]byte{0x16, 0x03, 0x01, 0x00, 0x40, 0x01, 0x00, 0x00})
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := c.Read(make([]byte, 1)); n > 0 || err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("a truncated ClientHello: read %d %v; want the connection reset", n, err)
	}
	c.Close()
	wantDenial(t, m, "sbx1", Denial{Host: shared, Port: 443, Proto: "tls", Reason: reasonSNI + ": the TLS ClientHello could not be read"})
	// An address no allowed name resolved to is still refused by the
	// rules, before any name is read.
	wantRefused(t, s, "198.51.100.20", 443, "an address no allowed name resolved to, on 443")
	wantDenial(t, m, "sbx1", Denial{Host: "198.51.100.20", Port: 443, Proto: "tcp", Reason: reasonNotAllow})

	// QUIC would carry names past the check: UDP to 443 is refused.
	must(t, inNS(s.ns, func() error {
		u, err := net.Dial("udp4", shared+":443")
		if err != nil {
			return err
		}
		defer u.Close()
		u.Write([]byte("quic initial"))
		return nil
	}))
	wantDenial(t, m, "sbx1", Denial{Host: shared, Port: 443, Proto: "udp", Reason: reasonQUIC})

	// The proxy's own port takes only what the rules redirected.
	if c, err := s.dial(fmt.Sprintf("%s:%d", s.info.Gateway, s.prxPort(m, "sbx1"))); err == nil {
		c.SetReadDeadline(time.Now().Add(time.Second))
		if n, _ := c.Read(make([]byte, 1)); n > 0 {
			t.Errorf("a direct connection to the proxy's port got data")
		}
		c.Close()
		t.Errorf("a direct connection to the proxy's port was accepted")
	}

	// A live change ends a proxied connection whose name the new policy
	// refuses.
	c, err = s.dial(shared + ":443")
	must(t, err)
	tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", RootCAs: w.Roots})
	must(t, tc.Handshake())
	must(t, m.Update("sbx1", policy(t, m, "allowlist", []string{"twin.test"}, nil)))
	tc.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := tc.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("a TLS connection to a name taken off the list: read %v; want it ended", err)
	}
	tc.Close()
	// And the other way: twin.test now works, allowed.test is refused.
	if _, err := s.resolve(s.info.Gateway.String(), "twin.test", "udp"); err != nil {
		t.Fatal(err)
	}
	if body, err := s.tlsGet(w, shared+":443", "twin.test"); err != nil || !strings.HasPrefix(body, "hello from twin.test (SNI twin.test)") {
		t.Errorf("HTTPS to twin.test once allowed: %q %v", body, err)
	}
	if _, err := s.tlsGet(w, shared+":443", "allowed.test"); err == nil {
		t.Errorf("HTTPS to allowed.test after it left the list worked")
	}

	must(t, m.Detach("sbx1"))
	checkClean(t, w)
}

// TestNameCheckOpen: in open mode a deny rule on a name holds on 80 and
// 443 even for a client that connects by address.
func TestNameCheckOpen(t *testing.T) {
	w := newWorld(t)
	m := w.manager(t)
	s := w.sandbox(t)
	s.attach(t, m, "sbx1", policy(t, m, "open", nil, []string{"twin.test"}))
	if body, err := s.tlsGet(w, "198.51.100.10:443", "allowed.test"); err != nil || !strings.HasPrefix(body, "hello from allowed.test") {
		t.Errorf("HTTPS to allowed.test in open mode: %q %v", body, err)
	}
	if _, err := s.tlsGet(w, "198.51.100.10:443", "twin.test"); err == nil {
		t.Errorf("HTTPS with a denied SNI in open mode worked")
	}
	wantDenial(t, m, "sbx1", Denial{Host: "twin.test", Port: 443, Proto: "tls", Reason: reasonSNI + `: denied by rule "twin.test"`})
	c, err := s.dial("198.51.100.10:80")
	must(t, err)
	resp, _, err := fetchHTTP(c, bufio.NewReader(c), "twin.test")
	c.Close()
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("HTTP Host twin.test in open mode: %v %v; want 403", resp, err)
	}
	// A delete ends the connections through the name check at once, an
	// idle one and one waiting to send its first bytes alike.
	idle, err := s.dial("198.51.100.10:443")
	must(t, err)
	tc := tls.Client(idle, &tls.Config{ServerName: "allowed.test", RootCAs: w.Roots})
	must(t, tc.Handshake())
	silent, err := s.dial("198.51.100.10:80")
	must(t, err)
	start := time.Now()
	must(t, m.Detach("sbx1"))
	if took := time.Since(start); took > time.Second {
		t.Errorf("detach with open proxied connections took %v", took)
	}
	for _, c := range []net.Conn{tc, silent} {
		c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
			t.Errorf("a proxied connection after its session's delete: %v; want it ended", err)
		}
		c.Close()
	}
	checkClean(t, w)
}

func (s *sandbox) prxPort(m *Manager, name string) uint16 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sessions[name].prx.port
}
