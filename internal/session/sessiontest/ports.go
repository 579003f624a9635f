package sessiontest

import (
	"context"
	"net"
	"net/netip"
	"slices"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// ServePort makes port inside the sandbox the listener at addr, a host
// address (a loopback listener of the test): Listeners shows it as bound
// to any address, and DialPort connects to addr.
func (sb *Sandbox) ServePort(port int, addr string) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.ports == nil {
		sb.ports = map[int]string{}
	}
	sb.ports[port] = addr
}

// Listeners implements session.Sandbox: the ports ServePort set.
func (sb *Sandbox) Listeners(ctx context.Context) ([]session.Listener, error) {
	if err := sb.alive(); err != nil {
		return nil, err
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	out := []session.Listener{}
	for p := range sb.ports {
		out = append(out, session.Listener{Addr: netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(p))})
	}
	slices.SortFunc(out, func(a, b session.Listener) int { return int(a.Addr.Port()) - int(b.Addr.Port()) })
	return out, nil
}

// DialPort implements session.Sandbox: it connects to the address
// ServePort gave the port.
func (sb *Sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if err := sb.alive(); err != nil {
		return nil, err
	}
	sb.mu.Lock()
	addr, ok := sb.ports[port]
	sb.mu.Unlock()
	if !ok {
		return nil, errdefs.New(errdefs.ErrUnavailable, "nothing listens on port %d inside the sandbox", port)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}
