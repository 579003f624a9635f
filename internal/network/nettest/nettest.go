// Package nettest builds, for tests, a small internet of their own: a
// "host" network namespace whose default route leads into another that
// holds a resolver and HTTP servers for a few names, so that sessions'
// egress is tested with real packets that never leave the machine.
package nettest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"github.com/warrenhq/warren/internal/network/nsexec"
	"github.com/warrenhq/warren/internal/testutil"
)

// Do runs fn on an OS thread in the network namespace ns (sockets it
// opens stay there).
var Do = nsexec.Do

func ipnet(a string, bits int) *net.IPNet {
	return &net.IPNet{IP: net.ParseIP(a).To4(), Mask: net.CIDRMask(bits, 32)}
}

// NewNS makes an anonymous network namespace with lo up; it vanishes,
// with every link in it, when the test ends.
func NewNS(t testing.TB) (netns.NsHandle, string) {
	t.Helper()
	ns, path, err := Create()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns, path
}

// Create makes an anonymous network namespace with lo up, and a path that
// opens it; it vanishes when the caller closes the handle (and nothing
// else holds it).
func Create() (netns.NsHandle, string, error) {
	ns, err := nsexec.New()
	if err != nil {
		return ns, "", err
	}
	h, err := netlink.NewHandleAt(ns)
	if err == nil {
		defer h.Close()
		var lo netlink.Link
		if lo, err = h.LinkByName("lo"); err == nil {
			err = h.LinkSetUp(lo)
		}
	}
	if err != nil {
		ns.Close()
		return ns, "", err
	}
	return ns, fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), int(ns)), nil
}

// Must fails the test on err.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The fake internet: names and the addresses its DNS server gives them.
var Zone = map[string]string{
	"allowed.test.":   "198.51.100.10",
	"twin.test.":      "198.51.100.10", // shares allowed.test's address
	"other.test.":     "198.51.100.20",
	"a.wild.test.":    "198.51.100.20",
	"gist.wild.test.": "198.51.100.20",
	"rebind.test.":    "127.0.0.1",
	"private.test.":   "10.99.0.1",
	"meta.test.":      "169.254.169.254",
	"cgnat.test.":     "100.64.0.1",
}

const (
	HostAddr     = "192.0.2.1" // the "host": the uplink namespace
	UpstreamAddr = "192.0.2.2" // the internet's router and resolver
	DaemonPort   = 7433        // a listener on the host, standing in for the daemon's port
)

// World is a host namespace whose default route leads into a namespace
// that plays the internet: a resolver at UpstreamAddr answering Zone, and
// HTTP on ports 80 and 8080 of every address it has, answering
// "hello from HOST at ADDR", HTTPS on port 443 answering "hello from HOST
// (SNI NAME) at ADDR" with a certificate for every name of Zone, and a TCP
// echo on port 7.
type World struct {
	Host, Inet netns.NsHandle
	// HostPath opens Host (network.Config.NetNS).
	HostPath string
	// Roots trusts the HTTPS servers' certificate.
	Roots *x509.CertPool
}

