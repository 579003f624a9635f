package network

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The name check for ports 80 and 443. The session's nat chain redirects
// its new TCP connections to ports 80 and 443 of an address the policy
// allows to a listener of the daemon on the session's gateway (the
// proxy). The proxy reads the name the client presents (the TLS
// ClientHello's server name, or each HTTP request's Host), checks it
// against the policy, and only then dials the original destination and
// splices the two connections. TLS is never terminated: the ClientHello
// and what follows go upstream byte for byte.
const (
	// nameCheckPorts are the destination ports whose names are checked.
	httpPort, httpsPort = 80, 443
	// helloTimeout bounds the wait for the first bytes (a ClientHello or
	// an HTTP request head): a client that sends nothing is dropped.
	helloTimeout = 10 * time.Second
	// upstreamDialTimeout bounds the proxy's connect to the original
	// destination.
	upstreamDialTimeout = 30 * time.Second
	// maxHead bounds what is read of a request head or a ClientHello
	// before the name is known.
	maxHead = 64 << 10
)

// soOriginalDst is SO_ORIGINAL_DST (linux/netfilter_ipv4.h): the
// destination a connection had before the nat chain redirected it.
const soOriginalDst = 80

// proxy is one session's name-checking listener.
type proxy struct {
	m    *Manager
	s    *session
	ln   *net.TCPListener
	port uint16

	// ctx ends with stop: dials to the original destinations give up.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[*proxyConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// proxyConn is one proxied connection: what the client presented and
// where it goes, so a policy change can end the ones it now refuses.
type proxyConn struct {
	client   *net.TCPConn
	upstream net.Conn // nil until dialled
	dst      netip.Addr
	port     uint16
	mu       sync.Mutex
	names    []string // the names presented so far ("" for none), each once
	ended    bool     // close was called: an upstream dialled later is closed at once
}

func (p *proxy) start() error {
	var ln net.Listener
	err := inNS(p.m.ns, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(p.s.gw.String(), "0"))
		return err
	})
	if err != nil {
		return fmt.Errorf("listen for the session's name check on %s: %w", p.s.gw, err)
	}
	p.ln = ln.(*net.TCPListener)
	p.port = uint16(p.ln.Addr().(*net.TCPAddr).Port)
	p.conns = map[*proxyConn]struct{}{}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.wg.Add(1)
	go p.serve()
	return nil
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: wait, as net/http does.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		pc := &proxyConn{client: c}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			reset(c)
			return
		}
		p.conns[pc] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go func() {
			defer p.wg.Done()
			p.handle(pc)
			p.mu.Lock()
			delete(p.conns, pc)
			p.mu.Unlock()
		}()
	}
}

// stop closes the listener and every proxied connection, and waits.
func (p *proxy) stop() {
	if p.ln == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	p.cancel()
	p.ln.Close()
	for pc := range p.conns {
		pc.close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// recheck ends the proxied connections that policy pol refuses: a live
// change applies to names as it does to addresses.
func (p *proxy) recheck(pol Policy, addrOK func(dst netip.Addr, port uint16) bool) {
	if p.ln == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for pc := range p.conns {
		pc.mu.Lock()
		if !pc.dst.IsValid() {
			// Not read yet: its name is checked under the new policy.
			pc.mu.Unlock()
			continue
		}
		refused := !addrOK(pc.dst, pc.port)
		for _, n := range pc.names {
			if nameRefusal(pol, n, pc.port) != "" {
				refused = true
			}
		}
		pc.mu.Unlock()
		if refused {
			pc.close()
		}
	}
}

func (pc *proxyConn) close() {
	reset(pc.client)
	pc.mu.Lock()
	pc.ended = true
	if pc.upstream != nil {
		pc.upstream.Close()
	}
	pc.mu.Unlock()
}

// reset closes c with a TCP reset (SO_LINGER 0), so the client fails at
// once rather than on a timeout or a clean end it might take for success.
func reset(c *net.TCPConn) {
	c.SetLinger(0)
	c.Close()
}

// originalDst reads where the client meant to connect.
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var sa *unix.IPv6Mreq
	var serr error
	if err := rc.Control(func(fd uintptr) {
		// struct sockaddr_in fits the 20 bytes of an ipv6_mreq, the
		// usual way to read this option without cgo.
		sa, serr = unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, soOriginalDst)
	}); err != nil {
		return netip.AddrPort{}, err
	}
	if serr != nil {
		return netip.AddrPort{}, serr
	}
	b := sa.Multiaddr
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]}), binary.BigEndian.Uint16(b[2:4])), nil
}

