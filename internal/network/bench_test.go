package network

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netns"

	"github.com/warrenhq/warren/internal/network/nettest"
)

// BenchmarkAttach measures what a session's network adds to its create
// (the veth pair, its addresses and route, the nft chain and sets, the
// forwarder's listeners) and, in the detach cases, to its delete too.
func BenchmarkAttach(b *testing.B) {
	for _, c := range []struct {
		mode        string
		detachTimed bool
	}{{"open", false}, {"allowlist", false}, {"open", true}} {
		mode, detachTimed := c.mode, c.detachTimed
		name := mode
		if detachTimed {
			name += "+detach"
		}
		b.Run(name, func(b *testing.B) {
			w := nettest.NewWorld(b)
			m, err := New(Config{NetNS: w.HostPath, Upstream: []string{upstreamAddr}})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			p, err := ParsePolicy(mode, map[string][]string{"open": nil, "allowlist": {"allowed.test", "*.wild.test", "203.0.113.0/24:8080"}}[mode], nil, m.Blocked)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				ns, path, err := nettest.Create()
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				name := fmt.Sprintf("b%d", i)
				if _, err := m.Attach(name, path, p); err != nil {
					b.Fatal(err)
				}
				if !detachTimed {
					b.StopTimer()
				}
				if err := m.Detach(name); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				ns.Close()
				b.StartTimer()
			}
		})
	}
}

// benchSession is a session in open mode in a fresh world, and a way to
// run code in the world's host namespace (where a host process would be).
func benchSession(b *testing.B, mode string, allow []string) (*nettest.World, *sandbox, *Manager) {
	w := nettest.NewWorld(b)
	m, err := New(Config{NetNS: w.HostPath, Upstream: []string{upstreamAddr}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	p, err := ParsePolicy(mode, allow, nil, m.Blocked)
	if err != nil {
		b.Fatal(err)
	}
	ns, path := nettest.NewNS(b)
	s := &sandbox{ns: ns, path: path}
	if s.info, err = m.Attach("bench", path, p); err != nil {
		b.Fatal(err)
	}
	return w, s, m
}

// fetch opens a connection in ns to addr (TLS with server name sni when
// sni is set), sends GET path with Host host and reads the whole answer;
// it returns the bytes of the body.
func fetch(ns netns.NsHandle, roots *x509.CertPool, addr, sni, host, path string) (int64, error) {
	var c net.Conn
	err := nettest.Do(ns, func() (err error) {
		c, err = net.DialTimeout("tcp4", addr, 3*time.Second)
		return err
	})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if sni != "" {
		tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: roots})
		if err := tc.Handshake(); err != nil {
			return 0, err
		}
		c = tc
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, host)
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 64<<10), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return n, err
}

// BenchmarkFirstConnection times one connection and a small request from
// connect to the last byte: from the host itself (no session), from a
// session by address on a port with no name check (8080: the nft rules
// only), through the name check on 80 (HTTP Host) and 443 (TLS SNI, with
// the handshake; against the host's own TLS connection), and a DNS
// question through the session's forwarder against the host asking the
// resolver itself.
func BenchmarkFirstConnection(b *testing.B) {
	w, s, _ := benchSession(b, "open", nil)
	const ip = "198.51.100.10"
	for _, c := range []struct {
		name string
		ns   netns.NsHandle
		addr string
		sni  string
	}{
		{"host/8080", w.Host, ip + ":8080", ""},
		{"session/8080", s.ns, ip + ":8080", ""},
		{"session/80-host-check", s.ns, ip + ":80", ""},
		{"host/443-tls", w.Host, ip + ":443", "allowed.test"},
		{"session/443-sni-check", s.ns, ip + ":443", "allowed.test"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				if _, err := fetch(c.ns, w.Roots, c.addr, c.sni, "allowed.test", "/"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, c := range []struct {
		name   string
		ns     netns.NsHandle
		server string
	}{{"host/dns", w.Host, upstreamAddr}, {"session/dns-forwarder", s.ns, s.info.Gateway.String()}} {
		b.Run(c.name, func(b *testing.B) {
			q := new(dns.Msg)
			q.SetQuestion("allowed.test.", dns.TypeA)
			for range b.N {
				err := nettest.Do(c.ns, func() error {
					r, err := dns.Exchange(q, net.JoinHostPort(c.server, "53"))
					if err == nil && len(r.Answer) != 1 {
						err = fmt.Errorf("answer %v", r)
					}
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBulk downloads 64 MiB over one connection: by the host itself,
// by a session through the policy on a port with no name check (8080),
// and through the name check's splice on 80 and 443.
func BenchmarkBulk(b *testing.B) {
	w, s, _ := benchSession(b, "allowlist", []string{"allowed.test"})
	if _, err := s.resolve(s.info.Gateway.String(), "allowed.test", "udp"); err != nil {
		b.Fatal(err)
	}
	const n = 64 << 20
	path := fmt.Sprintf("/bulk?n=%d", n)
	const ip = "198.51.100.10"
	for _, c := range []struct {
		name string
		ns   netns.NsHandle
		addr string
		sni  string
	}{
		{"host/8080", w.Host, ip + ":8080", ""},
		{"session/8080", s.ns, ip + ":8080", ""},
		{"session/80-host-check", s.ns, ip + ":80", ""},
		{"host/443-tls", w.Host, ip + ":443", "allowed.test"},
		{"session/443-sni-check", s.ns, ip + ":443", "allowed.test"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(n)
			for range b.N {
				got, err := fetch(c.ns, w.Roots, c.addr, c.sni, "allowed.test", path)
				if err != nil || got != n {
					b.Fatalf("%d bytes, %v", got, err)
				}
			}
		})
	}
}
