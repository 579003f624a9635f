package session

import (
	"context"
	"maps"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// PausedLabel marks a paused session: its processes are frozen (cgroup
// freezer) and every call that reaches into the sandbox is refused until
// Resume. It is a label, so the store keeps it and warren's own API shows
// it.
const PausedLabel = "warren.dev/paused"

// freezer is what a sandbox that can be paused offers (internal/sandbox's
// does); a runtime without it cannot pause its sessions.
type freezer interface {
	Freeze(ctx context.Context) error
	Thaw() error
}

// Paused reports whether a session record is paused.
func (s *Session) Paused() bool { return s.Labels[PausedLabel] != "" }

// Pause freezes every process of a running session (the cgroup freezer:
// memory, open files and sockets stay as they are) and marks it paused.
// Pausing a paused session is ErrConflict.
func (m *Manager) Pause(ctx context.Context, tenant, id string) (err error) {
	defer m.observe("pause", time.Now(), &err)
	e, done, err := m.use(ctx, tenant, id)
	if err != nil {
		return err
	}
	defer done()
	f, ok := e.sb.(freezer)
	if !ok {
		return errdefs.New(errdefs.ErrUnavailable, "this daemon's sandboxes cannot be paused")
	}
	e.mu.Lock()
	if e.rec.Paused() {
		e.mu.Unlock()
		return errdefs.New(errdefs.ErrConflict, "session %q is already paused", id)
	}
	e.mu.Unlock()
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := f.Freeze(fctx); err != nil {
		return m.sandboxErr(e, id, err)
	}
	if err := m.setLabels(ctx, e, map[string]string{PausedLabel: time.Now().UTC().Format(time.RFC3339Nano)}); err != nil {
		// The pause failed: the processes run on, or stay frozen with
		// a label that says otherwise if the thaw fails too, which the
		// log tells.
		if terr := f.Thaw(); terr != nil {
			m.logFor(ctx).Error("thaw a session whose pause failed", "session_id", id, "tenant", tenant, "error", terr)
		}
		return err
	}
	return nil
}

// Resume lets a paused session's processes run again. Resuming a session
// that is not paused does nothing and reports false.
func (m *Manager) Resume(ctx context.Context, tenant, id string) (resumed bool, err error) {
	defer m.observe("resume", time.Now(), &err)
	e, err := m.lookup(tenant, id)
	if err != nil {
		return false, err
	}
	<-e.ready
	if e.err != nil {
		return false, errdefs.New(errdefs.ErrNotFound, "session %q not found", id)
	}
	return m.resume(ctx, e)
}

func (m *Manager) resume(ctx context.Context, e *entry) (bool, error) {
	e.mu.Lock()
	paused := e.rec.Paused()
	e.mu.Unlock()
	if !paused {
		return false, nil
	}
	if f, ok := e.sb.(freezer); ok {
		if err := f.Thaw(); err != nil {
			return false, err
		}
	}
	e.lastUsed.Store(time.Now().UnixNano())
	return true, m.setLabels(ctx, e, map[string]string{PausedLabel: ""})
}

// Amendment changes a live session's record.
type Amendment struct {
	// Labels are set; an empty value removes the label. Keys under
	// warren.dev/ are allowed here: Amend is for the daemon's transports,
	// which keep their own state in them.
	Labels map[string]string
	// ExpiresAt, if not zero, is when the session is deleted, whatever its
	// use until then: both its idle TTL and its lifetime end there.
	ExpiresAt time.Time
}

// Amend changes a live session's labels and expiry and stores the record.
func (m *Manager) Amend(ctx context.Context, tenant, id string, a Amendment) (*Info, error) {
	e, err := m.lookup(tenant, id)
	if err != nil {
		return nil, err
	}
	<-e.ready
	if e.err != nil {
		return nil, errdefs.New(errdefs.ErrNotFound, "session %q not found", id)
	}
	for k, v := range a.Labels {
		if !labelPattern.MatchString(k) {
			return nil, invalid("label key %q must match [A-Za-z0-9][A-Za-z0-9._/-]{0,62}", k)
		}
		if len(v) > 256 || strings.IndexByte(v, 0) >= 0 {
			return nil, invalid("label %s: the value must be at most 256 bytes of text", k)
		}
	}
	if !a.ExpiresAt.IsZero() {
		e.mu.Lock()
		created := e.rec.CreatedAt
		e.mu.Unlock()
		life := a.ExpiresAt.Sub(created)
		if life <= 0 {
			life = time.Nanosecond // due at the reaper's next pass
		}
		if life > m.cfg.MaxLifetime {
			return nil, invalid("the session would live %v; at most %v is allowed", life.Round(time.Second), m.cfg.MaxLifetime)
		}
		tl, err := m.tenantLimits(ctx, tenant)
		if err != nil {
			return nil, err
		}
		if tl.MaxLifetime > 0 && life > tl.MaxLifetime {
			return nil, errdefs.New(errdefs.ErrResourceExhausted, "the session would live %v; tenant %q may keep one at most %v", life.Round(time.Second), tenant, tl.MaxLifetime)
		}
		e.mu.Lock()
		e.rec.MaxLifetime = life
		// The idle clock never ends the session before ExpiresAt.
		e.rec.IdleTTL = life
		e.mu.Unlock()
	}
	if err := m.setLabels(ctx, e, a.Labels); err != nil {
		return nil, err
	}
	return m.info(e), nil
}

// setLabels applies labels to e's record and stores it.
func (m *Manager) setLabels(ctx context.Context, e *entry, labels map[string]string) error {
	e.mu.Lock()
	if e.deleting {
		e.mu.Unlock()
		return errdefs.New(errdefs.ErrNotFound, "session %q is being deleted", e.rec.ID)
	}
	l := maps.Clone(e.rec.Labels)
	if l == nil {
		l = map[string]string{}
	}
	for k, v := range labels {
		if v == "" {
			delete(l, k)
		} else {
			l[k] = v
		}
	}
	if len(l) > 96 {
		e.mu.Unlock()
		return invalid("a session may have at most 96 labels")
	}
	e.rec.Labels = l
	rec := *e.rec
	e.mu.Unlock()
	return m.store.UpdateSession(context.WithoutCancel(ctx), &rec)
}

// ExpireFunc decides what happens to a session whose time ran out: true
// means it took care of the session (paused it and moved its expiry, say)
// and the reaper must not delete it.
type ExpireFunc func(ctx context.Context, s *Session) bool

// OnExpire sets the function the reaper asks before it deletes an expired
// session; nil deletes every one. Set it before serving.
func (m *Manager) OnExpire(f ExpireFunc) {
	m.mu.Lock()
	m.onExpire = f
	m.mu.Unlock()
}

// Records returns the records of the tenant's sessions ("" for every
// tenant's) that were created and are not hidden, without reading their
// usage (List does): for callers that look sessions up often.
func (m *Manager) Records(tenant string) []*Session {
	es := m.entriesOf(tenant)
	out := make([]*Session, 0, len(es))
	for _, e := range es {
		select {
		case <-e.ready:
		default:
			continue
		}
		if e.err != nil {
			continue
		}
		if s := e.snapshot(); s.Labels[hiddenLabel] == "" {
			out = append(out, s)
		}
	}
	return out
}

// RecordsWithID returns the records of the created sessions called id, of
// every tenant (ids are unique only within a tenant).
func (m *Manager) RecordsWithID(id string) []*Session {
	es := m.entriesWithID(id)
	var out []*Session
	for _, e := range es {
		select {
		case <-e.ready:
		default:
			continue
		}
		if e.err == nil {
			out = append(out, e.snapshot())
		}
	}
	return out
}