// nameRefusal says why pol refuses name ("" for none presented, or an
// address literal) on port, or "" when it does not. A connection without a
// name was already let through by its address: a server shared by many
// names cannot pick a refused one without being told its name.
func nameRefusal(pol Policy, name string, port uint16) string {
	if name == "" {
		return ""
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return ""
	}
	ports, reason := pol.nameVerdict(name)
	if reason != "" {
		return reason
	}
	if ports[0] != 0 && !containsPort(ports, port) {
		return fmt.Sprintf("allowed only on port %s", joinPorts(ports))
	}
	return ""
}

func containsPort(ps []uint16, p uint16) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

func joinPorts(ps []uint16) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ", ")
}

// Reasons of refused names; the policy's own reason follows the colon.
const (
	reasonSNI  = "TLS server name (SNI) refused"
	reasonHost = "HTTP Host refused"
)

// handle checks one connection's name and splices it upstream.
func (p *proxy) handle(pc *proxyConn) {
	c := pc.client
	od, err := originalDst(c)
	if err != nil || od.Addr() == p.s.gw || p.m.isBlocked(od.Addr()) {
		// Not redirected by the session's rules (its nat chain sends only
		// allowed addresses here, and the input rules accept only
		// redirected connections): nothing to splice to.
		reset(c)
		return
	}
	pc.mu.Lock()
	pc.dst, pc.port = od.Addr(), od.Port()
	pc.mu.Unlock()
	c.SetReadDeadline(time.Now().Add(helloTimeout))
	cr := &capReader{r: c, n: maxHead}
	br := bufio.NewReaderSize(cr, 4096)
	first, err := br.Peek(1)
	if err != nil {
		reset(c)
		return
	}
	if first[0] == 0x16 { // a TLS handshake record
		p.handleTLS(pc, cr, br, od)
		return
	}
	// Servers skip empty lines before a request (RFC 9112 2.2): so does
	// the check, or "\r\nGET ..." would pass as another protocol.
	for {
		b, err := br.Peek(1)
		if err != nil {
			reset(c)
			return
		}
		if b[0] != '\r' && b[0] != '\n' {
			break
		}
		_, _ = br.Discard(1) // the byte Peek just returned
	}
	if looksLikeHTTP(br) {
		p.handleHTTP(pc, cr, br, od)
		return
	}
	// Neither TLS nor HTTP/1: no name to check. In allowlist mode that
	// passes only to an address an address rule allows (the caller
	// allowed the address itself, whatever speaks there); an address
	// allowed through a name needs the name.
	cr.n = -1
	if pol := p.s.currentPolicy(); pol.Mode == ModeAllowlist && !addressRuleAllows(pol, od.Addr(), od.Port()) {
		p.deny(od.Addr().String(), od.Port(), "tcp", "no name to check", "neither TLS nor HTTP/1 on port "+fmt.Sprint(od.Port())+", and the address is allowed only by name")
		reset(c)
		return
	}
	if !p.note(pc, "") {
		reset(c)
		return
	}
	c.SetReadDeadline(time.Time{})
	up, err := p.dial(pc, od)
	if err != nil {
		reset(c)
		return
	}
	splice(c, br, up)
}

// note records a name the connection presented; false if the proxy is
// stopping or the connection was ended meanwhile.
func (p *proxy) note(pc *proxyConn, name string) bool {
	pc.mu.Lock()
	if !slices.Contains(pc.names, name) {
		pc.names = append(pc.names, name)
	}
	pc.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	_, live := p.conns[pc]
	return live && !p.closed
}

