package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// This file reaches what listens inside a sandbox from the host, with no
// network link between them: a thread of the daemon joins the sandbox's
// network namespace just long enough to create a socket there (or to read
// the namespace's /proc/net), and goes back. A socket belongs to the
// namespace it was created in for its whole life, so the connection made
// from it is a loopback connection inside the sandbox, whichever thread
// later reads and writes it. This works in every network mode, none
// included: it needs no veth, route or address.

// Listener is a TCP socket listening inside a sandbox.
type Listener struct {
	// Addr is the local address it is bound to (0.0.0.0 or :: for any).
	Addr netip.AddrPort
}

// tcpListen is the state /proc/net/tcp shows for a listening socket.
const tcpListen = "0A"

// Listeners lists the TCP sockets listening in the sandbox's network
// namespace, sorted by port then address.
func (sb *Sandbox) Listeners(ctx context.Context) ([]Listener, error) {
	var out []Listener
	err := sb.inNetNS(func() error {
		for _, f := range []string{"/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"} {
			b, err := os.ReadFile(f)
			if errors.Is(err, os.ErrNotExist) && strings.HasSuffix(f, "6") {
				continue // a kernel without IPv6
			}
			if err != nil {
				return err
			}
			l, err := parseProcNetTCP(b)
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			out = append(out, l...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Listener) int {
		if a.Addr.Port() != b.Addr.Port() {
			return int(a.Addr.Port()) - int(b.Addr.Port())
		}
		return a.Addr.Addr().Compare(b.Addr.Addr())
	})
	return slices.Compact(out), nil
}

// parseProcNetTCP returns the listening sockets of a /proc/net/tcp or tcp6
// table. Addresses there are hex of the kernel's in-memory words: an IPv4
// address is one 32-bit word in host order, an IPv6 one four such words.
func parseProcNetTCP(b []byte) ([]Listener, error) {
	var out []Listener
	sc := bufio.NewScanner(bytes.NewReader(b))
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != tcpListen {
			continue
		}
		hexAddr, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			return nil, fmt.Errorf("malformed local address %q", f[1])
		}
		port, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil {
			return nil, fmt.Errorf("malformed port %q", hexPort)
		}
		raw, err := hex.DecodeString(hexAddr)
		if err != nil || (len(raw) != 4 && len(raw) != 16) {
			return nil, fmt.Errorf("malformed address %q", hexAddr)
		}
		// Each 32-bit word is in host order; make it network order.
		for i := 0; i < len(raw); i += 4 {
			binary.BigEndian.PutUint32(raw[i:], binary.NativeEndian.Uint32(raw[i:]))
		}
		addr, _ := netip.AddrFromSlice(raw)
		out = append(out, Listener{Addr: netip.AddrPortFrom(addr.Unmap(), uint16(port))})
	}
	return out, sc.Err()
}

// DialPort connects to port on the sandbox's loopback: 127.0.0.1 first,
// then ::1 (a server bound to IPv6 loopback only). A port with nothing
// listening is ErrUnavailable, naming the port; a sandbox that is gone is
// ErrUnavailable too.
func (sb *Sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "port %d is out of range (1-65535)", port)
	}
	var conn net.Conn
	err := sb.inNetNS(func() error {
		// The socket is created on this thread, in the sandbox's
		// namespace; the connect waits in the poller while the goroutine
		// stays locked to the thread, so nothing else runs here meanwhile.
		d := net.Dialer{Timeout: 10 * time.Second}
		var errs []error
		for _, host := range []string{"127.0.0.1", "::1"} {
			c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err == nil {
				conn = c
				return nil
			}
			if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.EADDRNOTAVAIL) && !errors.Is(err, syscall.ENETUNREACH) {
				return err
			}
			errs = append(errs, err)
		}
		return errdefs.New(errdefs.ErrUnavailable, "nothing listens on port %d inside the sandbox (on 127.0.0.1, ::1 or any address): %w",
			port, errors.Join(errs...))
	})
	return conn, err
}

// inNetNS runs f on a thread of its own that is in the sandbox's network
// namespace, and waits for it. The thread joins the namespace through the
// sandbox's pidfd, so a recycled pid can never send it elsewhere, and goes
// back to the daemon's namespace afterwards; if it cannot, the thread is
// left locked to its goroutine, which ends, so the runtime discards it.
func (sb *Sandbox) inNetNS(f func() error) error {
	select {
	case <-sb.done:
		return errdefs.New(errdefs.ErrUnavailable, "the sandbox is gone: %v", sb.ExitErr())
	default:
	}
	if sb.pidfd == nil {
		return errdefs.New(errdefs.ErrUnavailable, "the sandbox has no process to reach")
	}
	rc, err := sb.pidfd.SyscallConn()
	if err != nil {
		return errdefs.New(errdefs.ErrUnavailable, "the sandbox's pidfd: %w", err)
	}
	res := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Our own namespace, to come back to: this thread's, which is the
		// daemon's (no other code moves threads between namespaces).
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			res <- fmt.Errorf("open the daemon's network namespace: %w", err)
			return
		}
		defer self.Close()
		var joinErr error
		// Control holds the pidfd open while we use it: Detach cannot
		// close it under us.
		if cerr := rc.Control(func(fd uintptr) { joinErr = unix.Setns(int(fd), unix.CLONE_NEWNET) }); cerr != nil {
			joinErr = cerr
		}
		if joinErr != nil {
			runtime.UnlockOSThread()
			if errors.Is(joinErr, unix.ESRCH) || errors.Is(joinErr, os.ErrClosed) {
				res <- errdefs.New(errdefs.ErrUnavailable, "the sandbox is gone")
				return
			}
			res <- fmt.Errorf("enter the sandbox's network namespace: %w", joinErr)
			return
		}
		ferr := f()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			// Keep the thread locked: it dies with this goroutine
			// instead of serving the daemon from the wrong namespace.
			res <- errors.Join(ferr, fmt.Errorf("return to the daemon's network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		res <- ferr
	}()
	return <-res
}

func (s sessionSandbox) Listeners(ctx context.Context) ([]session.Listener, error) {
	ls, err := s.sb.Listeners(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]session.Listener, len(ls))
	for i, l := range ls {
		out[i] = session.Listener{Addr: l.Addr}
	}
	return out, nil
}

func (s sessionSandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	return s.sb.DialPort(ctx, port)
}
