package session

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/image"
	"github.com/warrenhq/warren/internal/snapshot"
)

// The operations on running sessions that Observer.Op reports, besides
// those of observe.go.
const (
	OpSnapshot = "snapshot"
	OpFork     = "fork"
)

// MaxForks is the most sessions one fork makes.
const MaxForks = 10

// maxChain bounds the layers of a snapshot: a snapshot of a session that
// started from a snapshot lies on top of it. Export and import flatten a
// chain into one layer.
const maxChain = 32

// SnapshotInfo is a snapshot with its live details.
type SnapshotInfo struct {
	Snapshot
	// UsedBy are the ids of the sessions started from it.
	UsedBy []string
}

func (l *layerService) snapshotInfo(sn *Snapshot) *SnapshotInfo {
	info := &SnapshotInfo{Snapshot: *sn, UsedBy: []string{}}
	l.mu.Lock()
	for _, a := range l.att {
		if a.Snapshot == sn.ID {
			info.UsedBy = append(info.UsedBy, a.SessionID)
		}
	}
	l.mu.Unlock()
	slices.Sort(info.UsedBy)
	return info
}

// snapshotDir is where the layer of snapshot id lives.
func (l *layerService) snapshotDir(id string) string { return filepath.Join(l.cfg.SnapshotDir, id) }

// snapshotChain returns the layers of sn, topmost first: its own, then its
// parent's, and so on.
func (l *layerService) snapshotChain(ctx context.Context, sn *Snapshot) ([]snapshot.Layer, error) {
	byID := map[string]*Snapshot{}
	if sn.Parent != "" {
		all, err := l.cfg.Store.ListSnapshots(ctx, sn.Tenant)
		if err != nil {
			return nil, err
		}
		for _, s := range all {
			byID[s.ID] = s
		}
	}
	var chain []snapshot.Layer
	for cur := sn; ; {
		chain = append(chain, snapshot.Layer{Dir: l.snapshotDir(cur.ID), Overlays: cur.Overlays})
		if cur.Parent == "" {
			return chain, nil
		}
		if len(chain) >= maxChain {
			return nil, fmt.Errorf("snapshot %q: more than %d layers", sn.Name, maxChain)
		}
		if cur = byID[cur.Parent]; cur == nil {
			return nil, fmt.Errorf("snapshot %q: a snapshot it builds on is gone", sn.Name)
		}
	}
}

