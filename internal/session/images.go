package session

import (
	"slices"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/image"
)

// Images is what the manager needs of the image store. A session leases
// the content of its image for as long as its sandbox may mount it, so that
// the content outlives a new pull or an import over the name, or the
// name's removal: Acquire at creation (and again, idempotently, when a
// restarted daemon adopts the session), Release when it is deleted.
//
// A snapshot leases the content its changes apply to, by digest, for as
// long as it exists (holder snapshotHolder(ID)): from when it is taken or
// imported (or, imported before that content was stored, from the first
// session made of it) to its deletion. A session from a snapshot runs on
// that content, whatever the image's name points to by then.
type Images interface {
	Get(name string) (*image.Image, error)
	// Acquire returns the image called name and leases its content to
	// holder, a sandbox's name; a holder with a lease gets that lease's
	// content back.
	Acquire(holder, name string) (*image.Image, error)
	// AcquireDigest returns the content digest and leases it to holder;
	// content that is not stored is ErrNotFound.
	AcquireDigest(holder, digest string) (*image.Image, error)
	// Lease returns the digest of the content holder leases, if any.
	Lease(holder string) (digest string, ok bool)
	// Release ends holder's lease, if any.
	Release(holder string) error
	// RetainLeases ends the leases whose holder keep rejects.
	RetainLeases(keep func(holder string) bool) error
}

// snapshotHolderPrefix starts the lease holders of snapshots; sandbox
// names are hex and never start with it.
const snapshotHolderPrefix = "snapshot:"

// snapshotHolder is the image lease holder of the snapshot with this ID.
func snapshotHolder(id string) string { return snapshotHolderPrefix + id }

// acquireImage returns the image content a new session runs on and leases
// it to the session's sandbox. A session from a snapshot runs on the
// content the snapshot's changes apply to, by digest, and the snapshot
// leases it too (an imported snapshot may hold no lease yet); any other
// session runs on what rec.Image names now.
func (m *Manager) acquireImage(rec *Session, lay *attached) (*image.Image, error) {
	if lay == nil || lay.snap == nil || lay.snap.ImageDigest == "" {
		return m.images.Acquire(rec.Name, rec.Image)
	}
	sn := lay.snap
	if _, err := m.layers.leaseSnapshotImage(sn); err != nil {
		return nil, err
	}
	img, err := m.images.AcquireDigest(rec.Name, sn.ImageDigest)
	if err != nil {
		return nil, err
	}
	img.Name = sn.Image
	return img, nil
}

// leaseSnapshotImage leases the content sn's changes apply to to sn, and
// returns it. Content that is not stored is ErrConflict, with a message
// that names the digest: sessions from sn cannot start until a pull or
// import brings back that very content.
func (l *layerService) leaseSnapshotImage(sn *Snapshot) (*image.Image, error) {
	img, err := l.images.AcquireDigest(snapshotHolder(sn.ID), sn.ImageDigest)
	if errdefs.Is(err, errdefs.ErrNotFound) {
		return nil, errdefs.New(errdefs.ErrConflict, "snapshot %q holds changes to image %q as it was (%s), and the image store no longer has that content; pull or import that exact image again to start sessions from it", sn.Name, sn.Image, sn.ImageDigest)
	}
	return img, err
}

// releaseSnapshotImage ends the lease of a deleted snapshot on its image
// content.
func (l *layerService) releaseSnapshotImage(sn *Snapshot) {
	if err := l.images.Release(snapshotHolder(sn.ID)); err != nil {
		l.log.Warn("release the image lease of a snapshot", "snapshot", sn.Name, "id", sn.ID, "error", err)
	}
}

// recoverSnapshotImages makes the image leases agree with the snapshots
// at start: it ends the leases of snapshots that are gone (deleted by a
// daemon that stopped before it released them) and leases the content of
// each snapshot that holds none (snapshots of a daemon from before
// snapshot leases, and imports made before their content was stored).
func (l *layerService) recoverSnapshotImages(snaps []*Snapshot) {
	byID := map[string]*Snapshot{}
	for _, sn := range snaps {
		byID[sn.ID] = sn
	}
	err := l.images.RetainLeases(func(h string) bool {
		id, ok := strings.CutPrefix(h, snapshotHolderPrefix)
		return !ok || byID[id] != nil
	})
	if err != nil {
		l.log.Warn("drop the image leases of deleted snapshots", "error", err)
	}
	for _, sn := range snaps {
		if sn.ImageDigest == "" {
			continue
		}
		if _, err := l.leaseSnapshotImage(sn); err != nil {
			l.log.Warn("snapshot without its image content", "tenant", sn.Tenant, "snapshot", sn.Name, "id", sn.ID, "error", err)
		}
	}
}

// imageUser is the user a new session runs as when the request names none:
// the image's own (its config's User), if the sandboxes have user
// namespaces to run it in. Without them every session already runs as an
// unprivileged host user, and the image's user is not applied.
func (m *Manager) imageUser(req *CreateRequest, img *image.Image) (string, error) {
	u := img.User
	if req.User != "" || u == "" || u == "root" || u == "0" || u == "0:0" || !m.rt.Features().UserNS {
		return "", nil
	}
	if !userPattern.MatchString(u) {
		return "", invalid("image %q runs as user %q, which warren cannot resolve; name a user in the request", img.Name, u)
	}
	return u, nil
}

// ImageUsers returns the sessions created from the image called name, the
// sandboxes of stateless runs included, as "tenant/id", sorted. An image
// that sessions use is not removed (the API answers conflict).
func (m *Manager) ImageUsers(name string) []string {
	m.mu.Lock()
	var es []*entry
	var ks []key
	for k, e := range m.live {
		es = append(es, e)
		ks = append(ks, k)
	}
	m.mu.Unlock()
	var out []string
	for i, e := range es {
		e.mu.Lock()
		img := e.rec.Image
		e.mu.Unlock()
		if img == name {
			out = append(out, ks[i].tenant+"/"+ks[i].id)
		}
	}
	slices.Sort(out)
	return out
}

// releaseImage ends the lease of a deleted session's sandbox on its image
// content.
func (m *Manager) releaseImage(sandboxName string) {
	if err := m.images.Release(sandboxName); err != nil {
		m.log.Warn("release the image lease", "sandbox", sandboxName, "error", err)
	}
}

// retainImageLeases ends the image leases of sandboxes that no session
// owns any more: those of a daemon that stopped without deleting them.
// Snapshots' leases are left to recoverSnapshotImages, which knows the
// snapshots.
func (m *Manager) retainImageLeases(owned map[string]bool) {
	keep := func(h string) bool { return owned[h] || strings.HasPrefix(h, snapshotHolderPrefix) }
	if err := m.images.RetainLeases(keep); err != nil {
		m.log.Warn("drop stale image leases", "error", err)
	}
}

// keepImage makes sure an adopted session holds a lease on its image
// content (sessions of a daemon from before leases hold none).
func (m *Manager) keepImage(r *Session) {
	if _, err := m.images.Acquire(r.Name, r.Image); err != nil {
		m.log.Warn("lease the image of an adopted session", "session_id", r.ID, "sandbox", r.Name, "image", r.Image, "error", err)
	}
}