// selfSigned makes a certificate for every name of Zone.
func selfSigned() (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	var names []string
	for n := range Zone {
		names = append(names, strings.TrimSuffix(n, "."))
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "the test internet"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: names, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool, nil
}

// NewWorld builds a World; it is gone when the test ends.
func NewWorld(t testing.TB) *World {
	testutil.RequiresRoot(t)
	w := &World{}
	w.Host, w.HostPath = NewNS(t)
	w.Inet, _ = NewNS(t)
	hh, err := netlink.NewHandleAt(w.Host)
	Must(t, err)
	defer hh.Close()
	ih, err := netlink.NewHandleAt(w.Inet)
	Must(t, err)
	defer ih.Close()
	Must(t, hh.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "up0"}, PeerName: "up1", PeerNamespace: netlink.NsFd(int(w.Inet))}))
	up0, err := hh.LinkByName("up0")
	Must(t, err)
	Must(t, hh.AddrAdd(up0, &netlink.Addr{IPNet: ipnet(HostAddr, 24)}))
	Must(t, hh.LinkSetUp(up0))
	Must(t, hh.RouteAdd(&netlink.Route{LinkIndex: up0.Attrs().Index, Gw: net.ParseIP(UpstreamAddr)}))
	up1, err := ih.LinkByName("up1")
	Must(t, err)
	Must(t, ih.AddrAdd(up1, &netlink.Addr{IPNet: ipnet(UpstreamAddr, 24)}))
	Must(t, ih.LinkSetUp(up1))
	// Packets sent before both ends are operational are dropped.
	Must(t, nsexec.WaitUp(hh, "up0", ih, "up1"))
	lo, err := ih.LinkByName("lo")
	Must(t, err)
	for _, a := range []string{"198.51.100.10", "198.51.100.20", "203.0.113.30", "10.99.0.1", "169.254.169.254", "100.64.0.1"} {
		Must(t, ih.AddrAdd(lo, &netlink.Addr{IPNet: ipnet(a, 32)}))
	}

	// The internet's resolver.
	handler := dns.HandlerFunc(func(rw dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		qs := q.Question[0]
		a, ok := Zone[strings.ToLower(qs.Name)]
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case qs.Qtype == dns.TypeA:
			rr, _ := dns.NewRR(qs.Name + " 5 IN A " + a)
			m.Answer = append(m.Answer, rr)
		}
		rw.WriteMsg(m)
	})
	var pc net.PacketConn
	var ln, web, web8080, web443, echo net.Listener
	Must(t, Do(w.Inet, func() (err error) {
		if pc, err = net.ListenPacket("udp4", UpstreamAddr+":53"); err != nil {
			return err
		}
		if ln, err = net.Listen("tcp4", UpstreamAddr+":53"); err != nil {
			return err
		}
		if web, err = net.Listen("tcp4", ":80"); err != nil {
			return err
		}
		if web8080, err = net.Listen("tcp4", ":8080"); err != nil {
			return err
		}
		if web443, err = net.Listen("tcp4", ":443"); err != nil {
			return err
		}
		echo, err = net.Listen("tcp4", ":7")
		return err
	}))
	// Echo on port 7, for connections that stay open.
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	t.Cleanup(func() { echo.Close() })
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: handler}, {Listener: ln, Handler: handler}} {
		go s.ActivateAndServe()
		t.Cleanup(func() { s.Shutdown() })
	}
	hello := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bulk" {
			// A large body for throughput: ?n= bytes of zeros.
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			rw.Header().Set("Content-Length", strconv.Itoa(n))
			_, _ = io.CopyN(rw, zeros{}, int64(n))
			return
		}
		if r.TLS != nil {
			fmt.Fprintf(rw, "hello from %s (SNI %s) at %s", r.Host, r.TLS.ServerName, r.Context().Value(http.LocalAddrContextKey))
			return
		}
		fmt.Fprintf(rw, "hello from %s at %s", r.Host, r.Context().Value(http.LocalAddrContextKey))
	})
	srv := &http.Server{Handler: hello}
	go srv.Serve(web)
	go srv.Serve(web8080)
	t.Cleanup(func() { srv.Close() })
	cert, roots, err := selfSigned()
	Must(t, err)
	w.Roots = roots
	tlsSrv := &http.Server{Handler: hello, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go func() { _ = tlsSrv.ServeTLS(web443, "", "") }() // ends when the test closes it
	t.Cleanup(func() { tlsSrv.Close() })

	// The daemon's port on the host.
	var daemon net.Listener
	Must(t, Do(w.Host, func() (err error) {
		daemon, err = net.Listen("tcp4", fmt.Sprintf(":%d", DaemonPort))
		return err
	}))
	go func() {
		for {
			c, err := daemon.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("daemon\n")) // the test reading it reports a short read
			c.Close()
		}
	}()
	t.Cleanup(func() { daemon.Close() })
	return w
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}
