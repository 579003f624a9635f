package sessiontest

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// Store is a session.Store in memory. It runs the store conformance suite
// (session/storetest) like every other implementation.
type Store struct {
	mu   sync.Mutex
	recs map[string]*session.Session // by tenant + "/" + id
	// Fail, if set, is asked before each write (op "create", "update" or
	// "delete"): an error fails it, as a full disk would.
	Fail func(op string, s *session.Session) error
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{recs: map[string]*session.Session{}} }

var _ session.Store = (*Store)(nil)

func clone(s *session.Session) *session.Session {
	c := *s
	c.Env, c.Labels = maps.Clone(s.Env), maps.Clone(s.Labels)
	if len(c.Env) == 0 {
		c.Env = nil
	}
	if len(c.Labels) == 0 {
		c.Labels = nil
	}
	c.CreatedAt, c.LastUsedAt = s.CreatedAt.UTC(), s.LastUsedAt.UTC()
	return &c
}

func check(s *session.Session) error {
	if s == nil || s.Tenant == "" || s.ID == "" || s.Name == "" {
		return errdefs.New(errdefs.ErrInvalidArgument, "a session needs a tenant, an id and a name")
	}
	return nil
}

func (st *Store) fail(op string, s *session.Session) error {
	if st.Fail == nil {
		return nil
	}
	return st.Fail(op, s)
}

// CreateSession implements session.Store.
func (st *Store) CreateSession(ctx context.Context, s *session.Session) error {
	if err := check(s); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.fail("create", s); err != nil {
		return err
	}
	k := s.Tenant + "/" + s.ID
	if st.recs[k] != nil {
		return errdefs.New(errdefs.ErrConflict, "session %q exists", s.ID)
	}
	for _, r := range st.recs {
		if r.Name == s.Name {
			return errdefs.New(errdefs.ErrConflict, "sandbox name %q is taken", s.Name)
		}
	}
	st.recs[k] = clone(s)
	return nil
}

// GetSession implements session.Store.
func (st *Store) GetSession(ctx context.Context, tenant, id string) (*session.Session, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r := st.recs[tenant+"/"+id]
	if r == nil {
		return nil, errdefs.New(errdefs.ErrNotFound, "session %q not found", id)
	}
	return clone(r), nil
}

// ListSessions implements session.Store.
func (st *Store) ListSessions(ctx context.Context, tenant string) ([]*session.Session, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []*session.Session
	for _, r := range st.recs {
		if tenant == "" || r.Tenant == tenant {
			out = append(out, clone(r))
		}
	}
	slices.SortFunc(out, func(a, b *session.Session) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return strings.Compare(a.Tenant, b.Tenant)
	})
	return out, nil
}

// UpdateSession implements session.Store.
func (st *Store) UpdateSession(ctx context.Context, s *session.Session) error {
	if err := check(s); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.fail("update", s); err != nil {
		return err
	}
	k := s.Tenant + "/" + s.ID
	if st.recs[k] == nil {
		return errdefs.New(errdefs.ErrNotFound, "session %q not found", s.ID)
	}
	for ok, r := range st.recs {
		if ok != k && r.Name == s.Name {
			return errdefs.New(errdefs.ErrConflict, "sandbox name %q is taken", s.Name)
		}
	}
	st.recs[k] = clone(s)
	return nil
}

// DeleteSession implements session.Store.
func (st *Store) DeleteSession(ctx context.Context, tenant, id string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.fail("delete", &session.Session{Tenant: tenant, ID: id}); err != nil {
		return err
	}
	k := tenant + "/" + id
	if st.recs[k] == nil {
		return errdefs.New(errdefs.ErrNotFound, "session %q not found", id)
	}
	delete(st.recs, k)
	return nil
}

// Close implements session.Store.
func (st *Store) Close() error { return nil }

// Put stores s as it is, bypassing the checks: the records a previous
// daemon left, for Recover.
func (st *Store) Put(s *session.Session) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.recs[s.Tenant+"/"+s.ID] = clone(s)
}
