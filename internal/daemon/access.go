package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// AdminKeyFile is where the daemon leaves the admin key it creates on its
// first start, in the data directory, readable by root only.
const AdminKeyFile = "admin.key"

// BootstrapTenant is the tenant of the first admin key.
const BootstrapTenant = "default"

// bootstrapAdminKey creates an admin key when the store has no key at all,
// writes it to AdminKeyFile (0600) and returns it; "" if keys exist. The
// file is written before the key is stored, so a crash between the two
// leaves a useless file, never a key nobody has.
func bootstrapAdminKey(ctx context.Context, keys auth.KeyStore, dataDir string) (string, error) {
	n, err := keys.CountKeys(ctx)
	if err != nil || n > 0 {
		return "", err
	}
	plaintext, k, hash, err := auth.GenerateKey(BootstrapTenant, "bootstrap admin", true, nil)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dataDir, AdminKeyFile)
	tmp := path + ".tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("write the admin key: %w", err)
	}
	_, werr := f.WriteString(plaintext + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("write the admin key: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("write the admin key: %w", err)
	}
	if err := keys.CreateKey(ctx, k, hash); err != nil {
		return "", fmt.Errorf("store the admin key: %w", err)
	}
	return plaintext, nil
}

// tenantLimits gives the session manager each tenant's limits: its stored
// settings over the daemon's defaults. Settings are cached, and the cache
// entry dropped when the API changes them.
type tenantLimits struct {
	store    auth.TenantStore
	defaults auth.Quota
	// publicPorts is tenant_defaults.allow_public_ports.
	publicPorts bool

	mu    sync.Mutex
	cache map[string]session.TenantLimits
}

func newTenantLimits(store auth.TenantStore, defaults auth.Quota, publicPorts bool) *tenantLimits {
	return &tenantLimits{store: store, defaults: defaults, publicPorts: publicPorts, cache: map[string]session.TenantLimits{}}
}

// Limits implements session.Tenants.
func (t *tenantLimits) Limits(ctx context.Context, tenant string) (session.TenantLimits, error) {
	t.mu.Lock()
	l, ok := t.cache[tenant]
	t.mu.Unlock()
	if ok {
		return l, nil
	}
	rec, err := t.store.GetTenant(ctx, tenant)
	switch {
	case errdefs.Is(err, errdefs.ErrNotFound):
		rec = &auth.Tenant{Name: tenant}
	case err != nil:
		return session.TenantLimits{}, fmt.Errorf("tenant %s settings: %w", tenant, err)
	}
	q := rec.Quota
	l = session.TenantLimits{
		MaxSessions:    orDefault(q.MaxSessions, t.defaults.MaxSessions),
		MaxMemoryMB:    orDefault(q.MaxMemoryMB, t.defaults.MaxMemoryMB),
		MaxCPUs:        orDefault(q.MaxCPUs, t.defaults.MaxCPUs),
		MaxLifetime:    orDefault(q.MaxLifetime, t.defaults.MaxLifetime),
		MaxExecTimeout: orDefault(q.MaxExecTimeout, t.defaults.MaxExecTimeout),
		MaxWorkspaces:  orDefault(q.MaxWorkspaces, t.defaults.MaxWorkspaces),
		MaxSnapshots:   orDefault(q.MaxSnapshots, t.defaults.MaxSnapshots),
		Allow:          rec.Policy.Allow,
		Deny:           rec.Policy.Deny,
		PublicPorts:    t.publicPorts,
		NetworkMaxMode: rec.Policy.NetworkMaxMode,
		NetworkAllow:   rec.Policy.NetworkAllow,
	}
	if p := rec.Policy.PublicPorts; p != nil {
		l.PublicPorts = *p
	}
	t.mu.Lock()
	t.cache[tenant] = l
	t.mu.Unlock()
	return l, nil
}

// orDefault is a tenant's own setting, or the default where it has none.
func orDefault[T comparable](own, def T) T {
	var zero T
	if own != zero {
		return own
	}
	return def
}

// forget drops a tenant's cached limits after its settings changed.
func (t *tenantLimits) forget(tenant string) {
	t.mu.Lock()
	delete(t.cache, tenant)
	t.mu.Unlock()
}
