package session

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
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

// LayersConfig enables workspaces and snapshots (Deps.Layers).
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

// Layers is the layers service: a tenant's workspaces (persistent
// directories mounted into sessions) and snapshots (a session's files,
// frozen into a layer that new sessions start from), and forks. It lives
// beside the manager, not in it, and sees sessions only through layerHost;
// the manager, for its part, asks it only to attach, detach and recover
// the layers of the sessions it creates, deletes and adopts. A daemon
// without layers has a Layers whose every call fails with the reason.
type Layers interface {
	CreateWorkspace(ctx context.Context, tenant, name string, sizeMB int64, shared bool) (*WorkspaceInfo, error)
	GetWorkspace(ctx context.Context, tenant, name string) (*WorkspaceInfo, error)
	ListWorkspaces(ctx context.Context, tenant string) ([]*WorkspaceInfo, error)
	DeleteWorkspace(ctx context.Context, tenant, name string) error

	Snapshot(ctx context.Context, tenant, id, name string) (*SnapshotInfo, error)
	Fork(ctx context.Context, tenant, id string, req *ForkRequest) (*SnapshotInfo, []*Info, error)
	GetSnapshot(ctx context.Context, tenant, name string) (*SnapshotInfo, error)
	ListSnapshots(ctx context.Context, tenant string) ([]*SnapshotInfo, error)
	DeleteSnapshot(ctx context.Context, tenant, name string) error
	ExportSnapshot(ctx context.Context, tenant, name string, w io.Writer) error
	ImportSnapshot(ctx context.Context, tenant, name string, r io.Reader, opts ...ImportOption) (*SnapshotInfo, error)
}

// ImportOption changes how ImportSnapshot stores a snapshot.
type ImportOption func(*Snapshot)

// ImportAutoDelete marks the imported snapshot as a fork's snapshot is
// marked: it goes with the last session started from it. A fleet node
// that moves a session imports its snapshot so on the target, where the
// moved session runs on it (docs/FLEET.md, "Drain and upgrades").
func ImportAutoDelete() ImportOption { return func(sn *Snapshot) { sn.AutoDelete = true } }

// layerHost is what the layers service needs of the manager, and all it
// may use of it.
type layerHost interface {
	// useSession marks a running session in use for one call and returns
	// its record, its shell's directory and its sandbox; done ends the use.
	useSession(ctx context.Context, tenant, id string) (rec *Session, cwd string, sb Sandbox, done func(), err error)
	Create(ctx context.Context, tenant string, req *CreateRequest) (*Info, bool, error)
	Delete(ctx context.Context, tenant, id string) error
	CheckDisk() error
	Disk() (DiskSpace, error)
	tenantLimits(ctx context.Context, tenant string) (TenantLimits, error)
	observe(op string, start time.Time, err *error)
	logFor(ctx context.Context) *slog.Logger
}

// layerService implements Layers. The records live in the LayerStore; the
// counts of what live sessions use live here and are rebuilt from the
// attachments at Recover.
type layerService struct {
	cfg    LayersConfig // (immutable)
	host   layerHost
	images Images
	log    *slog.Logger
	// defaultDiskMB and maxDiskMB are the manager's session disk limits,
	// which bound workspaces too (immutable).
	defaultDiskMB, maxDiskMB int64

	mu sync.Mutex // guards the fields below
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

var _ Layers = (*layerService)(nil)

type wsUse struct {
	rw, ro int
	// by maps session ids to their mode, for GetWorkspace.
	by map[string]string
}

// newLayerService returns the layers service for cfg on a manager with
// config mc.
func newLayerService(cfg LayersConfig, mc *Config, host layerHost, images Images, log *slog.Logger) *layerService {
	if cfg.MaxImportBytes == 0 {
		cfg.MaxImportBytes = min(mc.MaxLimits.DiskMB<<20, 64<<30)
	}
	return &layerService{cfg: cfg, host: host, images: images, log: log, defaultDiskMB: mc.DefaultLimits.DiskMB,
		maxDiskMB: mc.MaxLimits.DiskMB, ws: map[string]*wsUse{}, snaps: map[string]int{}, att: map[string]*Attachment{},
		busy: map[string]bool{}}
}

// layersOff is the Layers of a daemon that cannot have them: every call
// fails with err.
type layersOff struct{ err error }

var _ Layers = layersOff{}

func (o layersOff) CreateWorkspace(context.Context, string, string, int64, bool) (*WorkspaceInfo, error) {
	return nil, o.err
}
func (o layersOff) GetWorkspace(context.Context, string, string) (*WorkspaceInfo, error) {
	return nil, o.err
}
func (o layersOff) ListWorkspaces(context.Context, string) ([]*WorkspaceInfo, error) {
	return nil, o.err
}
func (o layersOff) DeleteWorkspace(context.Context, string, string) error { return o.err }
func (o layersOff) Snapshot(context.Context, string, string, string) (*SnapshotInfo, error) {
	return nil, o.err
}
func (o layersOff) Fork(context.Context, string, string, *ForkRequest) (*SnapshotInfo, []*Info, error) {
	return nil, nil, o.err
}
func (o layersOff) GetSnapshot(context.Context, string, string) (*SnapshotInfo, error) {
	return nil, o.err
}
func (o layersOff) ListSnapshots(context.Context, string) ([]*SnapshotInfo, error) { return nil, o.err }
func (o layersOff) DeleteSnapshot(context.Context, string, string) error           { return o.err }
func (o layersOff) ExportSnapshot(context.Context, string, string, io.Writer) error {
	return o.err
}
func (o layersOff) ImportSnapshot(context.Context, string, string, io.Reader, ...ImportOption) (*SnapshotInfo, error) {
	return nil, o.err
}

// reserve marks key busy, or fails with ErrConflict if it is.
func (s *layerService) reserve(key, what string) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
