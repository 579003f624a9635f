package daemon

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"

	"github.com/warrenhq/warren/internal/audit"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/session"
)

// openNetwork makes the sessions' network service from the [network]
// settings. Nothing on the host changes until a session asks for egress.
func (d *Daemon) openNetwork() (session.Network, error) {
	c := d.cfg.Network
	nc := network.Config{Egress: c.EgressInterface, Upstream: c.DNSUpstream, NetNS: c.NetNS, Log: d.log.With("component", "network")}
	if c.Range != "" {
		p, err := netip.ParsePrefix(c.Range)
		if err != nil {
			return nil, fmt.Errorf("network.range %q: %w", c.Range, err)
		}
		nc.Range = p
	}
	for _, s := range c.AllowPrivate {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("network.allow_private %q: %w", s, err)
		}
		nc.AllowPrivate = append(nc.AllowPrivate, p)
	}
	for _, u := range c.DNSUpstream {
		if _, err := netip.ParseAddrPort(u); err != nil {
			if _, err := netip.ParseAddr(u); err != nil {
				return nil, fmt.Errorf("network.dns_upstream %q: not an ip or ip:port", u)
			}
		}
	}
	nc.MaxConnections = c.MaxConnections
	nc.StateDir = filepath.Join(d.cfg.DataDir, "network")
	nc.OnDenial = d.auditDenial
	m, err := network.New(nc)
	if err != nil {
		// A host without what egress needs still runs sessions: they
		// get mode none, and asking for more is refused with a reason.
		d.log.Warn("sessions get no egress on this host: setting up their network failed", "error", err)
		return nil, nil
	}
	// What a daemon before this one left (killed, or stopped with keep)
	// goes now: an old policy with no forwarder behind it stays in force
	// no longer than this.
	if err := m.Reconcile(); err != nil {
		d.log.Warn("remove the network an earlier daemon left", "error", err)
	}
	d.network = m
	return network.ForSessions(m), nil
}

// closeNetwork removes every session's link and warren's nftables table;
// a shutdown that keeps sessions leaves their links and rules, and saves
// their state for the next daemon to adopt (docs/NETWORKING.md).
func (d *Daemon) closeNetwork() {
	if d.network == nil {
		return
	}
	if d.keep {
		if err := d.network.Release(); err != nil {
			d.log.Error("keep the sessions' network for the next daemon", "error", err)
		}
	} else if err := d.network.Close(); err != nil {
		d.log.Error("remove the sessions' network", "error", err)
	}
	d.network = nil
}

// finishNetworkAdoption removes what the previous daemon left of sessions
// this one did not adopt; after the session manager's Recover.
func (d *Daemon) finishNetworkAdoption() {
	if d.network == nil {
		return
	}
	if err := d.network.FinishAdoption(); err != nil {
		d.log.Warn("remove the network of sessions not adopted", "error", err)
	}
}

// auditDenial writes a network denial to the audit log: the session, the
// protocol, host and port and the kind of reason; never payloads.
func (d *Daemon) auditDenial(sandbox string, den network.Denial) {
	if d.edge == nil || d.manager == nil || d.edge.AuditLog() == nil {
		return
	}
	tenant, id, ok := d.manager.SandboxOwner(sandbox)
	if !ok {
		return
	}
	target := fmt.Sprintf("%s %s", den.Proto, den.Host)
	if den.Port != 0 {
		target = fmt.Sprintf("%s %s", den.Proto, net.JoinHostPort(den.Host, fmt.Sprint(den.Port)))
	}
	rec := audit.Record{Time: den.Time, Tenant: tenant, Session: id, Op: "network denial", Target: target + " (" + den.Kind + ")", Outcome: "permission_denied"}
	if err := d.edge.AuditLog().Record(rec); err != nil {
		d.log.Error("audit record lost", "op", rec.Op, "error", err)
	}
}