// Snapshot freezes the session's processes, copies the changes the session
// made to its files into the tenant's new snapshot name, re-based to the
// canonical ids, and lets the processes run again. Processes, the shell's
// state and the workspace are not part of it.
func (l *layerService) Snapshot(ctx context.Context, tenant, id, name string) (_ *SnapshotInfo, err error) {
	defer l.host.observe(OpSnapshot, time.Now(), &err)
	if err := checkName("snapshot", name); err != nil {
		return nil, err
	}
	rec, _, sb, done, err := l.host.useSession(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer done()
	sn, err := l.takeSnapshot(ctx, tenant, rec, sb, name, false)
	if err != nil {
		return nil, err
	}
	return l.snapshotInfo(sn), nil
}

// takeSnapshot is Snapshot for a session in use.
func (l *layerService) takeSnapshot(ctx context.Context, tenant string, rec *Session, sb Sandbox, name string, auto bool) (_ *Snapshot, err error) {
	cfg := l.cfg
	if err := l.host.CheckDisk(); err != nil {
		return nil, err
	}
	release, err := l.reserve("snap:"+tenant+"/"+name, fmt.Sprintf("snapshot %q", name))
	if err != nil {
		return nil, err
	}
	defer release()
	if err := l.checkLayerQuota(ctx, tenant, "snapshot"); err != nil {
		return nil, err
	}
	if _, err := cfg.Store.GetSnapshot(ctx, tenant, name); err == nil {
		return nil, errdefs.New(errdefs.ErrConflict, "snapshot %q already exists", name)
	} else if !errdefs.Is(err, errdefs.ErrNotFound) {
		return nil, err
	}
	sn := &Snapshot{ID: newLayerID("n"), Tenant: tenant, Name: name, Image: rec.Image, Session: rec.ID, AutoDelete: auto}
	l.mu.Lock()
	var parent string
	if a := l.att[rec.Name]; a != nil {
		parent = a.Snapshot
	}
	l.mu.Unlock()
	if parent != "" {
		all, err := cfg.Store.ListSnapshots(ctx, tenant)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(all, func(s *Snapshot) bool { return s.ID == parent })
		if i < 0 {
			return nil, fmt.Errorf("the snapshot session %q started from is gone", rec.ID)
		}
		chain, err := l.snapshotChain(ctx, all[i])
		if err != nil {
			return nil, err
		}
		if len(chain) >= maxChain {
			return nil, invalid("session %q lies on %d snapshot layers already, the most there may be; export and import its snapshot to flatten them", rec.ID, len(chain))
		}
		sn.Parent, sn.ImageDigest = parent, all[i].ImageDigest
	}
	if sn.ImageDigest == "" {
		// The content the session runs on is the one its sandbox leases,
		// whatever the name points to now.
		if d, ok := l.images.Lease(rec.Name); ok {
			sn.ImageDigest = d
		} else if cur, err := l.images.Get(rec.Image); err == nil {
			sn.ImageDigest = cur.Digest
		} else if errdefs.Is(err, errdefs.ErrNotFound) {
			return nil, errdefs.New(errdefs.ErrConflict, "the image %q of session %q is gone", rec.Image, rec.ID)
		} else {
			return nil, err
		}
	}
	// The snapshot leases that content until it is deleted.
	img, err := l.leaseSnapshotImage(sn)
	if err != nil {
		return nil, fmt.Errorf("snapshot session %q: %w", rec.ID, err)
	}
	defer func() {
		if err != nil {
			l.releaseSnapshotImage(sn)
		}
	}()
	// The session's extra overlays are the image's host directories, in
	// this order (see create).
	sn.Overlays = slices.Clone(img.HostDirs)
	dir := l.snapshotDir(sn.ID)
	if err := os.MkdirAll(filepath.Join(dir, "ov"), 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	st, err := sb.CopyLayers(ctx, dir, len(sn.Overlays))
	if err != nil {
		// A sandbox that could not be thawed answers nothing: say so.
		l.log.Warn("could not copy a session's layers", "session_id", rec.ID, "sandbox", rec.Name, "error", err)
		return nil, fmt.Errorf("snapshot session %q: %w", rec.ID, err)
	}
	sn.SizeBytes = st.Bytes
	sn.CreatedAt = time.Now().UTC()
	if err := cfg.Store.CreateSnapshot(context.WithoutCancel(ctx), sn); err != nil {
		return nil, err
	}
	l.host.logFor(ctx).Info("snapshot taken", "session_id", rec.ID, "tenant", tenant, "snapshot", name, "id", sn.ID,
		"bytes", st.Bytes, "files", st.Files+st.Dirs, "frozen", st.Frozen)
	return sn, nil
}

// ForkRequest asks for copies of a session.
type ForkRequest struct {
	// Count is the number of new sessions, 1 to MaxForks (0: len(IDs)).
	Count int
	// IDs, if given, are the new sessions' ids, one per session.
	IDs []string
	// Snapshot names the snapshot the forks start from; "" takes one that
	// is deleted with the last of the forks.
	Snapshot string
}

// Fork snapshots the session and starts req.Count new sessions from the
// snapshot, with the session's image, limits, environment, user, labels,
// TTLs and current directory. Their files are the session's at the moment
// of the snapshot; nothing else is carried over (processes, the shell's
// variables, the workspace). If one of them cannot be created, none is.
func (l *layerService) Fork(ctx context.Context, tenant, id string, req *ForkRequest) (_ *SnapshotInfo, _ []*Info, err error) {
	defer l.host.observe(OpFork, time.Now(), &err)
	n := req.Count
	if n == 0 {
		n = len(req.IDs)
	}
	if n < 1 || n > MaxForks {
		return nil, nil, invalid("count must be 1 to %d", MaxForks)
	}
	if len(req.IDs) > 0 && len(req.IDs) != n {
		return nil, nil, invalid("ids has %d ids for %d sessions", len(req.IDs), n)
	}
	for i, sid := range req.IDs {
		if !idPattern.MatchString(sid) {
			return nil, nil, invalid("id %q must match [a-z0-9][a-z0-9_-]{0,62}", sid)
		}
		if slices.Contains(req.IDs[:i], sid) {
			return nil, nil, invalid("id %q is given twice", sid)
		}
	}
	name, auto := req.Snapshot, req.Snapshot == ""
	if auto {
		b := make([]byte, 6)
		rand.Read(b)
		name = fmt.Sprintf("fork-%x", b)
	}
	if err := checkName("snapshot", name); err != nil {
		return nil, nil, err
	}
	rec, cwd, sb, done, err := l.host.useSession(ctx, tenant, id)
	if err != nil {
		return nil, nil, err
	}
	sn, err := l.takeSnapshot(ctx, tenant, rec, sb, name, auto)
	done()
	if err != nil {
		return nil, nil, err
	}
	out := make([]*Info, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cr := &CreateRequest{Env: rec.Env, Cwd: cwd, Limits: rec.Limits, IdleTTL: rec.IdleTTL, MaxLifetime: rec.MaxLifetime,
				Labels: clientLabels(rec.Labels), User: rec.User, Snapshot: name}
			if len(req.IDs) > 0 {
				cr.ID = req.IDs[i]
			}
			s, created, err := l.host.Create(ctx, tenant, cr)
			if err == nil && !created {
				err = errdefs.New(errdefs.ErrConflict, "session %q already exists", cr.ID)
				s = nil
			}
			out[i], errs[i] = s, err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			continue
		}
		for _, s := range out {
			if s != nil {
				_ = l.host.Delete(context.WithoutCancel(ctx), tenant, s.ID) // undo; the error returned is the fork's
			}
		}
		if auto {
			l.autoDeleteSnapshot(tenant, sn.ID)
		}
		return nil, nil, fmt.Errorf("fork %d of %d: %w", i+1, n, err)
	}
	return l.snapshotInfo(sn), out, nil
}

// GetSnapshot returns the tenant's snapshot name.
func (l *layerService) GetSnapshot(ctx context.Context, tenant, name string) (*SnapshotInfo, error) {
	sn, err := l.cfg.Store.GetSnapshot(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	return l.snapshotInfo(sn), nil
}

// ListSnapshots returns the tenant's snapshots by name.
func (l *layerService) ListSnapshots(ctx context.Context, tenant string) ([]*SnapshotInfo, error) {
	sns, err := l.cfg.Store.ListSnapshots(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := make([]*SnapshotInfo, 0, len(sns))
	for _, sn := range sns {
		out = append(out, l.snapshotInfo(sn))
	}
	return out, nil
}

// DeleteSnapshot deletes the tenant's snapshot name. A snapshot that
// sessions started from, or that another snapshot builds on, is
// ErrConflict.
func (l *layerService) DeleteSnapshot(ctx context.Context, tenant, name string) error {
	sn, err := l.cfg.Store.GetSnapshot(ctx, tenant, name)
	if err != nil {
		return err
	}
	return l.deleteSnapshot(ctx, sn)
}

func (l *layerService) deleteSnapshot(ctx context.Context, sn *Snapshot) error {
	cfg := l.cfg
	s := l
	s.mu.Lock()
	if s.snaps[sn.ID] > 0 || s.busy["id:"+sn.ID] {
		s.mu.Unlock()
		if info := l.snapshotInfo(sn); len(info.UsedBy) > 0 {
			return errdefs.New(errdefs.ErrConflict, "snapshot %q is in use by session %q; delete those sessions first", sn.Name, info.UsedBy)
		}
		return errdefs.New(errdefs.ErrConflict, "snapshot %q is in use (being exported or deleted)", sn.Name)
	}
	s.busy["id:"+sn.ID] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.busy, "id:"+sn.ID)
		s.mu.Unlock()
	}()
	all, err := cfg.Store.ListSnapshots(ctx, sn.Tenant)
	if err != nil {
		return err
	}
	for _, o := range all {
		if o.Parent == sn.ID {
			return errdefs.New(errdefs.ErrConflict, "snapshot %q is the base of snapshot %q; delete that one first", sn.Name, o.Name)
		}
	}
	dctx := context.WithoutCancel(ctx)
	if err := cfg.Store.DeleteSnapshot(dctx, sn.Tenant, sn.Name); err != nil {
		return err
	}
	// Without its record the layer is debris and the lease stale: a
	// failure here is cleaned up at the next start.
	if err := os.RemoveAll(l.snapshotDir(sn.ID)); err != nil {
		l.log.Warn("could not remove a snapshot's layer", "snapshot", sn.Name, "id", sn.ID, "error", err)
	}
	l.releaseSnapshotImage(sn)
	l.host.logFor(ctx).Info("snapshot deleted", "tenant", sn.Tenant, "snapshot", sn.Name, "id", sn.ID)
	return nil
}

// autoDeleteSnapshot deletes the fork snapshot id of tenant if nothing uses
// it any more.
func (l *layerService) autoDeleteSnapshot(tenant, id string) {
	all, err := l.cfg.Store.ListSnapshots(context.Background(), tenant)
	if err != nil {
		return
	}
	i := slices.IndexFunc(all, func(s *Snapshot) bool { return s.ID == id })
	if i < 0 || !all[i].AutoDelete {
		return
	}
	if err := l.deleteSnapshot(context.Background(), all[i]); err != nil && !errdefs.Is(err, errdefs.ErrConflict) {
		l.log.Warn("could not delete a fork's snapshot", "snapshot", all[i].Name, "error", err)
	}
}

// ExportSnapshot writes the tenant's snapshot name to w as a zstd tarball
// (see package snapshot), its layers merged into one.
func (l *layerService) ExportSnapshot(ctx context.Context, tenant, name string, w io.Writer) error {
	sn, err := l.cfg.Store.GetSnapshot(ctx, tenant, name)
	if err != nil {
		return err
	}
	s := l
	s.mu.Lock()
	if s.busy["id:"+sn.ID] {
		s.mu.Unlock()
		return errdefs.New(errdefs.ErrNotFound, "snapshot %q is being deleted", name)
	}
	s.snaps[sn.ID]++ // no delete while it is read
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.snaps[sn.ID]--; s.snaps[sn.ID] <= 0 {
			delete(s.snaps, sn.ID)
		}
		s.mu.Unlock()
	}()
	chain, err := l.snapshotChain(ctx, sn)
	if err != nil {
		return err
	}
	return snapshot.Export(ctx, w, snapshot.Manifest{Image: sn.Image, ImageDigest: sn.ImageDigest}, chain)
}

