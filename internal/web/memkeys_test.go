package web

import (
	"context"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/errdefs"
)

// memKeys is an auth.KeyStore in memory.
type memKeys struct {
	mu   sync.Mutex
	keys map[string]*auth.Key
	hash map[string][]byte
}

func (m *memKeys) CreateKey(_ context.Context, k *auth.Key, hash []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := *k
	m.keys[k.ID], m.hash[k.ID] = &c, hash
	return nil
}

func (m *memKeys) GetKey(_ context.Context, id string) (*auth.Key, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.keys[id]
	if k == nil {
		return nil, nil, errdefs.New(errdefs.ErrNotFound, "no key %s", id)
	}
	c := *k
	return &c, m.hash[id], nil
}

func (m *memKeys) ListKeys(context.Context, string) ([]*auth.Key, error) { return nil, nil }

func (m *memKeys) RevokeKey(_ context.Context, id string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k := m.keys[id]; k != nil && k.RevokedAt == nil {
		k.RevokedAt = &at
	}
	return nil
}

func (m *memKeys) CountKeys(context.Context) (int, error) { return len(m.keys), nil }

func newMemKeys() *memKeys { return &memKeys{keys: map[string]*auth.Key{}, hash: map[string][]byte{}} }
