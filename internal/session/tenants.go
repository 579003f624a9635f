package session

import (
	"context"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// TenantLimits are one tenant's quotas and command policy. Zero fields
// leave the daemon's own limits in force.
type TenantLimits struct {
	MaxSessions    int
	MaxMemoryMB    int64
	MaxCPUs        float64
	MaxLifetime    time.Duration
	MaxExecTimeout time.Duration
	MaxWorkspaces  int
	MaxSnapshots   int
	// Allow, when not empty, lists the only programs exec may start; Deny
	// lists programs it may not. A convenience for operators, not a
	// security boundary: the sandbox is the boundary.
	Allow, Deny []string
	// PublicPorts lets the tenant's sessions serve ports without
	// authentication (SetPortPublic).
	PublicPorts bool
	// NetworkMaxMode and NetworkAllow are the tenant's network ceiling
	// (rules.Ceiling): the widest mode ("" : open) and, when not empty,
	// the maximum allow-list.
	NetworkMaxMode string
	NetworkAllow   []string
}

// Tenants gives the manager each tenant's limits.
type Tenants interface {
	Limits(ctx context.Context, tenant string) (TenantLimits, error)
}

func (m *Manager) tenantLimits(ctx context.Context, tenant string) (TenantLimits, error) {
	if m.tenants == nil {
		return TenantLimits{}, nil
	}
	return m.tenants.Limits(ctx, tenant)
}

func quotaErr(tenant, quota string, format string, args ...any) error {
	return errdefs.New(errdefs.ErrResourceExhausted, "tenant %s is over its %s quota: "+format, append([]any{tenant, quota}, args...)...)
}

// checkQuotaLocked checks a new session against its tenant's quota.
//
// Preconditions: m.mu is held, so concurrent creates cannot both pass.
func (m *Manager) checkQuotaLocked(tl TenantLimits, rec *Session) error {
	if tl.MaxLifetime > 0 && rec.MaxLifetime > tl.MaxLifetime {
		return quotaErr(rec.Tenant, "max_lifetime_seconds", "sessions may live %v, not %v", tl.MaxLifetime, rec.MaxLifetime)
	}
	if tl.MaxSessions == 0 && tl.MaxMemoryMB == 0 && tl.MaxCPUs == 0 {
		return nil
	}
	n, mem, cpus := 0, rec.Limits.MemoryMB, rec.Limits.CPUs
	for k, e := range m.live {
		if k.tenant != rec.Tenant {
			continue
		}
		n++
		e.mu.Lock()
		mem += e.rec.Limits.MemoryMB
		cpus += e.rec.Limits.CPUs
		e.mu.Unlock()
	}
	switch {
	case tl.MaxSessions > 0 && n >= tl.MaxSessions:
		return quotaErr(rec.Tenant, "max_sessions", "it has %d sessions, the most it may", n)
	case tl.MaxMemoryMB > 0 && mem > tl.MaxMemoryMB:
		return quotaErr(rec.Tenant, "max_memory_mb", "its sessions would hold %d MiB of memory limits, more than %d", mem, tl.MaxMemoryMB)
	case tl.MaxCPUs > 0 && cpus > tl.MaxCPUs:
		return quotaErr(rec.Tenant, "max_cpus", "its sessions would hold %g CPUs, more than %g", cpus, tl.MaxCPUs)
	}
	return nil
}

// program is the name of the program a command starts: argv[0]'s base
// name, or the first word of a shell command after variable assignments.
func program(command string, argv []string) string {
	if len(argv) > 0 {
		return path.Base(argv[0])
	}
	for _, w := range strings.Fields(command) {
		if strings.Contains(w, "=") && !strings.HasPrefix(w, "=") {
			continue // FOO=bar cmd
		}
		return path.Base(strings.TrimLeft(w, "({!"))
	}
	return ""
}

// checkPolicy applies a tenant's command policy to a command.
func checkPolicy(tenant string, tl TenantLimits, command string, argv []string) error {
	if len(tl.Allow) == 0 && len(tl.Deny) == 0 {
		return nil
	}
	prog := program(command, argv)
	if slices.Contains(tl.Deny, prog) {
		return errdefs.New(errdefs.ErrPermissionDenied, "tenant %s may not run %q", tenant, prog)
	}
	if len(tl.Allow) > 0 && !slices.Contains(tl.Allow, prog) {
		return errdefs.New(errdefs.ErrPermissionDenied, "tenant %s may run only %s, not %q", tenant, strings.Join(tl.Allow, ", "), prog)
	}
	return nil
}
