package session

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// WorkspaceInfo is a workspace with its live details.
type WorkspaceInfo struct {
	Workspace
	// UsedBytes is what its files take (0 when it cannot be measured).
	UsedBytes int64
	// MountedBy are the sessions that have it mounted, with their modes.
	MountedBy []WorkspaceMount
}

// WorkspaceMount is one session's mount of a workspace.
type WorkspaceMount struct {
	Session string // the session's id
	Mode    string // "rw" or "ro"
}

// CreateWorkspace creates the tenant's workspace name, empty, holding at
// most sizeMB (0: the default session disk limit). Shared workspaces may be
// mounted read-write by several sessions at once.
func (m *Manager) CreateWorkspace(ctx context.Context, tenant, name string, sizeMB int64, shared bool) (*WorkspaceInfo, error) {
	if err := m.layersOn(); err != nil {
		return nil, err
	}
	if err := checkName("workspace", name); err != nil {
		return nil, err
	}
	cfg := m.lay.cfg
	switch {
	case sizeMB < 0:
		return nil, invalid("size_mb must not be negative")
	case !cfg.Workspaces.Limited() && sizeMB != 0:
		return nil, invalid("size_mb cannot be enforced by this daemon (it runs without disk quotas); leave it unset")
	case !cfg.Workspaces.Limited():
	case sizeMB == 0:
		sizeMB = m.cfg.DefaultLimits.DiskMB
	case sizeMB < 16:
		return nil, invalid("size_mb must be at least 16")
	case sizeMB > m.cfg.MaxLimits.DiskMB:
		return nil, invalid("size_mb %d exceeds the maximum of %d", sizeMB, m.cfg.MaxLimits.DiskMB)
	}
	if err := m.CheckDisk(); err != nil {
		return nil, err
	}
	release, err := m.lay.reserve("ws:"+tenant+"/"+name, fmt.Sprintf("workspace %q", name))
	if err != nil {
		return nil, err
	}
	defer release()
	if err := m.checkLayerQuota(ctx, tenant, "workspace"); err != nil {
		return nil, err
	}
	if _, err := cfg.Store.GetWorkspace(ctx, tenant, name); err == nil {
		return nil, errdefs.New(errdefs.ErrConflict, "workspace %q already exists", name)
	} else if !errdefs.Is(err, errdefs.ErrNotFound) {
		return nil, err
	}
	w := &Workspace{ID: newLayerID("w"), Tenant: tenant, Name: name, SizeMB: sizeMB, Shared: shared, CreatedAt: time.Now().UTC()}
	if err := cfg.Workspaces.Create(w.ID, sizeMB<<20); err != nil {
		return nil, fmt.Errorf("create workspace %q: %w", name, err)
	}
	if err := cfg.Store.CreateWorkspace(context.WithoutCancel(ctx), w); err != nil {
		cfg.Workspaces.Remove(w.ID)
		return nil, err
	}
	m.logFor(ctx).Info("workspace created", "tenant", tenant, "workspace", name, "id", w.ID, "size_mb", sizeMB, "shared", shared)
	return m.workspaceInfo(w), nil
}

func (m *Manager) workspaceInfo(w *Workspace) *WorkspaceInfo {
	info := &WorkspaceInfo{Workspace: *w, MountedBy: []WorkspaceMount{}}
	if n, err := m.lay.cfg.Workspaces.Usage(w.ID); err == nil {
		info.UsedBytes = n
	}
	m.lay.mu.Lock()
	if u := m.lay.ws[w.ID]; u != nil {
		for sid, mode := range u.by {
			info.MountedBy = append(info.MountedBy, WorkspaceMount{Session: sid, Mode: mode})
		}
	}
	m.lay.mu.Unlock()
	slices.SortFunc(info.MountedBy, func(a, b WorkspaceMount) int {
		if a.Session < b.Session {
			return -1
		}
		if a.Session > b.Session {
			return 1
		}
		return 0
	})
	return info
}

// GetWorkspace returns the tenant's workspace name.
func (m *Manager) GetWorkspace(ctx context.Context, tenant, name string) (*WorkspaceInfo, error) {
	if err := m.layersOn(); err != nil {
		return nil, err
	}
	w, err := m.lay.cfg.Store.GetWorkspace(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	return m.workspaceInfo(w), nil
}

// ListWorkspaces returns the tenant's workspaces by name.
func (m *Manager) ListWorkspaces(ctx context.Context, tenant string) ([]*WorkspaceInfo, error) {
	if err := m.layersOn(); err != nil {
		return nil, err
	}
	ws, err := m.lay.cfg.Store.ListWorkspaces(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := make([]*WorkspaceInfo, 0, len(ws))
	for _, w := range ws {
		out = append(out, m.workspaceInfo(w))
	}
	return out, nil
}

// DeleteWorkspace deletes the tenant's workspace name and its files. A
// workspace that a session has mounted is ErrConflict.
func (m *Manager) DeleteWorkspace(ctx context.Context, tenant, name string) error {
	if err := m.layersOn(); err != nil {
		return err
	}
	cfg := m.lay.cfg
	w, err := cfg.Store.GetWorkspace(ctx, tenant, name)
	if err != nil {
		return err
	}
	s := &m.lay
	s.mu.Lock()
	s.initLocked()
	if u := s.ws[w.ID]; u != nil {
		var by []string
		for sid := range u.by {
			by = append(by, sid)
		}
		slices.Sort(by)
		s.mu.Unlock()
		return errdefs.New(errdefs.ErrConflict, "workspace %q is mounted by session %q; delete the session first", name, by)
	}
	if s.busy["id:"+w.ID] {
		s.mu.Unlock()
		return errdefs.New(errdefs.ErrConflict, "workspace %q is being deleted", name)
	}
	s.busy["id:"+w.ID] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.busy, "id:"+w.ID)
		s.mu.Unlock()
	}()
	dctx := context.WithoutCancel(ctx)
	if err := cfg.Workspaces.Remove(w.ID); err != nil {
		return fmt.Errorf("remove workspace %q: %w", name, err)
	}
	if err := cfg.Store.DeleteWorkspace(dctx, tenant, name); err != nil {
		return err
	}
	m.logFor(ctx).Info("workspace deleted", "tenant", tenant, "workspace", name, "id", w.ID)
	return nil
}
