package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/image"
	"github.com/warrenhq/warren/internal/snapshot"
)

// WorkspaceMountPoint is where a session's workspace appears.
const WorkspaceMountPoint = "/workspace"

// attached is what one session being created uses of workspaces and
// snapshots: the layers its sandbox gets.
type attached struct {
	att   *Attachment
	ws    *Workspace // nil for none
	wsDir string     // the workspace's directory, the source of its mount
	snap  *Snapshot  // nil for none
	chain []snapshot.Layer
}

// attach resolves the workspace and snapshot a create request names
// and counts the session among their users: a workspace that another
// session mounts read-write (and is not shared) is ErrConflict. It returns
// nil when the request names neither. It does not change rec, which
// List may be reading: the caller takes a snapshot's image from a.snap
// under the entry's lock.
func (l *layerService) attach(ctx context.Context, rec *Session, req *CreateRequest) (*attached, error) {
	if req.Workspace == "" && req.WorkspaceMode == "" && req.Snapshot == "" {
		return nil, nil
	}
	st := l.cfg.Store
	a := &attached{att: &Attachment{Session: rec.Name, Tenant: rec.Tenant, SessionID: rec.ID}}
	mode := req.WorkspaceMode
	switch {
	case mode != "" && req.Workspace == "":
		return nil, invalid("workspace_mode needs a workspace")
	case mode == "":
		mode = "rw"
	case mode != "rw" && mode != "ro":
		return nil, invalid("workspace_mode %q must be rw or ro", mode)
	}
	if req.Snapshot != "" {
		snap, err := st.GetSnapshot(ctx, rec.Tenant, req.Snapshot)
		if err != nil {
			return nil, err
		}
		if req.Image != "" && req.Image != snap.Image {
			return nil, invalid("snapshot %q holds changes to image %q, not %q; leave image unset", snap.Name, snap.Image, req.Image)
		}
		if a.chain, err = l.snapshotChain(ctx, snap); err != nil {
			return nil, err
		}
		a.snap = snap
	}
	if req.Workspace != "" {
		w, err := st.GetWorkspace(ctx, rec.Tenant, req.Workspace)
		if err != nil {
			return nil, err
		}
		a.ws, a.wsDir = w, l.cfg.Workspaces.Path(w.ID)
	}
	s := l
	s.mu.Lock()
	if a.ws != nil {
		if s.busy["id:"+a.ws.ID] {
			s.mu.Unlock()
			return nil, errdefs.New(errdefs.ErrConflict, "workspace %q is being deleted", a.ws.Name)
		}
		if u := s.ws[a.ws.ID]; u != nil && mode == "rw" && !a.ws.Shared && u.rw > 0 {
			var by string
			for sid, md := range u.by {
				if md == "rw" {
					by = sid
				}
			}
			s.mu.Unlock()
			return nil, errdefs.New(errdefs.ErrConflict, "workspace %q is mounted read-write by session %q; mount it read-only (workspace_mode ro), or create it shared", a.ws.Name, by)
		}
		a.att.Workspace, a.att.WorkspaceMode = a.ws.ID, mode
	}
	if a.snap != nil {
		if s.busy["id:"+a.snap.ID] {
			s.mu.Unlock()
			return nil, errdefs.New(errdefs.ErrConflict, "snapshot %q is being deleted", a.snap.Name)
		}
		a.att.Snapshot = a.snap.ID
	}
	s.attachLocked(a.att)
	s.mu.Unlock()
	if err := st.PutAttachment(ctx, a.att); err != nil {
		l.detach(rec.Name)
		return nil, err
	}
	return a, nil
}

// attachLocked counts a's uses.
//
// Preconditions: s.mu is held and s.initLocked ran.
func (s *layerService) attachLocked(a *Attachment) {
	if a.Workspace != "" {
		u := s.ws[a.Workspace]
		if u == nil {
			u = &wsUse{by: map[string]string{}}
			s.ws[a.Workspace] = u
		}
		if a.WorkspaceMode == "ro" {
			u.ro++
		} else {
			u.rw++
		}
		u.by[a.SessionID] = a.WorkspaceMode
	}
	if a.Snapshot != "" {
		s.snaps[a.Snapshot]++
	}
	s.att[a.Session] = a
}

