package escape

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
)

// TestNetworkEscapes tries raw and exotic sockets and connections to the
// cloud metadata service, the daemon's own port, the internet and the
// host's addresses. The session's network is loopback only.
func TestNetworkEscapes(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "net", nil)
	b.needPython(t)
	u, err := url.Parse(h.URL)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	type conn struct{ name, addr, want string }
	conns := []conn{
		{"cloud metadata 169.254.169.254:80", "('169.254.169.254', 80)", "ENETUNREACH"},
		{"the daemon's port on 127.0.0.1 (the sandbox's own loopback)", fmt.Sprintf("('127.0.0.1', %s)", port), "ECONNREFUSED"},
		{"8.8.8.8:53", "('8.8.8.8', 53)", "ENETUNREACH"},
		{"1.1.1.1:443", "('1.1.1.1', 443)", "ENETUNREACH"},
	}
	// The host's own non-loopback addresses, where the daemon might listen.
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok || ipn.IP.IsLoopback() || ipn.IP.To4() == nil || ipn.IP.IsLinkLocalUnicast() {
				continue
			}
			conns = append(conns, conn{"the host's address " + ipn.IP.String() + ":" + port, fmt.Sprintf("('%s', %s)", ipn.IP, port), "ENETUNREACH"})
		}
	}
	var prog strings.Builder
	prog.WriteString(`
def sock(*a):
    try:
        s = socket.socket(*a)
        s.close()
        return "OK"
    except OSError as x:
        return ename(x.errno)
def conn(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(addr)
        return "OK"
    except socket.timeout:
        return "TIMEOUT"
    except OSError as x:
        return ename(x.errno)
    finally:
        s.close()
def udp(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"x", addr)
        return "OK"
    except OSError as x:
        return ename(x.errno)
    finally:
        s.close()
out("raw_icmp", sock(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
out("raw_tcp", sock(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP))
out("raw_v6", sock(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6))
out("packet", sock(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)))
out("packet_dgram", sock(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(3)))
out("vsock", sock(40, socket.SOCK_STREAM, 0))
out("vsock_dgram", sock(40, socket.SOCK_DGRAM, 0))
out("udp_8888", udp(("8.8.8.8", 53)))
out("ifaces", ",".join(sorted(n for _, n in socket.if_nameindex())))
out("tcp_loopback", sock(socket.AF_INET, socket.SOCK_STREAM, 0))
`)
	for i, c := range conns {
		fmt.Fprintf(&prog, "out(\"c%d\", conn(%s))\n", i, c.addr)
	}
	got := b.pyKV(t, prog.String())
	for _, c := range []struct{ key, name string }{
		{"raw_icmp", "socket(AF_INET, SOCK_RAW, IPPROTO_ICMP)"},
		{"raw_tcp", "socket(AF_INET, SOCK_RAW, IPPROTO_TCP)"},
		{"raw_v6", "socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6)"},
		{"packet", "socket(AF_PACKET, SOCK_RAW)"},
		{"packet_dgram", "socket(AF_PACKET, SOCK_DGRAM)"},
		{"vsock", "socket(AF_VSOCK, SOCK_STREAM)"},
		{"vsock_dgram", "socket(AF_VSOCK, SOCK_DGRAM)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got[c.key] != "EPERM" {
				t.Errorf("%s: %q, want EPERM", c.name, got[c.key])
			}
		})
	}
	for i, c := range conns {
		t.Run("connect "+c.name, func(t *testing.T) {
			if g := got[fmt.Sprintf("c%d", i)]; g != c.want {
				t.Errorf("connect to %s: %q, want %s", c.name, g, c.want)
			}
		})
	}
	t.Run("udp to 8.8.8.8", func(t *testing.T) {
		if got["udp_8888"] != "ENETUNREACH" {
			t.Errorf("sendto 8.8.8.8:53: %q, want ENETUNREACH", got["udp_8888"])
		}
	})
	t.Run("only lo", func(t *testing.T) {
		if got["ifaces"] != "lo" {
			t.Errorf("interfaces: %q, want only lo", got["ifaces"])
		}
		if got := b.out(t, "ls /sys/class/net"); got != "lo\n" {
			t.Errorf("/sys/class/net: %q, want lo", got)
		}
		if got := b.out(t, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"); got != "lo\n" {
			t.Errorf("/proc/net/dev: %q, want lo", got)
		}
		// Ordinary sockets still work (the controls).
		if got["tcp_loopback"] != "OK" {
			t.Errorf("a TCP socket: %q, want OK", got["tcp_loopback"])
		}
	})
	t.Run("loopback server stays inside", func(t *testing.T) {
		// A server on the daemon's port inside the sandbox: the host's
		// daemon keeps answering, the sandbox's client reaches its own.
		res := b.sh(t, fmt.Sprintf(`python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", %s)); s.listen(1)
c = socket.create_connection(("127.0.0.1", %s), timeout=5)
a, _ = s.accept(); a.sendall(b"inside"); print(c.recv(10).decode())'`, port, port))
		if res.Stdout != "inside\n" {
			t.Errorf("a server inside on the daemon's port: %q %q", res.Stdout, res.Stderr)
		}
		if _, err := h.Client.Stats(bg); err != nil {
			t.Errorf("the host daemon stopped answering: %v", err)
		}
	})
}
