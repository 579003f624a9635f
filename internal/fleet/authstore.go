package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/fleet/registry"
)

// The registry's object kinds for the fleet's auth state.
const (
	KindKey    = "keys"
	KindTenant = "tenants"
)

// LocalAuth is a node's own store of keys and tenants (store.SQLite).
type LocalAuth interface {
	auth.KeyStore
	auth.TenantStore
}

// AuthStore keeps API keys and tenants' settings in the registry, so that
// they are the fleet's (docs/FLEET.md, "Tenants, keys, quotas"): a key made
// through one node works on every node at once, a revocation or a tenant's
// new quota reaches every node through its watch. Reads come from the
// node's watch-fed cache; a key the cache does not hold yet (made on
// another node a moment ago) is read from the registry. It implements
// auth.KeyStore and auth.TenantStore.
type AuthStore struct {
	n *Node
	// local is the node's own store: until Import copied its keys into
	// the registry, a key the registry does not know is looked up there,
	// so the admin key a node made at its first start works on it at
	// once.
	local    LocalAuth
	imported atomic.Bool
	// misses bounds the registry reads for what the synced cache does not
	// hold: a key made on another node a moment ago is worth one, but
	// requests with made-up key ids must not become a load on etcd.
	misses *rate.Limiter
}

// missRate is how many reads per second (in bursts of as many) a node
// makes for keys and tenants its synced cache does not hold; past it, a
// miss is "not found" until the watch brings the record.
const missRate = 50

// AuthStore returns the node's fleet-wide key and tenant store over its
// own local one (see Import).
func (n *Node) AuthStore(local LocalAuth) *AuthStore {
	return &AuthStore{n: n, local: local, misses: rate.NewLimiter(missRate, missRate)}
}

// OnAuthChange sets what hears of a key (by id) or tenant (by name) that
// changed anywhere in the fleet: the daemon drops them from its caches.
func (n *Node) OnAuthChange(key, tenant func(string)) {
	n.cache.OnObject(func(kind, name string) {
		switch kind {
		case KindKey:
			key(name)
		case KindTenant:
			tenant(name)
		}
	})
}

