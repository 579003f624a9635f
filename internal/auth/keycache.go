package auth

import (
	"context"
	"sync"
	"time"
)

// keyCache keeps API key records the authenticator has read, so a request
// does not cost a database query (about a third of the daemon's CPU time
// for a small exec was spent there). Every change to a key goes through
// the Authenticator, which drops the key's entry; the TTL only bounds what
// a change made around it (by another process on the same store) could
// leave behind. Unknown ids are not cached: an attacker cycling ids cannot
// grow it.
type keyCache struct {
	mu      sync.Mutex
	entries map[string]cachedKey
	gen     uint64 // bumped by every invalidation
}

type cachedKey struct {
	key     *Key
	hash    []byte
	fetched time.Time
}

const (
	keyCacheTTL = 5 * time.Second
	keyCacheMax = 10000
)

// lookupKey is KeyStore.GetKey through the cache.
func (a *Authenticator) lookupKey(ctx context.Context, id string) (*Key, []byte, error) {
	c := &a.cache
	now := a.now()
	c.mu.Lock()
	e, ok := c.entries[id]
	gen := c.gen
	c.mu.Unlock()
	if ok && now.Sub(e.fetched) < keyCacheTTL && !now.Before(e.fetched) {
		return e.key, e.hash, nil
	}
	k, hash, err := a.keys.GetKey(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	// A revocation that ran while this read was in flight must not be
	// undone by storing what the read saw before it.
	if c.gen == gen {
		if c.entries == nil || len(c.entries) >= keyCacheMax {
			c.entries = map[string]cachedKey{}
		}
		c.entries[id] = cachedKey{key: k, hash: hash, fetched: now}
	}
	c.mu.Unlock()
	return k, hash, nil
}

// forget drops a key's entry; call it after the store changed the key.
func (c *keyCache) forget(id string) {
	c.mu.Lock()
	delete(c.entries, id)
	c.gen++
	c.mu.Unlock()
}

// Forget drops a key's cached record: the key changed in a store shared
// with other processes (a fleet's registry), not through this
// Authenticator.
func (a *Authenticator) Forget(id string) { a.cache.forget(id) }