// ImportSnapshot stores the snapshot archive r (as ExportSnapshot writes
// it) as the tenant's snapshot name, and leases the image content it
// applies to. That content need not be stored yet (it is then leased by
// the first session made from the snapshot); until a pull or import stores
// it, with the same digest, sessions from the snapshot fail with an error
// that names the digest.
func (l *layerService) ImportSnapshot(ctx context.Context, tenant, name string, r io.Reader, opts ...ImportOption) (_ *SnapshotInfo, err error) {
	if err := checkName("snapshot", name); err != nil {
		return nil, err
	}
	cfg := l.cfg
	release, err := l.reserve("snap:"+tenant+"/"+name, fmt.Sprintf("snapshot %q", name))
	if err != nil {
		return nil, err
	}
	defer release()
	if err := l.checkLayerQuota(ctx, tenant, "snapshot"); err != nil {
		return nil, err
	}
	if _, err := cfg.Store.GetSnapshot(ctx, tenant, name); err == nil {
		return nil, errdefs.New(errdefs.ErrConflict, "snapshot %q already exists", name)
	} else if !errdefs.Is(err, errdefs.ErrNotFound) {
		return nil, err
	}
	// The archive's data may not eat into the free space the daemon keeps.
	limit := cfg.MaxImportBytes
	if d, err := l.host.Disk(); err == nil && d.Free > d.Min {
		limit = min(limit, int64(min(d.Free-d.Min, 1<<62)))
	}
	if err := l.host.CheckDisk(); err != nil {
		return nil, err
	}
	sn := &Snapshot{ID: newLayerID("n"), Tenant: tenant, Name: name}
	dir := l.snapshotDir(sn.ID)
	man, st, err := snapshot.Import(ctx, r, dir, snapshot.ImportLimits{MaxBytes: limit})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if err := image.ValidName(man.Image); err != nil {
		return nil, invalid("the archive names image %q: %v", man.Image, err)
	}
	sn.Image, sn.ImageDigest, sn.Overlays = man.Image, man.ImageDigest, man.Overlays
	sn.SizeBytes, sn.CreatedAt = st.Bytes, time.Now().UTC()
	for _, o := range opts {
		o(sn)
	}
	missing := false
	if sn.ImageDigest != "" {
		switch _, lerr := l.images.AcquireDigest(snapshotHolder(sn.ID), sn.ImageDigest); {
		case errdefs.Is(lerr, errdefs.ErrNotFound):
			missing = true
		case errdefs.Is(lerr, errdefs.ErrInvalidArgument):
			return nil, invalid("the archive names image digest %q; want sha256: and 64 lowercase hex digits", sn.ImageDigest)
		case lerr != nil:
			return nil, lerr
		default:
			defer func() {
				if err != nil {
					l.releaseSnapshotImage(sn)
				}
			}()
		}
	}
	if err := cfg.Store.CreateSnapshot(context.WithoutCancel(ctx), sn); err != nil {
		return nil, err
	}
	log := l.host.logFor(ctx)
	log.Info("snapshot imported", "tenant", tenant, "snapshot", name, "id", sn.ID, "bytes", st.Bytes)
	if missing {
		log.Warn("the imported snapshot's image content is not stored; sessions from it fail until it is pulled or imported",
			"tenant", tenant, "snapshot", name, "image", sn.Image, "image_digest", sn.ImageDigest)
	}
	return l.snapshotInfo(sn), nil
}

// clientLabels are the labels a client set: without the daemon's own
// (warren.dev/...), which a create refuses and which describe the source
// session, not a fork of it.
func clientLabels(l map[string]string) map[string]string {
	out := make(map[string]string, len(l))
	for k, v := range l {
		if !strings.HasPrefix(k, "warren.dev/") {
			out[k] = v
		}
	}
	return out
}
