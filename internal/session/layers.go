package session

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/workspace"
)

// Workspace is a tenant's named, persistent directory, mounted into
// sessions at /workspace.
type Workspace struct {
	// ID names its storage on this host (immutable).
	ID string
	// Tenant and Name identify it to clients (immutable).
	Tenant, Name string
	// SizeMB is its size limit (0: none, on a daemon without disk quotas).
	SizeMB int64
	// Shared workspaces may be mounted read-write by several sessions at
	// once; others by one at a time.
	Shared    bool
	CreatedAt time.Time
}

// Snapshot is a session's root filesystem changes, frozen into a read-only
// layer that new sessions start from (immutable once stored).
type Snapshot struct {
	// ID names its layer on this host, <snapshot dir>/<ID>.
	ID           string
	Tenant, Name string
	// Image and ImageDigest are the image the changes apply to.
	Image, ImageDigest string
	// Parent is the ID of the snapshot the source session started from
	// ("" for none): its layer lies below this one.
	Parent string
	// Overlays are the image's host directories (such as /usr) whose
	// changes the layer also holds, in the order of the layer's ov/<i>.
	Overlays []string
	// Session is the id of the session it was taken from ("" if imported).
	Session   string
	SizeBytes int64
	// AutoDelete marks the snapshot of a fork: it goes with the last
	// session that uses it.
	AutoDelete bool
	CreatedAt  time.Time
}

// Attachment records what a session uses of workspaces and snapshots.
type Attachment struct {
	// Session is the session's sandbox name (Session.Name).
	Session           string
	Tenant, SessionID string
	// Workspace is the ID of the mounted workspace, "" for none, and
	// WorkspaceMode "rw" or "ro".
	Workspace, WorkspaceMode string
	// Snapshot is the ID of the snapshot the session started from.
	Snapshot string
}

// LayerStore keeps the records of workspaces, snapshots and attachments.
// Implementations: store.SQLite. Errors are classified like Store's:
// ErrConflict for a (tenant, name) that exists, ErrNotFound for a missing
// one. Tenant "" lists every tenant's.
type LayerStore interface {
	CreateWorkspace(ctx context.Context, w *Workspace) error
	GetWorkspace(ctx context.Context, tenant, name string) (*Workspace, error)
	ListWorkspaces(ctx context.Context, tenant string) ([]*Workspace, error)
	DeleteWorkspace(ctx context.Context, tenant, name string) error

	CreateSnapshot(ctx context.Context, s *Snapshot) error
	GetSnapshot(ctx context.Context, tenant, name string) (*Snapshot, error)
	ListSnapshots(ctx context.Context, tenant string) ([]*Snapshot, error)
	DeleteSnapshot(ctx context.Context, tenant, name string) error

	PutAttachment(ctx context.Context, a *Attachment) error
	ListAttachments(ctx context.Context) ([]*Attachment, error)
	DeleteAttachment(ctx context.Context, session string) error
}

// LayersConfig enables workspaces and snapshots (SetLayers).
type LayersConfig struct {
	Store LayerStore
	// Workspaces holds the workspaces' directories.
	Workspaces *workspace.Store
	// SnapshotDir holds the snapshots' layers, one directory each.
	SnapshotDir string
	// MaxImportBytes caps the file data of an imported snapshot (0: the
	// largest disk limit a session may have, at most 64 GiB). An import
	// also never takes the free space the daemon keeps (MinFreeDiskMB).
	MaxImportBytes int64
}

// layerState is what the manager knows of workspaces and snapshots in use.
// The records live in the LayerStore; the counts live here and are rebuilt
// from the attachments at Recover.
type layerState struct {
	cfg *LayersConfig // set by SetLayers before Recover (immutable after)

	mu sync.Mutex
	// ws counts the sessions mounting each workspace (by ID).
	ws map[string]*wsUse
	// snaps counts the users of each snapshot (by ID): sessions started
	// from it, and exports in progress.
	snaps map[string]int
	// att are the attachments of live sessions, by sandbox name.
	att map[string]*Attachment
	// busy are "ws:" or "snap:" + tenant + "/" + name being created or
	// deleted, and "id:" + ID of those being deleted.
	busy map[string]bool
}

type wsUse struct {
	rw, ro int
	// by maps session ids to their mode, for GetWorkspace.
	by map[string]string
}

// SetLayers enables workspaces and snapshots. Call it before Recover.
func (m *Manager) SetLayers(cfg LayersConfig) {
	if cfg.MaxImportBytes == 0 {
		cfg.MaxImportBytes = min(m.cfg.MaxLimits.DiskMB<<20, 64<<30)
	}
	m.lay.cfg = &cfg
}

func (m *Manager) layersOn() error {
	if m.lay.cfg == nil {
		return errdefs.New(errdefs.ErrUnavailable, "this daemon has no workspaces or snapshots")
	}
	if !m.rt.Features().UserNS {
		return invalid("workspaces and snapshots need sandboxes in user namespaces (idmapped mounts); this daemon runs without them")
	}
	return nil
}

// reserve marks key busy, or fails with ErrConflict if it is.
func (s *layerState) reserve(key, what string) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy == nil {
		s.busy = map[string]bool{}
	}
	if s.busy[key] {
		return nil, errdefs.New(errdefs.ErrConflict, "%s is being created or deleted", what)
	}
	s.busy[key] = true
	return func() {
		s.mu.Lock()
		delete(s.busy, key)
		s.mu.Unlock()
	}, nil
}

// initLocked makes the maps.
//
// Preconditions: s.mu is held.
func (s *layerState) initLocked() {
	if s.ws == nil {
		s.ws, s.snaps, s.att = map[string]*wsUse{}, map[string]int{}, map[string]*Attachment{}
	}
	if s.busy == nil {
		s.busy = map[string]bool{}
	}
}

// newLayerID names a workspace's or snapshot's storage on this host.
func newLayerID(prefix string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return fmt.Sprintf("%s%x", prefix, b)
}

// checkName validates a workspace or snapshot name.
func checkName(kind, name string) error {
	if !idPattern.MatchString(name) {
		return invalid("%s name %q must match [a-z0-9][a-z0-9_-]{0,62}", kind, name)
	}
	return nil
}