func (p *proxy) dial(pc *proxyConn, od netip.AddrPort) (net.Conn, error) {
	var up net.Conn
	err := inNS(p.m.ns, func() (err error) {
		d := net.Dialer{Timeout: upstreamDialTimeout}
		up, err = d.DialContext(p.ctx, "tcp4", od.String())
		return err
	})
	if err != nil {
		return nil, err
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.ended {
		up.Close()
		return nil, net.ErrClosed
	}
	pc.upstream = up
	return up, nil
}

// deny records a refused name.
func (p *proxy) deny(name string, port uint16, proto, why, reason string) {
	kind := map[string]string{"tls": "sni_refused", "http": "host_refused"}[proto]
	if kind == "" {
		kind = "no_name"
	}
	p.s.deny(Denial{Host: name, Port: port, Proto: proto, Reason: why + ": " + reason, Kind: kind})
}

// handleTLS reads the ClientHello (with crypto/tls's parser, stopping
// before any answer), checks its server name, and sends the bytes read
// upstream unchanged before splicing.
func (p *proxy) handleTLS(pc *proxyConn, cr *capReader, br *bufio.Reader, od netip.AddrPort) {
	c := pc.client
	var rec bytes.Buffer
	name, ok := clientHelloName(io.TeeReader(br, &rec))
	cr.n = -1
	if !ok {
		// A handshake crypto/tls cannot read may still carry a name a
		// server would read (a malformed hello is a way around the
		// check): refused, unlike a well-formed hello without a name.
		p.deny(od.Addr().String(), od.Port(), "tls", reasonSNI, "the TLS ClientHello could not be read")
		reset(c)
		return
	}
	if reason := nameRefusal(p.s.currentPolicy(), name, od.Port()); reason != "" {
		p.deny(name, od.Port(), "tls", reasonSNI, reason)
		reset(c)
		return
	}
	if !p.note(pc, name) {
		reset(c)
		return
	}
	c.SetReadDeadline(time.Time{})
	up, err := p.dial(pc, od)
	if err != nil {
		reset(c)
		return
	}
	if _, err := up.Write(rec.Bytes()); err != nil {
		reset(c)
		up.Close()
		return
	}
	splice(c, br, up)
}

var errHelloRead = errors.New("client hello read")

// clientHelloName parses a ClientHello from r and returns its server name
// (lower case, "" when it has none); ok is false when r holds no
// ClientHello crypto/tls accepts.
func clientHelloName(r io.Reader) (name string, ok bool) {
	cfg := &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name, ok = strings.ToLower(h.ServerName), true
		return nil, errHelloRead
	}}
	// The handshake always fails: GetConfigForClient stops it once the
	// name is read (errHelloRead), and a hello that does not parse leaves
	// ok false.
	_ = tls.Server(readOnlyConn{r: r}, cfg).Handshake()
	return name, ok
}

// readOnlyConn feeds crypto/tls the client's bytes and swallows what it
// would answer (an alert, once the hello is read): the client hears only
// from the real server.
type readOnlyConn struct {
	net.Conn
	r io.Reader
}

func (c readOnlyConn) Read(b []byte) (int, error)          { return c.r.Read(b) }
func (c readOnlyConn) Write(b []byte) (int, error)         { return len(b), nil }
func (c readOnlyConn) Close() error                        { return nil }
func (c readOnlyConn) SetDeadline(time.Time) error         { return nil }
func (c readOnlyConn) SetReadDeadline(time.Time) error     { return nil }
func (c readOnlyConn) SetWriteDeadline(time.Time) error    { return nil }
func (c readOnlyConn) LocalAddr() net.Addr                 { return &net.TCPAddr{} }
func (c readOnlyConn) RemoteAddr() net.Addr                { return &net.TCPAddr{} }
func (c readOnlyConn) String() string                      { return "client hello" }
func (c readOnlyConn) Unwrap() io.Reader                   { return c.r }
func (c readOnlyConn) ReadFrom(r io.Reader) (int64, error) { return io.Copy(io.Discard, r) }

// looksLikeHTTP says whether the buffered start is an HTTP/1 request line
// ("TOKEN SP"): then every request's Host is checked.
func looksLikeHTTP(br *bufio.Reader) bool {
	for n := 1; n <= 16; n++ {
		b, err := br.Peek(n)
		if err != nil {
			return false
		}
		ch := b[n-1]
		switch {
		case ch == ' ':
			return n > 1
		case ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch == '-' || ch == '_':
		default:
			return false
		}
	}
	return false
}

