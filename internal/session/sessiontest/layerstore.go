package sessiontest

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// LayerStore is a session.LayerStore in memory.
type LayerStore struct {
	mu   sync.Mutex
	ws   map[string]*session.Workspace // by tenant + "/" + name
	sn   map[string]*session.Snapshot  // by tenant + "/" + name
	atts map[string]*session.Attachment
}

// NewLayerStore returns an empty store.
func NewLayerStore() *LayerStore {
	return &LayerStore{ws: map[string]*session.Workspace{}, sn: map[string]*session.Snapshot{},
		atts: map[string]*session.Attachment{}}
}

var _ session.LayerStore = (*LayerStore)(nil)

func sortedValues[T any](m map[string]*T, tenant string, tenantOf func(*T) string) []*T {
	var out []*T
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if v := m[k]; tenant == "" || tenantOf(v) == tenant {
			c := *v
			out = append(out, &c)
		}
	}
	return out
}

// CreateWorkspace implements session.LayerStore.
func (s *LayerStore) CreateWorkspace(ctx context.Context, w *session.Workspace) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := w.Tenant + "/" + w.Name
	if s.ws[k] != nil {
		return errdefs.New(errdefs.ErrConflict, "workspace %q exists", w.Name)
	}
	c := *w
	s.ws[k] = &c
	return nil
}

// GetWorkspace implements session.LayerStore.
func (s *LayerStore) GetWorkspace(ctx context.Context, tenant, name string) (*session.Workspace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.ws[tenant+"/"+name]
	if w == nil {
		return nil, errdefs.New(errdefs.ErrNotFound, "workspace %q not found", name)
	}
	c := *w
	return &c, nil
}

// ListWorkspaces implements session.LayerStore.
func (s *LayerStore) ListWorkspaces(ctx context.Context, tenant string) ([]*session.Workspace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedValues(s.ws, tenant, func(w *session.Workspace) string { return w.Tenant }), nil
}

// DeleteWorkspace implements session.LayerStore.
func (s *LayerStore) DeleteWorkspace(ctx context.Context, tenant, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ws[tenant+"/"+name] == nil {
		return errdefs.New(errdefs.ErrNotFound, "workspace %q not found", name)
	}
	delete(s.ws, tenant+"/"+name)
	return nil
}

// CreateSnapshot implements session.LayerStore.
func (s *LayerStore) CreateSnapshot(ctx context.Context, sn *session.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sn.Tenant + "/" + sn.Name
	if s.sn[k] != nil {
		return errdefs.New(errdefs.ErrConflict, "snapshot %q exists", sn.Name)
	}
	c := *sn
	c.Overlays = slices.Clone(sn.Overlays)
	s.sn[k] = &c
	return nil
}

// GetSnapshot implements session.LayerStore.
func (s *LayerStore) GetSnapshot(ctx context.Context, tenant, name string) (*session.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.sn[tenant+"/"+name]
	if sn == nil {
		return nil, errdefs.New(errdefs.ErrNotFound, "snapshot %q not found", name)
	}
	c := *sn
	return &c, nil
}

// ListSnapshots implements session.LayerStore.
func (s *LayerStore) ListSnapshots(ctx context.Context, tenant string) ([]*session.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedValues(s.sn, tenant, func(sn *session.Snapshot) string { return sn.Tenant }), nil
}

// DeleteSnapshot implements session.LayerStore.
func (s *LayerStore) DeleteSnapshot(ctx context.Context, tenant, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sn[tenant+"/"+name] == nil {
		return errdefs.New(errdefs.ErrNotFound, "snapshot %q not found", name)
	}
	delete(s.sn, tenant+"/"+name)
	return nil
}

// PutAttachment implements session.LayerStore.
func (s *LayerStore) PutAttachment(ctx context.Context, a *session.Attachment) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *a
	s.atts[a.Session] = &c
	return nil
}

// ListAttachments implements session.LayerStore.
func (s *LayerStore) ListAttachments(ctx context.Context) ([]*session.Attachment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedValues(s.atts, "", func(*session.Attachment) string { return "" }), nil
}

// DeleteAttachment implements session.LayerStore.
func (s *LayerStore) DeleteAttachment(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.atts[name] == nil {
		return errdefs.New(errdefs.ErrNotFound, "no attachment of %q", name)
	}
	delete(s.atts, name)
	return nil
}

// Attachments returns the sandbox names that have an attachment, sorted.
func (s *LayerStore) Attachments() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.atts))
}