// apply adds the layers to a sandbox's configuration: the snapshot's
// layers above the image's (its root changes below the root overlay's
// writable layer, its changes to a host directory below that overlay's),
// and the workspace as an idmapped bind mount.
func (a *attached) apply(cfg *SandboxConfig, img *image.Image) error {
	if a == nil {
		return nil
	}
	if a.snap != nil {
		if a.snap.ImageDigest != "" && img.Digest != a.snap.ImageDigest {
			return invalid("snapshot %q holds changes to image %q as it was (%s); that image is now %s", a.snap.Name, a.snap.Image, a.snap.ImageDigest, img.Digest)
		}
		var lower []string
		for _, l := range a.chain {
			lower = append(lower, l.RootDir())
		}
		cfg.Lower = append(lower, cfg.Lower...)
		for i := range cfg.Overlays {
			for _, l := range a.chain {
				if d := l.OverlayDir(cfg.Overlays[i].Target); d != "" {
					cfg.Overlays[i].Lower = append(cfg.Overlays[i].Lower, d)
				}
			}
		}
	}
	if a.ws != nil {
		cfg.Binds = append(cfg.Binds, SandboxBind{Source: a.wsDir, Target: WorkspaceMountPoint, ReadOnly: a.att.WorkspaceMode == "ro"})
	}
	return nil
}

// detach forgets what the session whose sandbox is name used. A fork's
// snapshot that nothing uses any more goes with it.
func (l *layerService) detach(name string) {
	s := l
	s.mu.Lock()
	a := s.att[name]
	if a == nil {
		s.mu.Unlock()
		return
	}
	unused := s.detachLocked(a)
	s.mu.Unlock()
	if err := s.cfg.Store.DeleteAttachment(context.Background(), name); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
		l.log.Warn("forget a session's workspace and snapshot", "sandbox", name, "error", err)
	}
	if unused {
		l.autoDeleteSnapshot(a.Tenant, a.Snapshot)
	}
}

// detachLocked uncounts a's uses and reports whether its snapshot is now
// unused.
//
// Preconditions: s.mu is held.
func (s *layerService) detachLocked(a *Attachment) (snapshotUnused bool) {
	delete(s.att, a.Session)
	if u := s.ws[a.Workspace]; u != nil {
		if a.WorkspaceMode == "ro" {
			u.ro--
		} else {
			u.rw--
		}
		delete(u.by, a.SessionID)
		if u.rw <= 0 && u.ro <= 0 {
			delete(s.ws, a.Workspace)
		}
	}
	if a.Snapshot != "" {
		if s.snaps[a.Snapshot]--; s.snaps[a.Snapshot] <= 0 {
			delete(s.snaps, a.Snapshot)
			return true
		}
	}
	return false
}

// recoverLayers rebuilds the counts of what live sessions use from the
// stored attachments, forgets the attachments of sessions that are gone,
// makes the snapshots' image leases agree with the snapshots, and removes
// workspaces' and snapshots' storage that no record owns (the remains of a
// create or delete cut short by a crash).
//
// live are the sandbox names of every session that survived the restart.
func (l *layerService) recover(ctx context.Context, live map[string]bool) error {
	cfg := l.cfg
	atts, err := cfg.Store.ListAttachments(ctx)
	if err != nil {
		return err
	}
	s := l
	for _, a := range atts {
		if !live[a.Session] {
			if err := cfg.Store.DeleteAttachment(ctx, a.Session); err != nil {
				return err
			}
			continue
		}
		s.mu.Lock()
		s.attachLocked(a)
		s.mu.Unlock()
	}
	snaps, err := cfg.Store.ListSnapshots(ctx, "")
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, sn := range snaps {
		known[sn.ID] = true
	}
	ents, err := os.ReadDir(cfg.SnapshotDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range ents {
		if !known[e.Name()] {
			l.log.Info("removing a snapshot layer no record owns", "snapshot", e.Name())
			if err := os.RemoveAll(filepath.Join(cfg.SnapshotDir, e.Name())); err != nil {
				l.log.Warn("could not remove a snapshot layer", "snapshot", e.Name(), "error", err)
			}
		}
	}
	l.recoverSnapshotImages(snaps)
	for _, sn := range snaps {
		if sn.AutoDelete {
			l.autoDeleteSnapshot(sn.Tenant, sn.ID)
		}
	}
	wss, err := cfg.Store.ListWorkspaces(ctx, "")
	if err != nil {
		return err
	}
	known = map[string]bool{}
	for _, w := range wss {
		known[w.ID] = true
	}
	ids, err := cfg.Workspaces.IDs()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if !known[id] {
			l.log.Info("removing a workspace no record owns", "workspace", id)
			if err := cfg.Workspaces.Remove(id); err != nil {
				l.log.Warn("could not remove a workspace", "workspace", id, "error", err)
			}
		}
	}
	return nil
}
