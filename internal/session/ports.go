package session

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Listener is a TCP socket listening inside a sandbox.
type Listener struct {
	// Addr is the address it is bound to: a loopback address, a specific
	// one, or 0.0.0.0 or :: for any.
	Addr netip.AddrPort
}

// Port is one TCP port of a session as its users see it: what listens
// there, and whether it is served without authentication.
type Port struct {
	Port int
	// Addresses are the addresses the port is bound to inside the
	// sandbox; none if nothing listens (a public port whose server
	// stopped).
	Addresses []netip.Addr
	// LoopbackOnly: every listener is bound to a loopback address, so
	// only the sandbox itself (and warren's proxy) can reach it.
	LoopbackOnly bool
	// Public: the port is served without authentication.
	Public bool
}

func checkPort(port int) error {
	if port < 1 || port > 65535 {
		return invalid("port %d is out of range (1-65535)", port)
	}
	return nil
}

// Ports lists the TCP ports listening in a session, and its public ports
// whether they listen or not, by port.
func (m *Manager) Ports(ctx context.Context, tenant, id string) ([]Port, error) {
	e, done, err := m.use(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer done()
	ls, err := e.sb.Listeners(ctx)
	if err != nil {
		return nil, m.sandboxErr(e, id, err)
	}
	byPort := map[int]*Port{}
	for _, l := range ls {
		p := int(l.Addr.Port())
		if byPort[p] == nil {
			byPort[p] = &Port{Port: p, LoopbackOnly: true}
		}
		pp := byPort[p]
		if !slices.Contains(pp.Addresses, l.Addr.Addr()) {
			pp.Addresses = append(pp.Addresses, l.Addr.Addr())
		}
		pp.LoopbackOnly = pp.LoopbackOnly && l.Addr.Addr().IsLoopback()
	}
	e.mu.Lock()
	for p, pub := range e.public {
		if !pub {
			continue
		}
		if byPort[p] == nil {
			byPort[p] = &Port{Port: p}
		}
		byPort[p].Public = true
	}
	e.mu.Unlock()
	out := make([]Port, 0, len(byPort))
	for _, p := range byPort {
		if len(p.Addresses) == 0 {
			p.LoopbackOnly = false
		}
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Port) int { return a.Port - b.Port })
	return out, nil
}

// SetPortPublic makes a session's port public (served without
// authentication) or private again. Only a tenant whose settings allow
// public ports may publish one (ErrPermissionDenied otherwise). A public
// port is reached by its session id alone, so two tenants cannot publish
// the same port of sessions with the same id (ErrConflict). The setting
// lives as long as the session in this daemon: a restart forgets it.
func (m *Manager) SetPortPublic(ctx context.Context, tenant, id string, port int, public bool) (*Port, error) {
	if err := checkPort(port); err != nil {
		return nil, err
	}
	if public {
		tl, err := m.tenantLimits(ctx, tenant)
		if err != nil {
			return nil, err
		}
		if !tl.PublicPorts {
			return nil, errdefs.New(errdefs.ErrPermissionDenied,
				"tenant %s may not serve public ports: its settings do not allow it (policy.allow_public_ports, or the daemon's tenant_defaults.allow_public_ports)", tenant)
		}
	}
	e, done, err := m.use(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer done()
	if public {
		if other, ok := m.publicOwner(id, port); ok && other != e {
			return nil, errdefs.New(errdefs.ErrConflict,
				"port %d of a session named %q is public already (another tenant's): public ports are found by session id, so use another id", port, id)
		}
	}
	e.mu.Lock()
	if e.public == nil {
		e.public = map[int]bool{}
	}
	if public {
		e.public[port] = true
	} else {
		delete(e.public, port)
	}
	e.mu.Unlock()
	ports, err := m.Ports(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	for _, p := range ports {
		if p.Port == port {
			return &p, nil
		}
	}
	return &Port{Port: port}, nil
}

// publicOwner finds the live session named id whose port is public.
func (m *Manager) publicOwner(id string, port int) (*entry, bool) {
	for _, e := range m.entriesWithID(id) {
		e.mu.Lock()
		pub := e.public[port] && !e.deleting
		e.mu.Unlock()
		if pub {
			return e, true
		}
	}
	return nil, false
}

// PublicPort reports whether a live session named id serves port
// publicly, and the tenant that owns it, for a caller without
// credentials.
func (m *Manager) PublicPort(id string, port int) (tenant string, ok bool) {
	e, ok := m.publicOwner(id, port)
	if !ok {
		return "", false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rec.Tenant, true
}

// DialPort connects to port on a session's loopback, inside its sandbox.
// The session counts as in use until the connection is closed, so that a
// browser tab or a port-forward that stays open keeps it from its idle
// TTL. Nothing listening is ErrUnavailable.
func (m *Manager) DialPort(ctx context.Context, tenant, id string, port int) (net.Conn, error) {
	if err := checkPort(port); err != nil {
		return nil, err
	}
	e, done, err := m.use(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	c, err := e.sb.DialPort(ctx, port)
	if err != nil {
		done()
		if errdefs.ClassOf(err) == errdefs.ErrUnavailable {
			select {
			case <-e.sb.Done():
				return nil, m.sandboxErr(e, id, err)
			default:
			}
		}
		return nil, err
	}
	return &portConn{Conn: c, done: done}, nil
}

// portConn releases its session when closed.
type portConn struct {
	net.Conn
	once sync.Once
	done func()
}

func (c *portConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.done)
	return err
}

// CloseWrite half-closes the connection, when the connection can.
func (c *portConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
