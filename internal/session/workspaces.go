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
func (l *layerService) CreateWorkspace(ctx context.Context, tenant, name string, sizeMB int64, shared bool) (*WorkspaceInfo, error) {
	if err := checkName("workspace", name); err != nil {
		return nil, err
	}
	cfg := l.cfg
	switch {
	case sizeMB < 0:
		return nil, invalid("size_mb must not be negative")
	case !cfg.Workspaces.Limited() && sizeMB != 0:
		return nil, invalid("size_mb cannot be enforced by this daemon (it runs without disk quotas); leave it unset")
	case !cfg.Workspaces.Limited():
	case sizeMB == 0:
		sizeMB = l.defaultDiskMB
	case sizeMB < 16:
		return nil, invalid("size_mb must be at least 16")
	case sizeMB > l.maxDiskMB:
		return nil, invalid("size_mb %d exceeds the maximum of %d", sizeMB, l.maxDiskMB)
	}
	if err := l.host.CheckDisk(); err != nil {
		return nil, err
	}
	release, err := l.reserve("ws:"+tenant+"/"+name, fmt.Sprintf("workspace %q", name))
	if err != nil {
		return nil, err
	}
	defer release()
	if err := l.checkLayerQuota(ctx, tenant, "workspace"); err != nil {
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
	l.host.logFor(ctx).Info("workspace created", "tenant", tenant, "workspace", name, "id", w.ID, "size_mb", sizeMB, "shared", shared)
	return l.workspaceInfo(w), nil
}

func (l *layerService) workspaceInfo(w *Workspace) *WorkspaceInfo {
	info := &WorkspaceInfo{Workspace: *w, MountedBy: []WorkspaceMount{}}
	if n, err := l.cfg.Workspaces.Usage(w.ID); err == nil {
		info.UsedBytes = n
	}
	l.mu.Lock()
	if u := l.ws[w.ID]; u != nil {
		for sid, mode := range u.by {
			info.MountedBy = append(info.MountedBy, WorkspaceMount{Session: sid, Mode: mode})
		}
	}
	l.mu.Unlock()
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
func (l *layerService) GetWorkspace(ctx context.Context, tenant, name string) (*WorkspaceInfo, error) {
	w, err := l.cfg.Store.GetWorkspace(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	return l.workspaceInfo(w), nil
}

// ListWorkspaces returns the tenant's workspaces by name.
func (l *layerService) ListWorkspaces(ctx context.Context, tenant string) ([]*WorkspaceInfo, error) {
	ws, err := l.cfg.Store.ListWorkspaces(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := make([]*WorkspaceInfo, 0, len(ws))
	for _, w := range ws {
		out = append(out, l.workspaceInfo(w))
	}
	return out, nil
}

// DeleteWorkspace deletes the tenant's workspace name and its files. A
// workspace that a session has mounted is ErrConflict.
func (l *layerService) DeleteWorkspace(ctx context.Context, tenant, name string) error {
	cfg := l.cfg
	w, err := cfg.Store.GetWorkspace(ctx, tenant, name)
	if err != nil {
		return err
	}
	s := l
	s.mu.Lock()
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
	l.host.logFor(ctx).Info("workspace deleted", "tenant", tenant, "workspace", name, "id", w.ID)
	return nil
}