// handleHTTP checks the Host of every request on the connection (a
// keep-alive connection could otherwise ask a second host after an
// allowed first one) and writes each request upstream as Go parsed it:
// the Host the server sees is the one that was checked (an absolute URI
// and a Host header that disagree are sent as the URI's host, which was
// the one checked). Responses go back unparsed. After an Upgrade or a
// CONNECT the connection is spliced as it is.
func (p *proxy) handleHTTP(pc *proxyConn, cr *capReader, br *bufio.Reader, od netip.AddrPort) {
	c := pc.client
	var up net.Conn
	done := make(chan struct{})
	// refusing keeps the response copier from ending the client's side:
	// the 403 is still to be written there.
	var refusing atomic.Bool
	defer func() {
		if up != nil {
			up.Close()
			<-done
		}
		c.Close()
	}()
	for first := true; ; first = false {
		if first {
			c.SetReadDeadline(time.Now().Add(helloTimeout))
		}
		cr.n = maxHead
		req, err := http.ReadRequest(br)
		cr.n = -1
		if err != nil {
			if up == nil {
				reset(c)
			} else if tc, ok := up.(*net.TCPConn); ok {
				// The client is done sending (or sent garbage): let the
				// server finish its answers.
				tc.CloseWrite()
				<-done
			}
			return
		}
		host := req.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.ToLower(host), ".")
		if reason := nameRefusal(p.s.currentPolicy(), host, od.Port()); reason != "" {
			p.deny(host, od.Port(), "http", reasonHost, reason)
			if up != nil {
				refusing.Store(true)
				up.Close()
				<-done
				up = nil
			}
			forbidden(c, host, reason)
			return
		}
		if !p.note(pc, host) {
			reset(c)
			return
		}
		if up == nil {
			c.SetReadDeadline(time.Time{})
			if up, err = p.dial(pc, od); err != nil {
				up = nil
				reset(c)
				return
			}
			go func() {
				defer close(done)
				pipe(c, up)
				if !refusing.Load() {
					c.CloseWrite()
				}
			}()
		}
		// Write adds a User-Agent when there is none: an empty one is
		// the way to send the request without it.
		if _, ok := req.Header["User-Agent"]; !ok {
			req.Header["User-Agent"] = []string{""}
		}
		raw := req.Method == http.MethodConnect || req.Header.Get("Upgrade") != ""
		// Write sends the head before it reads the body (it flushes
		// the head of a request with a streamed body): a client that
		// sent "Expect: 100-continue" gets the server's answer to it.
		if err := req.Write(up); err != nil {
			return
		}
		if raw {
			// Whatever follows is the upgraded protocol's.
			copyUp(c, br, up)
			<-done
			return
		}
	}
}

// forbidden answers a refused plain-HTTP request with 403 and a one-line
// reason a model can read, and closes the connection.
func forbidden(c *net.TCPConn, host, reason string) {
	body := fmt.Sprintf("warren: the session's network policy refuses host %s (%s)\n", host, reason)
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	c.CloseWrite()
	// Let the client read the answer before the socket goes.
	c.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.Copy(io.Discard, c) // until the client closes or the deadline passes
}

// splice copies both ways until both sides are done (the kernel's splice
// between the two sockets, through Go's TCPConn.ReadFrom).
func splice(c *net.TCPConn, br *bufio.Reader, up net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(c, up)
		c.CloseWrite()
	}()
	copyUp(c, br, up)
	<-done
	up.Close()
	c.Close()
}

// copyUp sends what br holds, then the rest of the client's stream
// straight from its socket (so the kernel splices it), and ends the
// upstream's sending side.
func copyUp(c *net.TCPConn, br *bufio.Reader, up net.Conn) {
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
		_, _ = br.Discard(n) // what Peek returned and was sent on
	}
	pipe(up, c)
	if tc, ok := up.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
}

// capReader reads at most n bytes more from r while n >= 0 (a request
// head's or a ClientHello's bound); n < 0 is no bound (bodies, and
// everything once the name is checked).
type capReader struct {
	r io.Reader
	n int64
}

func (c *capReader) Read(b []byte) (int, error) {
	if c.n < 0 {
		return c.r.Read(b)
	}
	if c.n == 0 {
		return 0, errors.New("request head or TLS ClientHello longer than 64 KiB")
	}
	if int64(len(b)) > c.n {
		b = b[:c.n]
	}
	n, err := c.r.Read(b)
	c.n -= int64(n)
	return n, err
}

// pipe copies src to dst until src ends. Between two TCP sockets it calls
// ReadFrom itself, which the kernel serves with splice(2): io.Copy would
// take src's WriteTo first, which splices only into Unix sockets and
// otherwise copies through a buffer (half the throughput, measured).
func pipe(dst, src net.Conn) {
	if d, ok := dst.(*net.TCPConn); ok {
		_, _ = d.ReadFrom(src) // either side ending ends the pipe
		return
	}
	_, _ = io.Copy(dst, src)
}

// addressRuleAllows says whether an allow rule on addresses (not a name)
// lets the session reach dst on port.
func addressRuleAllows(pol Policy, dst netip.Addr, port uint16) bool {
	for _, r := range pol.Allow {
		if !r.IsName() && (r.Port == 0 || r.Port == port) && r.Prefix.Contains(dst) {
			return true
		}
	}
	return false
}