// keyRecord is a key's object: its public record and its secret's hash.
type keyRecord struct {
	ID        string     `json:"id"`
	Tenant    string     `json:"tenant"`
	Name      string     `json:"name,omitempty"`
	Admin     bool       `json:"admin,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Hash      []byte     `json:"hash"`
}

func encodeKey(k *auth.Key, hash []byte) []byte {
	b, _ := json.Marshal(keyRecord{ID: k.ID, Tenant: k.Tenant, Name: k.Name, Admin: k.Admin, CreatedAt: k.CreatedAt,
		ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, Hash: hash})
	return b
}

func decodeKey(o registry.Object) (*auth.Key, []byte, error) {
	var r keyRecord
	if err := json.Unmarshal(o.Value, &r); err != nil {
		return nil, nil, fmt.Errorf("fleet registry: API key %s: %w", o.Name, err)
	}
	return &auth.Key{ID: r.ID, Tenant: r.Tenant, Name: r.Name, Admin: r.Admin, CreatedAt: r.CreatedAt,
		ExpiresAt: r.ExpiresAt, RevokedAt: r.RevokedAt}, r.Hash, nil
}

// object reads kind/name from the cache, else from the registry (and
// keeps what it read).
func (s *AuthStore) object(ctx context.Context, kind, name string) (registry.Object, error) {
	if o, ok := s.n.cache.Object(kind, name); ok {
		return o, nil
	}
	select {
	case <-s.n.cache.Synced():
		if !s.misses.Allow() {
			return registry.Object{}, errdefs.New(errdefs.ErrNotFound, "%s %q not found", kind, name)
		}
	default:
	}
	o, err := s.n.reg.GetObject(ctx, kind, name)
	if err != nil {
		return registry.Object{}, err
	}
	s.n.cache.putObject(o, false)
	return o, nil
}

// objects lists kind from the cache once it has a snapshot, else from a
// snapshot of the registry.
func (s *AuthStore) objects(ctx context.Context, kind string) ([]registry.Object, error) {
	select {
	case <-s.n.cache.Synced():
		return s.n.cache.Objects(kind), nil
	default:
	}
	snap, err := s.n.reg.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var out []registry.Object
	for _, o := range snap.Objects {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out, nil
}

// put writes an object and puts it in the cache at once, so the node
// reads its own write before the watch brings it.
func (s *AuthStore) put(ctx context.Context, o registry.Object, rev int64) error {
	at, err := s.n.reg.PutObject(ctx, o, rev)
	if err != nil {
		return err
	}
	o.Rev = at
	s.n.cache.putObject(o, false)
	return nil
}

// CreateKey stores a new key fleet-wide (auth.KeyStore).
func (s *AuthStore) CreateKey(ctx context.Context, k *auth.Key, hash []byte) error {
	return s.put(ctx, registry.Object{Kind: KindKey, Name: k.ID, Value: encodeKey(k, hash)}, 0)
}

// GetKey returns a key and its hash (auth.KeyStore).
func (s *AuthStore) GetKey(ctx context.Context, id string) (*auth.Key, []byte, error) {
	o, err := s.object(ctx, KindKey, id)
	if err != nil {
		if errdefs.Is(err, errdefs.ErrNotFound) && !s.imported.Load() && s.local != nil {
			return s.local.GetKey(ctx, id)
		}
		if errdefs.Is(err, errdefs.ErrNotFound) {
			return nil, nil, errdefs.New(errdefs.ErrNotFound, "API key %q not found", id)
		}
		return nil, nil, err
	}
	return decodeKey(o)
}

// ListKeys returns the tenant's keys, or every key for "" (auth.KeyStore).
func (s *AuthStore) ListKeys(ctx context.Context, tenant string) ([]*auth.Key, error) {
	objs, err := s.objects(ctx, KindKey)
	if err != nil {
		return nil, err
	}
	var out []*auth.Key
	for _, o := range objs {
		k, _, err := decodeKey(o)
		if err != nil {
			return nil, err
		}
		if tenant == "" || k.Tenant == tenant {
			out = append(out, k)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// RevokeKey marks a key revoked fleet-wide, keeping a first revocation's
// time (auth.KeyStore). It compares the record's revision, so a revocation
// racing another change of the key is read again, not lost.
func (s *AuthStore) RevokeKey(ctx context.Context, id string, at time.Time) error {
	for range maxRetries {
		o, err := s.n.reg.GetObject(ctx, KindKey, id)
		if err != nil {
			if errdefs.Is(err, errdefs.ErrNotFound) {
				return errdefs.New(errdefs.ErrNotFound, "API key %q not found", id)
			}
			return err
		}
		k, hash, err := decodeKey(o)
		if err != nil {
			return err
		}
		if k.RevokedAt != nil {
			s.n.cache.putObject(o, false)
			return nil
		}
		t := at.UTC()
		k.RevokedAt = &t
		err = s.put(ctx, registry.Object{Kind: KindKey, Name: id, Value: encodeKey(k, hash)}, o.Rev)
		if !errdefs.Is(err, errdefs.ErrConflict) {
			return err
		}
	}
	return errdefs.New(errdefs.ErrUnavailable, "revoke API key %q: it kept changing; try again", id)
}

// maxRetries bounds the compare-and-swap rounds of a revocation.
const maxRetries = 16

// CountKeys counts the fleet's keys (auth.KeyStore).
func (s *AuthStore) CountKeys(ctx context.Context) (int, error) {
	objs, err := s.objects(ctx, KindKey)
	return len(objs), err
}

// tenantRecord is a tenant's object.
type tenantRecord struct {
	Name      string      `json:"name"`
	Quota     auth.Quota  `json:"quota"`
	Policy    auth.Policy `json:"policy"`
	UpdatedAt time.Time   `json:"updated_at"`
}

func decodeTenant(o registry.Object) (*auth.Tenant, error) {
	var r tenantRecord
	if err := json.Unmarshal(o.Value, &r); err != nil {
		return nil, fmt.Errorf("fleet registry: tenant %s: %w", o.Name, err)
	}
	return &auth.Tenant{Name: r.Name, Quota: r.Quota, Policy: r.Policy, UpdatedAt: r.UpdatedAt}, nil
}

// GetTenant returns a tenant's settings (auth.TenantStore).
func (s *AuthStore) GetTenant(ctx context.Context, name string) (*auth.Tenant, error) {
	o, err := s.object(ctx, KindTenant, name)
	if err != nil {
		if errdefs.Is(err, errdefs.ErrNotFound) {
			return nil, errdefs.New(errdefs.ErrNotFound, "tenant %q not found", name)
		}
		return nil, err
	}
	return decodeTenant(o)
}

// PutTenant creates or replaces a tenant's settings fleet-wide
// (auth.TenantStore).
func (s *AuthStore) PutTenant(ctx context.Context, t *auth.Tenant) error {
	if err := t.Validate(); err != nil {
		return err
	}
	updated := t.UpdatedAt
	if updated.IsZero() {
		updated = time.Now().UTC()
	}
	b, err := json.Marshal(tenantRecord{Name: t.Name, Quota: t.Quota, Policy: t.Policy, UpdatedAt: updated})
	if err != nil {
		return err
	}
	return s.put(ctx, registry.Object{Kind: KindTenant, Name: t.Name, Value: b}, -1)
}

// ListTenants returns every tenant's settings by name (auth.TenantStore).
func (s *AuthStore) ListTenants(ctx context.Context) ([]*auth.Tenant, error) {
	objs, err := s.objects(ctx, KindTenant)
	if err != nil {
		return nil, err
	}
	out := make([]*auth.Tenant, 0, len(objs))
	for _, o := range objs {
		t, err := decodeTenant(o)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeleteTenant removes a tenant's settings fleet-wide (auth.TenantStore).
func (s *AuthStore) DeleteTenant(ctx context.Context, name string) error {
	if _, err := s.object(ctx, KindTenant, name); err != nil {
		if errdefs.Is(err, errdefs.ErrNotFound) {
			return errdefs.New(errdefs.ErrNotFound, "tenant %q not found", name)
		}
		return err
	}
	if err := s.n.reg.DeleteObject(ctx, KindTenant, name); err != nil {
		return err
	}
	s.n.cache.putObject(registry.Object{Kind: KindTenant, Name: name, Rev: s.n.cache.Rev()}, true)
	return nil
}

// Import copies a node's own keys and tenants into the registry, keeping
// what the fleet has under the same id or name: a node that joins brings
// its admin key (made at its first start) and its settings. It runs until
// it succeeded or ctx ends, retrying while the registry cannot answer.
//
// It runs once per fleet: marker (a file in the node's data directory)
// then holds a digest of the fleet's secret, and later starts in the same
// fleet skip the copy, so that a tenant deleted in the fleet does not come
// back from a node's old local record. A node that joins another fleet
// (another secret) copies again.
func (s *AuthStore) Import(ctx context.Context, marker string) error {
	for {
		err := s.importMarked(ctx, marker)
		if err == nil {
			s.imported.Store(true)
			return nil
		}
		if !errdefs.Is(err, errdefs.ErrUnavailable) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (s *AuthStore) importMarked(ctx context.Context, marker string) error {
	secret, err := s.n.reg.Secret(ctx)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(append([]byte("warren fleet import\x00"), secret...))
	want := hex.EncodeToString(sum[:])
	if b, err := os.ReadFile(marker); err == nil && strings.TrimSpace(string(b)) == want {
		return nil
	}
	if err := s.importOnce(ctx, s.local); err != nil {
		return err
	}
	return os.WriteFile(marker, []byte(want+"\n"), 0o600)
}

func (s *AuthStore) importOnce(ctx context.Context, local LocalAuth) error {
	keys, err := local.ListKeys(ctx, "")
	if err != nil {
		return err
	}
	for _, k := range keys {
		_, hash, err := local.GetKey(ctx, k.ID)
		if err != nil {
			return err
		}
		if err := s.put(ctx, registry.Object{Kind: KindKey, Name: k.ID, Value: encodeKey(k, hash)}, 0); err != nil && !errdefs.Is(err, errdefs.ErrConflict) {
			return err
		}
	}
	tenants, err := local.ListTenants(ctx)
	if err != nil {
		return err
	}
	for _, t := range tenants {
		b, err := json.Marshal(tenantRecord{Name: t.Name, Quota: t.Quota, Policy: t.Policy, UpdatedAt: t.UpdatedAt})
		if err != nil {
			return err
		}
		if err := s.put(ctx, registry.Object{Kind: KindTenant, Name: t.Name, Value: b}, 0); err != nil && !errdefs.Is(err, errdefs.ErrConflict) {
			return err
		}
	}
	return nil
}
