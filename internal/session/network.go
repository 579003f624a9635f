package session

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/network/rules"
)

// Network gives sessions egress beyond loopback (internal/network
// implements it on this host's kernel). Policies are a mode ("none",
// "open", "allowlist") with allow and deny rules as the caller wrote them.
type Network interface {
	// Check validates a policy; its error is the request's fault.
	Check(p NetworkPolicy) error
	// Attach links the sandbox name, whose PID 1 is pid, to the outside
	// under p, and returns the address of its name server.
	Attach(name string, pid int, p NetworkPolicy) (nameserver string, err error)
	// Update replaces an attached sandbox's policy whole, or not at all.
	Update(name string, p NetworkPolicy) error
	// Detach removes all the sandbox's network; one never attached is fine.
	Detach(name string) error
	// Denials lists what the sandbox's policy refused lately, oldest
	// first; ok is false for a sandbox that is not attached.
	Denials(name string) (d []NetworkDenial, ok bool)
	// Policy is the attached sandbox's current policy.
	Policy(name string) (p NetworkPolicy, ok bool)
	// Adopt re-attaches the network an earlier daemon kept for the
	// sandbox name, whose PID 1 is pid (a restart with --shutdown=keep).
	Adopt(name string, pid int) error
	// Traffic is the bytes the sandbox's link carried in and out since
	// it was attached; ok is false for a sandbox that is not attached.
	Traffic(name string) (in, out uint64, ok bool)
}

// NetworkPolicy is a session's egress policy.
type NetworkPolicy struct {
	Mode        string
	Allow, Deny []string
}

// NetworkDenial is one connection or name a session's policy refused.
type NetworkDenial struct {
	Time   time.Time
	Host   string
	Port   int
	Proto  string
	Reason string
}

// networkPolicy is the policy a create asks for, with the mode filled in.
func networkPolicy(req *CreateRequest) NetworkPolicy {
	p := NetworkPolicy{Mode: req.Network, Allow: req.NetworkAllow, Deny: req.NetworkDeny}
	if p.Mode == "" {
		p.Mode = "none"
		if len(p.Allow) > 0 {
			p.Mode = "allowlist"
		}
	}
	return p
}

// checkNetwork validates a create's network; mode none needs no network
// service, the others do. A request that names no network gets the
// daemon's default.
func (m *Manager) checkNetwork(req *CreateRequest) (string, error) {
	if req.Network == "" && len(req.NetworkAllow) == 0 && len(req.NetworkDeny) == 0 && m.net != nil &&
		m.cfg.DefaultNetwork != "" && m.cfg.DefaultNetwork != "none" {
		req.Network, req.NetworkAllow, req.networkDefaulted = m.cfg.DefaultNetwork, m.cfg.DefaultNetworkAllow, true
	}
	p := networkPolicy(req)
	if p.Mode == "none" && len(p.Allow) == 0 && len(p.Deny) == 0 {
		return "none", nil
	}
	if m.net == nil {
		if p.Mode != "none" && p.Mode != "open" && p.Mode != "allowlist" {
			return "", invalid("network mode %q is not one of none, open, allowlist", p.Mode)
		}
		return "", invalid("network %q is not available: this daemon gives sessions no egress (it has no network setup)", p.Mode)
	}
	if err := m.net.Check(p); err != nil {
		return "", invalid("%s", err.Error())
	}
	return p.Mode, nil
}

// checkNetworkCeiling holds a create to its tenant's network ceiling:
// asking beyond it is permission_denied with the reason; the daemon's
// default beyond it becomes none.
func (m *Manager) checkNetworkCeiling(tenant string, tl TenantLimits, req *CreateRequest, rec *Session) error {
	if rec.Network == "none" {
		return nil
	}
	reason, err := beyondCeiling(tl, networkPolicy(req))
	if err != nil || reason == "" {
		return err
	}
	if req.networkDefaulted {
		req.Network, req.NetworkAllow, rec.Network = "none", nil, "none"
		return nil
	}
	return errdefs.New(errdefs.ErrPermissionDenied, "tenant %s may not ask for this network: %s", tenant, reason)
}

// beyondCeiling says why p exceeds the tenant's network ceiling ("" when
// it does not).
func beyondCeiling(tl TenantLimits, p NetworkPolicy) (string, error) {
	c, err := rules.ParseCeiling(tl.NetworkMaxMode, tl.NetworkAllow)
	if err != nil {
		return "", fmt.Errorf("the tenant's network ceiling: %w", err)
	}
	var allow []rules.Rule
	for _, s := range p.Allow {
		r, err := rules.Parse(s)
		if err != nil {
			return "", invalid("allow rule %q: %s", s, err)
		}
		allow = append(allow, r)
	}
	return c.Permits(p.Mode, allow), nil
}

