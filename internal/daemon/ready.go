package daemon

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/cgroup"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// readyCache is how long a readiness verdict stands: /readyz is public, and
// each check writes to the store, so a flood of probes costs one write a
// second at most.
const readyCache = time.Second

// storeProbeTimeout bounds the store's part of a readiness check.
const storeProbeTimeout = 2 * time.Second

// readiness answers /readyz: the daemon is ready when it is not shutting
// down, the data directory's filesystem has the free space new sessions
// need, warren's cgroup parent can take sandboxes, and the store takes a
// real write.
type readiness struct {
	store    *store.SQLite     // (immutable)
	cgroups  *cgroup.Hierarchy // (immutable)
	manager  *session.Manager  // (immutable)
	stopping *atomic.Bool      // set when Shutdown begins (immutable)

	mu  sync.Mutex // guards at and err; held during a check
	at  time.Time  // when err was found
	err error      // the last verdict
}

// check returns nil when the daemon is ready, else an ErrUnavailable that
// says why.
func (r *readiness) check(ctx context.Context) error {
	if r.stopping.Load() {
		return errdefs.New(errdefs.ErrUnavailable, "the daemon is shutting down")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.at.IsZero() && time.Since(r.at) < readyCache {
		return r.err
	}
	// A probe that hangs up must not leave its cancellation as the verdict.
	r.err = r.probe(context.WithoutCancel(ctx))
	r.at = time.Now()
	return r.err
}

func (r *readiness) probe(ctx context.Context) error {
	if err := r.manager.CheckDisk(); err != nil {
		return err
	}
	if err := r.cgroups.Check(); err != nil {
		return errdefs.New(errdefs.ErrUnavailable, "the sandbox runtime is not usable: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, storeProbeTimeout)
	defer cancel()
	if err := r.store.Heartbeat(ctx); err != nil {
		return errdefs.New(errdefs.ErrUnavailable, "the store does not take writes: %w", err)
	}
	return nil
}