// attachNetwork gives a started sandbox its network and points its
// resolv.conf at the forwarder. On error the caller destroys the sandbox.
func (m *Manager) attachNetwork(ctx context.Context, rec *Session, sb Sandbox, req *CreateRequest) error {
	if rec.Network == "none" || rec.Network == "" {
		return nil
	}
	ns, err := m.net.Attach(rec.Name, sb.Pid(), networkPolicy(req))
	if err != nil {
		return errdefs.New(errdefs.ErrUnavailable, "could not give the session its network: %w", err)
	}
	conf := "# warren: the session's name server answers the names its network policy allows.\nnameserver " + ns + "\noptions ndots:0\n"
	if _, err := sb.WriteFile(ctx, "/etc/resolv.conf", 0o644, 4096, strings.NewReader(conf)); err != nil {
		if derr := m.net.Detach(rec.Name); derr != nil {
			m.logFor(ctx).Warn("detach the network of a session that failed to start", "session_id", rec.ID, "error", derr)
		}
		return fmt.Errorf("write the session's /etc/resolv.conf: %w", err)
	}
	return nil
}

// addTraffic puts a session's network bytes into its usage.
func (m *Manager) addTraffic(name string, u *Usage) {
	if m.net == nil {
		return
	}
	if in, out, ok := m.net.Traffic(name); ok {
		u.NetworkInBytes, u.NetworkOutBytes = in, out
	}
}

// SandboxOwner returns the tenant and id of the session whose sandbox is
// name (the network's denials name sandboxes).
func (m *Manager) SandboxOwner(name string) (tenant, id string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, e := range m.live {
		if e.rec != nil && e.snapshot().Name == name {
			return k.tenant, k.id, true
		}
	}
	return "", "", false
}

// adoptNetwork re-attaches an adopted session's network; one that cannot
// come back leaves the session running without egress (its remains are
// removed once every session is adopted).
func (m *Manager) adoptNetwork(r *Session, pid int) {
	if m.net == nil || r.Network == "none" || r.Network == "" {
		return
	}
	if err := m.net.Adopt(r.Name, pid); err != nil {
		m.log.Warn("an adopted session lost its network", "session_id", r.ID, "tenant", r.Tenant, "sandbox", r.Name, "error", err)
	}
}

// detachNetwork removes a deleted sandbox's network, if it had one.
func (m *Manager) detachNetwork(name string) {
	if m.net == nil {
		return
	}
	if err := m.net.Detach(name); err != nil {
		m.log.Error("remove a session's network", "sandbox", name, "error", err)
	}
}

// networkOf returns a running session's sandbox name.
func (m *Manager) networkOf(ctx context.Context, tenant, id string) (string, error) {
	e, done, err := m.use(ctx, tenant, id)
	if err != nil {
		return "", err
	}
	defer done()
	return e.snapshot().Name, nil
}

// SessionNetwork returns a session's network policy.
func (m *Manager) SessionNetwork(ctx context.Context, tenant, id string) (*NetworkPolicy, error) {
	name, err := m.networkOf(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if m.net != nil {
		if p, ok := m.net.Policy(name); ok {
			return &p, nil
		}
	}
	return &NetworkPolicy{Mode: "none"}, nil
}

// SetSessionNetwork changes a running session's policy live: the new
// policy applies whole, or the old one stays. A session created with mode
// none has no link to change (409: create it with a network); changing to
// none is refused likewise (delete and create it).
func (m *Manager) SetSessionNetwork(ctx context.Context, tenant, id string, p NetworkPolicy) (*NetworkPolicy, error) {
	name, err := m.networkOf(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if m.net == nil {
		return nil, errdefs.New(errdefs.ErrUnavailable, "this daemon gives sessions no egress (it has no network setup)")
	}
	cur, ok := m.net.Policy(name)
	if !ok {
		return nil, errdefs.New(errdefs.ErrConflict, "session %q was created without a network (mode none); its network cannot be changed live: create it with one", id)
	}
	if p.Mode == "" {
		p.Mode = cur.Mode
	}
	if p.Mode == "none" {
		return nil, errdefs.New(errdefs.ErrConflict, "a running session cannot change to mode none; delete it, or use allowlist with no rules")
	}
	if err := m.net.Check(p); err != nil {
		return nil, invalid("%s", err.Error())
	}
	tl, err := m.tenantLimits(ctx, tenant)
	if err != nil {
		return nil, err
	}
	if reason, err := beyondCeiling(tl, p); err != nil {
		return nil, err
	} else if reason != "" {
		return nil, errdefs.New(errdefs.ErrPermissionDenied, "tenant %s may not ask for this network: %s", tenant, reason)
	}
	if err := m.net.Update(name, p); err != nil {
		return nil, fmt.Errorf("change the session's network: %w", err)
	}
	e, err := m.lookup(tenant, id)
	if err == nil {
		e.mu.Lock()
		e.rec.Network = p.Mode
		rec := *e.rec
		e.mu.Unlock()
		if err := m.store.UpdateSession(ctx, &rec); err != nil {
			m.log.Warn("record a session's network mode", "session_id", id, "tenant", tenant, "error", err)
		}
	}
	return &p, nil
}

// NetworkDenials lists what a session's policy refused lately.
func (m *Manager) NetworkDenials(ctx context.Context, tenant, id string) ([]NetworkDenial, error) {
	name, err := m.networkOf(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if m.net == nil {
		return nil, nil
	}
	d, _ := m.net.Denials(name)
	return d, nil
}
