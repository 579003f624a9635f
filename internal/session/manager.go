package session

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Config holds the manager's limits and defaults. Zero values are replaced
// by the defaults of DefaultConfig.
type Config struct {
	MaxSessions        int
	DefaultImage       string
	DefaultLimits      Limits
	MaxLimits          Limits
	DefaultIdleTTL     time.Duration
	MaxIdleTTL         time.Duration
	DefaultMaxLifetime time.Duration
	MaxLifetime        time.Duration
	DefaultTimeout     time.Duration
	MaxTimeout         time.Duration
	DefaultMaxOutput   int64
	MaxOutput          int64
	MaxFileBytes       int64
	ReapInterval       time.Duration
	CreateTimeout      time.Duration
	BackgroundLogBytes int
	// MinFreeDiskMB is the free space, in MiB, the data directory's
	// filesystem must keep for a new session to be created: 0 means 1 GiB
	// or 5% of the filesystem, whichever is smaller; negative turns the
	// check off. Running sessions are never stopped for it.
	MinFreeDiskMB int64
	// DefaultNetwork and DefaultNetworkAllow are the network of a session
	// created without one (network.default_mode, network.default_allow):
	// "" or "none" is loopback only. A tenant whose ceiling is below the
	// default gets none (network.go).
	DefaultNetwork      string
	DefaultNetworkAllow []string
	// PoolSize is how many sandboxes of the default image are kept started
	// and waiting, so that a create with default settings takes one rather
	// than starting a sandbox (see pool.go). 0: no pool.
	PoolSize int
}

// DefaultConfig is what a daemon without configuration uses.
func DefaultConfig() Config {
	return Config{
		MaxSessions:        100,
		DefaultImage:       "base",
		DefaultLimits:      Limits{MemoryMB: 512, CPUs: 1, Pids: 256, DiskMB: 1024},
		MaxLimits:          Limits{MemoryMB: 16384, CPUs: 16, Pids: 32768, DiskMB: 1 << 20},
		DefaultIdleTTL:     30 * time.Minute,
		MaxIdleTTL:         7 * 24 * time.Hour,
		DefaultMaxLifetime: 24 * time.Hour,
		MaxLifetime:        30 * 24 * time.Hour,
		DefaultTimeout:     2 * time.Minute,
		MaxTimeout:         time.Hour,
		DefaultMaxOutput:   1 << 20,
		MaxOutput:          16 << 20,
		MaxFileBytes:       1 << 30,
		ReapInterval:       time.Second,
		CreateTimeout:      30 * time.Second,
		BackgroundLogBytes: 64 << 10,
	}
}

func (c *Config) fill() {
	d := DefaultConfig()
	if c.MaxSessions == 0 {
		c.MaxSessions = d.MaxSessions
	}
	if c.DefaultImage == "" {
		c.DefaultImage = d.DefaultImage
	}
	fillLimits(&c.DefaultLimits, d.DefaultLimits)
	fillLimits(&c.MaxLimits, d.MaxLimits)
	for _, p := range []struct{ v, d *time.Duration }{
		{&c.DefaultIdleTTL, &d.DefaultIdleTTL}, {&c.MaxIdleTTL, &d.MaxIdleTTL},
		{&c.DefaultMaxLifetime, &d.DefaultMaxLifetime}, {&c.MaxLifetime, &d.MaxLifetime},
		{&c.DefaultTimeout, &d.DefaultTimeout}, {&c.MaxTimeout, &d.MaxTimeout},
		{&c.ReapInterval, &d.ReapInterval}, {&c.CreateTimeout, &d.CreateTimeout},
	} {
		if *p.v == 0 {
			*p.v = *p.d
		}
	}
	if c.DefaultMaxOutput == 0 {
		c.DefaultMaxOutput = d.DefaultMaxOutput
	}
	if c.MaxOutput == 0 {
		c.MaxOutput = d.MaxOutput
	}
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = d.MaxFileBytes
	}
	if c.BackgroundLogBytes == 0 {
		c.BackgroundLogBytes = d.BackgroundLogBytes
	}
}

func fillLimits(l *Limits, d Limits) {
	if l.MemoryMB == 0 {
		l.MemoryMB = d.MemoryMB
	}
	if l.DiskMB == 0 {
		l.DiskMB = d.DiskMB
	}
	if l.CPUs == 0 {
		l.CPUs = d.CPUs
	}
	if l.Pids == 0 {
		l.Pids = d.Pids
	}
}

// Manager runs sessions: it is the single place where their lifecycle is
// decided. Transports call it; it calls the store, the image store and the
// sandbox runtime.
type Manager struct {
	cfg Config
	// fleet lists the other fleet nodes' sessions (SetFleetLister); nil
	// on a single node.
	fleet     FleetLister
	fleetNode string
	store     Store
	rt        Runtime
	images    Images
	log       *slog.Logger

	mu      sync.Mutex // guards live and closing
	live    map[key]*entry
	closing bool

	stop     chan struct{}
	reaperWG sync.WaitGroup

	tenants Tenants  // nil: only the daemon's limits (immutable)
	net     Network  // nil: no egress (immutable)
	obs     Observer // never nil (immutable)

	pool     pool
	creating atomic.Int64 // creates in progress; the pool waits for them

	reconcileMu sync.Mutex      // one reconciler pass at a time
	suspects    map[string]bool // leftovers unowned on the last pass

	// layers is the layers service, nil when the daemon has none; its
	// public face is layersAPI, which says why when there is none.
	layers    *layerService
	layersAPI Layers

	onExpire ExpireFunc // guarded by mu; pause.go
}

type key struct{ tenant, id string }

// entry is one session known to the manager.
type entry struct {
	ready chan struct{} // closed when creation ended, ok or not
	gone  chan struct{} // closed when the session is deleted and removed
	err   error         // creation failed; set before ready closes
	// goneErr is the deletion's answer when its record could not be
	// removed (unavailable); set before gone closes, so a second DELETE
	// that waited on the first gets it too.
	goneErr error

	sb Sandbox // set before ready closes, if creation succeeded

	mu       sync.Mutex // guards rec, cwd, deleting and public
	rec      *Session
	cwd      string
	deleting bool
	public   map[int]bool // ports served without authentication (ports.go)

	inflight atomic.Int64 // calls in progress; the reaper leaves such sessions alone
	lastUsed atomic.Int64 // unix nanoseconds
	flushed  atomic.Int64 // the lastUsed the store has
}

// Deps are what a manager drives and reports to. Store, Runtime and
// Images are required.
type Deps struct {
	Store   Store
	Runtime Runtime
	Images  Images
	// Tenants gives per-tenant limits; nil: only the daemon's apply.
	Tenants Tenants
	// Observer hears what the manager does (Recover included); nil: no one.
	Observer Observer
	// Layers enables workspaces, snapshots and forks (the layers service,
	// Manager.Layers); nil: the daemon has none.
	Layers *LayersConfig
	// Log is the manager's logger; nil: slog.Default().
	Log *slog.Logger
	// Network gives sessions egress; nil: every session has mode none.
	Network Network
}

// NewManager returns a manager. Call Recover before serving and Close at the
// end.
func NewManager(cfg Config, d Deps) *Manager {
	cfg.fill()
	m := &Manager{cfg: cfg, store: d.Store, rt: d.Runtime, images: d.Images, log: d.Log, tenants: d.Tenants, obs: d.Observer, net: d.Network,
		live: map[key]*entry{}, stop: make(chan struct{})}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.obs == nil {
		m.obs = nopObserver{}
	}
	switch {
	case d.Layers == nil:
		m.layersAPI = layersOff{errdefs.New(errdefs.ErrUnavailable, "this daemon has no workspaces or snapshots")}
	default:
		m.layers = newLayerService(*d.Layers, &m.cfg, m, m.images, m.log)
		m.layersAPI = m.layers
		if !m.rt.Features().UserNS {
			// The service still recovers what an earlier daemon left.
			m.layersAPI = layersOff{invalid("workspaces and snapshots need sandboxes in user namespaces (idmapped mounts); this daemon runs without them")}
		}
	}
	return m
}

// Layers is the daemon's layers service: workspaces, snapshots and forks.
func (m *Manager) Layers() Layers { return m.layersAPI }

// Config returns the manager's effective configuration.
func (m *Manager) Config() Config { return m.cfg }

// Recover makes the host agree with the store before serving. Sessions an
// earlier daemon left running are adopted: their sandboxes, processes,
// files and shell state carry on. A running session whose sandbox is gone
// is kept as failed, with the reason, until it is deleted or expires.
// Sessions caught half-way through creation or deletion, and every sandbox
// leftover no session owns, are removed.
func (m *Manager) Recover(ctx context.Context) error {
	recs, err := m.store.ListSessions(ctx, "")
	if err != nil {
		return fmt.Errorf("list stored sessions: %w", err)
	}
	owned := map[string]bool{}
	var remove []string
	for _, r := range recs {
		switch {
		case r.State == StateRunning && r.Labels[hiddenLabel] == "":
			owned[r.Name] = true
			if err := m.adopt(ctx, r); err != nil {
				r.State, r.Pid = StateFailed, 0
				r.Reason = "the sandbox did not survive while the daemon was away: " + err.Error()
				m.log.Warn("session lost", "session_id", r.ID, "tenant", r.Tenant, "sandbox", r.Name, "reason", r.Reason)
				m.obs.Reconciled(ReconcileLost)
				if err := m.store.UpdateSession(ctx, r); err != nil {
					return fmt.Errorf("mark session %s failed: %w", r.ID, err)
				}
				if err := m.rt.Remove(r.Name); err != nil {
					m.log.Warn("could not remove the remains of a lost session", "sandbox", r.Name, "error", err)
				}
				m.addFailed(r)
			}
		case r.State == StateFailed && r.Labels[hiddenLabel] == "":
			owned[r.Name] = true
			m.addFailed(r)
		default:
			// Creating, deleting, or the sandbox of a one-shot run whose
			// caller is gone: finish the job.
			m.log.Info("removing a session the previous daemon left unfinished", "session_id", r.ID, "tenant", r.Tenant,
				"sandbox", r.Name, "state", r.State)
			if err := m.store.DeleteSession(ctx, r.Tenant, r.ID); err != nil {
				return fmt.Errorf("forget session %s: %w", r.ID, err)
			}
			m.obs.Reconciled(ReconcileRemovedUnfinished)
			remove = append(remove, r.Name)
		}
	}
	left, err := m.rt.Leftovers()
	if err != nil {
		return fmt.Errorf("list sandbox leftovers: %w", err)
	}
	for _, n := range left {
		if !owned[n] && !slices.Contains(remove, n) {
			m.log.Info("removing sandbox leftovers no session owns", "sandbox", n)
			m.obs.Reconciled(ReconcileRemovedLeftover)
			remove = append(remove, n)
		}
	}
	for _, n := range remove {
		if n == "" {
			continue
		}
		if err := m.rt.Remove(n); err != nil {
			m.log.Warn("could not remove sandbox leftovers", "sandbox", n, "error", err)
		}
	}
	m.retainImageLeases(owned)
	if m.layers != nil {
		live := map[string]bool{}
		m.mu.Lock()
		for _, e := range m.live {
			live[e.rec.Name] = true
		}
		m.mu.Unlock()
		if err := m.layers.recover(ctx, live); err != nil {
			return err
		}
	}
	m.reaperWG.Add(3)
	go m.reaper()
	go m.reconciler()
	go m.poolLoop()
	return nil
}

// adopt takes over the running sandbox of a stored session.
func (m *Manager) adopt(ctx context.Context, r *Session) error {
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sb, err := m.rt.Adopt(actx, r.Name, r.Pid)
	if err != nil {
		return err
	}
	m.keepImage(r)
	m.adoptNetwork(r, sb.Pid())
	cwd, err := sb.Cwd(actx)
	if err != nil || cwd == "" {
		cwd = r.BaseDir
	}
	e := &entry{ready: make(chan struct{}), gone: make(chan struct{}), sb: sb, rec: r, cwd: cwd}
	// The idle clock goes on from the last use the store knows of, which
	// is at most flushEvery old.
	e.lastUsed.Store(r.LastUsedAt.UnixNano())
	e.flushed.Store(r.LastUsedAt.UnixNano())
	close(e.ready)
	k := key{r.Tenant, r.ID}
	m.mu.Lock()
	m.live[k] = e
	m.mu.Unlock()
	go m.watch(k, e)
	m.log.Info("session adopted", "session_id", r.ID, "tenant", r.Tenant, "sandbox", r.Name, "pid", r.Pid)
	m.obs.Reconciled(ReconcileAdopted)
	return nil
}

// addFailed lists a failed session with no sandbox, so clients learn why
// and can delete it.
func (m *Manager) addFailed(r *Session) {
	e := &entry{ready: make(chan struct{}), gone: make(chan struct{}), rec: r, cwd: r.BaseDir}
	e.lastUsed.Store(r.LastUsedAt.UnixNano())
	close(e.ready)
	m.mu.Lock()
	m.live[key{r.Tenant, r.ID}] = e
	m.mu.Unlock()
}

var (
	idPattern    = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	envPattern   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	labelPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$`)
	userPattern  = regexp.MustCompile(`^([a-z_][a-z0-9_.-]{0,31}|[0-9]{1,10})(:([a-z_][a-z0-9_.-]{0,31}|[0-9]{1,10}))?$`)
)

// CreateRequest is a validated-on-use request to create a session.
type CreateRequest struct {
	ID          string
	Image       string
	Env         map[string]string
	Cwd         string
	Limits      Limits
	Network     string
	IdleTTL     time.Duration
	MaxLifetime time.Duration
	Labels      map[string]string
	// User runs the session's processes as a user of the image: a name
	// from its /etc/passwd, "uid" or "uid:gid"; "" or "root" is root.
	User string
	// Hidden sessions back stateless runs; they are not listed.
	Hidden bool
	// NetworkAllow and NetworkDeny are the rules of the mode Network
	// (none, open, allowlist; network.go).
	NetworkAllow, NetworkDeny []string
	// networkDefaulted: the request named no network and got the
	// daemon's default (which a tenant's ceiling may take back).
	networkDefaulted bool
	// Workspace names a workspace of the tenant to mount at /workspace,
	// WorkspaceMode "rw" (the default) or "ro"; Snapshot names a snapshot
	// to start from (workspaces.go, snapshots.go).
	Workspace, WorkspaceMode, Snapshot string
}

func invalid(format string, args ...any) error {
	return errdefs.New(errdefs.ErrInvalidArgument, format, args...)
}

func checkEnv(env map[string]string) error {
	if len(env) > 1024 {
		return invalid("env has %d variables; at most 1024 are allowed", len(env))
	}
	size := 0
	for k, v := range env {
		if !envPattern.MatchString(k) {
			return invalid("env name %q is not a valid variable name", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return invalid("env %s contains a NUL byte", k)
		}
		size += len(k) + len(v)
	}
	if size > 256<<10 {
		return invalid("env is %d bytes; at most 256 KiB are allowed", size)
	}
	return nil
}

func checkPath(field, p string) error {
	if p == "" {
		return nil
	}
	if !strings.HasPrefix(p, "/") {
		return invalid("%s %q must be an absolute path", field, p)
	}
	if strings.IndexByte(p, 0) >= 0 || len(p) > 4096 {
		return invalid("%s is not a valid path", field)
	}
	return nil
}

func (m *Manager) resolveLimits(l Limits) (Limits, error) {
	d, mx := m.cfg.DefaultLimits, m.cfg.MaxLimits
	if l.MemoryMB < 0 || l.CPUs < 0 || l.Pids < 0 || l.DiskMB < 0 {
		return l, invalid("limits must not be negative")
	}
	disk := m.rt.Features().DiskQuota
	if l.DiskMB != 0 && !disk {
		return l, invalid("limits.disk_mb cannot be enforced by this daemon (it runs without a layer store); leave it unset")
	}
	fillLimits(&l, d)
	if !disk {
		l.DiskMB = 0
	}
	switch {
	case l.MemoryMB < 16:
		return l, invalid("limits.memory_mb must be at least 16")
	case l.MemoryMB > mx.MemoryMB:
		return l, invalid("limits.memory_mb %d exceeds the maximum of %d", l.MemoryMB, mx.MemoryMB)
	case l.Pids < 8:
		return l, invalid("limits.pids must be at least 8")
	case l.Pids > mx.Pids:
		return l, invalid("limits.pids %d exceeds the maximum of %d", l.Pids, mx.Pids)
	case l.CPUs < 0.01:
		return l, invalid("limits.cpus must be at least 0.01")
	case l.CPUs > mx.CPUs:
		return l, invalid("limits.cpus %g exceeds the maximum of %g", l.CPUs, mx.CPUs)
	case disk && l.DiskMB < 16:
		return l, invalid("limits.disk_mb must be at least 16")
	case disk && l.DiskMB > mx.DiskMB:
		return l, invalid("limits.disk_mb %d exceeds the maximum of %d", l.DiskMB, mx.DiskMB)
	}
	return l, nil
}

func newID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	b := make([]byte, 12)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "s-" + string(b)
}

// Create creates a session for tenant, or returns the existing one if the
// request names an id the tenant already has (created is then false). The
// session comes back as Get shows it, live details included.
func (m *Manager) Create(ctx context.Context, tenant string, req *CreateRequest) (*Info, bool, error) {
	s, created, err := m.createSession(ctx, tenant, req)
	if err != nil {
		return nil, false, err
	}
	if e, err := m.lookup(tenant, s.ID); err == nil {
		select {
		case <-e.ready:
			if e.err == nil {
				return m.info(e), created, nil
			}
		default:
		}
	}
	// Deleted meanwhile: what the create made is all there is to show.
	return &Info{Session: *s, Cwd: s.BaseDir}, created, nil
}

func (m *Manager) createSession(ctx context.Context, tenant string, req *CreateRequest) (s *Session, created bool, err error) {
	start := time.Now()
	defer func() {
		if err != nil || created {
			m.obs.Created(time.Since(start), err)
		}
	}()
	rec, err := m.validateCreate(req)
	if err != nil {
		return nil, false, err
	}
	rec.Tenant = tenant
	tl, err := m.tenantLimits(ctx, tenant)
	if err != nil {
		if errdefs.Is(err, errdefs.ErrUnavailable) {
			// This node cannot read the tenant's settings now (a fleet
			// node cut off from its registry, not knowing it yet):
			// nothing was made, and another node may take the create.
			err = NodeRefused(ctx, err)
		}
		return nil, false, err
	}
	if err := m.checkNetworkCeiling(tenant, tl, req, rec); err != nil {
		return nil, false, err
	}
	if tl.MaxLifetime > 0 && req.MaxLifetime == 0 && rec.MaxLifetime > tl.MaxLifetime {
		rec.MaxLifetime = tl.MaxLifetime // the tenant's ceiling is its default
	}
	// Read before taking the lock; it matters only for a new session.
	diskErr := m.CheckDisk()
	k := key{tenant, rec.ID}
	for {
		m.mu.Lock()
		if m.closing {
			m.mu.Unlock()
			return nil, false, errdefs.New(errdefs.ErrUnavailable, "the daemon is shutting down")
		}
		e, exists := m.live[k]
		if !exists {
			if m.countLocked() >= m.cfg.MaxSessions {
				m.mu.Unlock()
				return nil, false, NodeRefused(ctx, errdefs.New(errdefs.ErrResourceExhausted, "the daemon holds its maximum of %d sessions; delete one or raise --max-sessions", m.cfg.MaxSessions))
			}
			if err := m.checkQuotaLocked(tl, rec); err != nil {
				m.mu.Unlock()
				return nil, false, err
			}
			if diskErr != nil {
				m.mu.Unlock()
				m.logFor(ctx).Warn("session refused", "session_id", rec.ID, "tenant", tenant, "reason", diskErr)
				return nil, false, NodeRefused(ctx, diskErr)
			}
			e = &entry{ready: make(chan struct{}), gone: make(chan struct{}), rec: rec}
			e.lastUsed.Store(rec.CreatedAt.UnixNano())
			e.flushed.Store(rec.CreatedAt.UnixNano())
			m.live[k] = e
			m.mu.Unlock()
			return m.create(ctx, k, e, req)
		}
		m.mu.Unlock()
		// The id exists: wait until it settles, then return it (or
		// create it anew if it was being deleted).
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
		if e.err != nil {
			return nil, false, e.err
		}
		e.mu.Lock()
		deleting := e.deleting
		e.mu.Unlock()
		if !deleting {
			have := e.snapshot()
			if diff := createDiff(req, rec, have); len(diff) > 0 {
				return nil, false, errdefs.New(errdefs.ErrConflict,
					"session %q exists with a different %s; delete it first, or create it with the same parameters (or none) to get it back",
					rec.ID, strings.Join(diff, ", "))
			}
			return have, false, nil
		}
		select {
		case <-e.gone:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

func (m *Manager) countLocked() int { return len(m.live) }

func (m *Manager) validateCreate(req *CreateRequest) (*Session, error) {
	id := req.ID
	if id == "" {
		id = newID()
	} else if !idPattern.MatchString(id) {
		return nil, invalid("id %q must match [a-z0-9][a-z0-9_-]{0,62}", id)
	}
	if err := checkEnv(req.Env); err != nil {
		return nil, err
	}
	if err := checkPath("cwd", req.Cwd); err != nil {
		return nil, err
	}
	network, err := m.checkNetwork(req)
	if err != nil {
		return nil, err
	}
	limits, err := m.resolveLimits(req.Limits)
	if err != nil {
		return nil, err
	}
	ttl := req.IdleTTL
	switch {
	case ttl < 0:
		return nil, invalid("ttl_seconds must not be negative")
	case ttl == 0:
		ttl = m.cfg.DefaultIdleTTL
	case ttl > m.cfg.MaxIdleTTL:
		return nil, invalid("ttl_seconds exceeds the maximum of %d", int64(m.cfg.MaxIdleTTL/time.Second))
	}
	life := req.MaxLifetime
	switch {
	case life < 0:
		return nil, invalid("max_lifetime_seconds must not be negative")
	case life == 0:
		life = m.cfg.DefaultMaxLifetime
	case life > m.cfg.MaxLifetime:
		return nil, invalid("max_lifetime_seconds exceeds the maximum of %d", int64(m.cfg.MaxLifetime/time.Second))
	}
	if len(req.Labels) > 64 {
		return nil, invalid("at most 64 labels are allowed")
	}
	for k, v := range req.Labels {
		if !labelPattern.MatchString(k) {
			return nil, invalid("label key %q must match [A-Za-z0-9][A-Za-z0-9._/-]{0,62}", k)
		}
		if strings.HasPrefix(k, "warren.dev/") {
			return nil, invalid("label keys starting with warren.dev/ are reserved")
		}
		if len(v) > 256 || strings.IndexByte(v, 0) >= 0 {
			return nil, invalid("label %s: the value must be at most 256 bytes of text", k)
		}
	}
	user := req.User
	if user == "root" {
		user = ""
	}
	if user != "" && !userPattern.MatchString(user) {
		return nil, invalid("user %q must be a user name, uid or uid:gid", user)
	}
	if user != "" && !m.rt.Features().UserNS {
		return nil, invalid("user needs sandboxes in user namespaces; this daemon runs without them and every session already runs as an unprivileged user")
	}
	img := req.Image
	if img == "" {
		img = m.cfg.DefaultImage
	}
	labels := req.Labels
	if req.Hidden {
		labels = map[string]string{hiddenLabel: "1"}
	}
	now := time.Now().UTC()
	return &Session{
		ID:          id,
		Name:        sandboxName(),
		Image:       img,
		State:       StateCreating,
		CreatedAt:   now,
		LastUsedAt:  now,
		IdleTTL:     ttl,
		MaxLifetime: life,
		BaseDir:     req.Cwd,
		Env:         req.Env,
		Limits:      limits,
		Network:     network,
		Labels:      labels,
		User:        user,
	}, nil
}

// sandboxName returns a host-unique name for a sandbox's directory and
// cgroup; client ids are only unique within a tenant.
func sandboxName() string {
	b := make([]byte, 8)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func (m *Manager) create(ctx context.Context, k key, e *entry, req *CreateRequest) (*Session, bool, error) {
	hidden := req.Hidden
	m.creating.Add(1)
	defer m.creating.Add(-1)
	// The client may go away; the creation still completes, so a retry of
	// an idempotent create finds the session.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.CreateTimeout)
	defer cancel()
	rec := e.rec
	if w := m.takeWarm(rec, req); w != nil {
		if s, ok, err := m.createWarm(ctx, k, e, w, req); ok {
			return s, err == nil, err
		}
		// The warm sandbox would not take the session: start a cold one.
	}
	fail := func(err error) (*Session, bool, error) {
		if c := errdefs.ClassOf(err); c == errdefs.ErrUnavailable || c == errdefs.ErrInternal {
			m.logFor(ctx).Warn("session create failed", "session_id", rec.ID, "tenant", rec.Tenant, "sandbox", rec.Name, "error", err)
		}
		m.abandon(k, e, err)
		return nil, false, err
	}
	lay, err := m.attachLayers(ctx, rec, req)
	if err != nil {
		return fail(err)
	}
	// rec is in m.live already, where List and Get read it under e.mu:
	// every change to it from here on is made under that lock.
	if lay != nil && lay.snap != nil {
		e.mu.Lock()
		rec.Image = lay.snap.Image
		e.mu.Unlock()
	}
	if lay != nil {
		failed := fail
		fail = func(err error) (*Session, bool, error) { m.detachLayers(rec.Name); return failed(err) }
	}
	img, err := m.acquireImage(rec, lay)
	if err != nil {
		if errdefs.Is(err, errdefs.ErrNotFound) {
			return fail(invalid("image %q does not exist", rec.Image))
		}
		return fail(err)
	}
	released := fail
	fail = func(err error) (*Session, bool, error) { m.releaseImage(rec.Name); return released(err) }
	u, err := m.imageUser(req, img)
	if err != nil {
		return fail(err)
	}
	e.mu.Lock()
	if u != "" {
		rec.User = u
	}
	if rec.BaseDir == "" {
		rec.BaseDir = img.WorkingDir
	}
	if rec.BaseDir == "" {
		rec.BaseDir = "/workspace"
	}
	e.mu.Unlock()
	if err := m.store.CreateSession(ctx, rec); err != nil {
		return fail(fmt.Errorf("record session: %w", err))
	}
	env := mergeEnv(img.Env, rec.Env)
	env = append(env, "HOSTNAME="+rec.ID)
	cfg := &SandboxConfig{
		Name:               rec.Name,
		Hostname:           rec.ID,
		Lower:              []string{img.RootFS},
		BaseDir:            rec.BaseDir,
		Env:                env,
		Shell:              img.Shell,
		MemoryBytes:        rec.Limits.MemoryMB << 20,
		Pids:               rec.Limits.Pids,
		CPUs:               rec.Limits.CPUs,
		DiskBytes:          rec.Limits.DiskMB << 20,
		User:               rec.User,
		BackgroundLogBytes: m.cfg.BackgroundLogBytes,
	}
	for _, d := range img.HostDirs {
		cfg.Overlays = append(cfg.Overlays, SandboxOverlay{Source: d, Target: d})
	}
	if err := lay.apply(cfg, img); err != nil {
		return fail(err)
	}
	start := time.Now()
	sb, err := m.rt.Start(ctx, cfg)
	if err != nil {
		m.forgetRecord(ctx, rec)
		if errdefs.ClassOf(err) == errdefs.ErrInvalidArgument {
			return fail(err) // the request's fault, such as an unknown user
		}
		return fail(errdefs.New(errdefs.ErrUnavailable, "could not start the sandbox: %w", err))
	}
	if err := m.attachNetwork(ctx, rec, sb, req); err != nil {
		sb.Destroy(ctx)
		m.forgetRecord(ctx, rec)
		return fail(err)
	}
	e.mu.Lock()
	rec.State = StateRunning
	rec.Pid = sb.Pid()
	e.cwd = rec.BaseDir
	e.mu.Unlock()
	if err := m.store.UpdateSession(ctx, rec); err != nil {
		sb.Destroy(ctx)
		m.forgetRecord(ctx, rec)
		return fail(fmt.Errorf("record session: %w", err))
	}
	e.sb = sb
	close(e.ready)
	go m.watch(k, e)
	if !hidden {
		m.logFor(ctx).Info("session created", "session_id", rec.ID, "tenant", rec.Tenant, "sandbox", rec.Name, "image", rec.Image, "duration", time.Since(start))
	}
	return e.snapshot(), true, nil
}

// abandon ends a create that failed with err: the id is free again and
// whoever waits for the entry learns the error.
func (m *Manager) abandon(k key, e *entry, err error) {
	e.err = err
	m.mu.Lock()
	delete(m.live, k)
	m.mu.Unlock()
	close(e.ready)
	close(e.gone)
}

// watch marks a session failed if its sandbox dies on its own.
func (m *Manager) watch(k key, e *entry) {
	select {
	case <-e.sb.Done():
	case <-e.gone:
		return
	}
	e.mu.Lock()
	if e.deleting {
		e.mu.Unlock()
		return
	}
	e.rec.State = StateFailed
	e.rec.Reason = e.sb.ExitErr().Error()
	rec := *e.rec
	e.mu.Unlock()
	m.log.Warn("session failed", "session_id", k.id, "tenant", k.tenant, "reason", rec.Reason)
	if err := m.store.UpdateSession(context.Background(), &rec); err != nil {
		// The live entry says failed either way; a record left "running"
		// is found dead and marked failed by the next daemon's Recover.
		m.log.Error("record a failed session", "session_id", k.id, "tenant", k.tenant, "error", err)
	}
}

func mergeEnv(base []string, extra map[string]string) []string {
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if _, over := extra[name]; !over {
			out = append(out, kv)
		}
	}
	names := make([]string, 0, len(extra))
	for k := range extra {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		out = append(out, k+"="+extra[k])
	}
	return out
}

// snapshot copies the session record with its live fields.
func (e *entry) snapshot() *Session {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := *e.rec
	s.LastUsedAt = time.Unix(0, e.lastUsed.Load()).UTC()
	if e.deleting {
		s.State = StateDeleting
	}
	return &s
}

// Cwd returns the session shell's working directory as of its last command.
func (e *entry) Cwd() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cwd
}

// lookup finds a session of tenant. Another tenant's session is "not found",
// exactly like a missing one.
func (m *Manager) lookup(tenant, id string) (*entry, error) {
	m.mu.Lock()
	e := m.live[key{tenant, id}]
	m.mu.Unlock()
	if e == nil {
		return nil, errdefs.New(errdefs.ErrNotFound, "session %q not found", id)
	}
	return e, nil
}

// Info is a session with its live details.
type Info struct {
	Session
	Cwd   string
	Usage *Usage
	// Node is the fleet node that holds the session, in fleet-wide lists
	// (ListFleet); "" otherwise.
	Node string
}

// Get returns a session with its live usage.
func (m *Manager) Get(ctx context.Context, tenant, id string) (*Info, error) {
	e, err := m.lookup(tenant, id)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e.err != nil {
		return nil, errdefs.New(errdefs.ErrNotFound, "session %q not found", id)
	}
	return m.info(e), nil
}

// info is the session of e with its live details.
//
// Preconditions: e.ready is closed and e.err is nil.
func (m *Manager) info(e *entry) *Info {
	info := &Info{Session: *e.snapshot(), Cwd: e.Cwd()}
	if info.State == StateRunning && e.sb != nil {
		if u, err := e.sb.Usage(); err == nil {
			m.addTraffic(info.Name, &u)
			info.Usage = &u
		}
	}
	return info
}

// List returns the tenant's sessions ("" for all), oldest first.
func (m *Manager) List(ctx context.Context, tenant string) []*Info {
	es := m.entriesOf(tenant)
	out := make([]*Info, 0, len(es))
	for _, e := range es {
		ready := false
		select {
		case <-e.ready:
			ready = true
		default:
		}
		if ready && e.err != nil {
			continue
		}
		s := e.snapshot()
		if s.Labels != nil && s.Labels[hiddenLabel] != "" {
			continue
		}
		info := &Info{Session: *s, Cwd: e.Cwd()}
		if ready && s.State == StateRunning {
			if u, err := e.sb.Usage(); err == nil {
				m.addTraffic(s.Name, &u)
				info.Usage = &u
			}
		}
		out = append(out, info)
	}
	slices.SortFunc(out, byCreated)
	return out
}

// entriesWhere returns the live entries whose key match accepts.
func (m *Manager) entriesWhere(match func(key) bool) []*entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	var es []*entry
	for k, e := range m.live {
		if match(k) {
			es = append(es, e)
		}
	}
	return es
}

// entriesOf returns the live entries of tenant ("": every tenant's).
func (m *Manager) entriesOf(tenant string) []*entry {
	return m.entriesWhere(func(k key) bool { return tenant == "" || k.tenant == tenant })
}

// entriesWithID returns the live entries called id, of every tenant.
func (m *Manager) entriesWithID(id string) []*entry {
	return m.entriesWhere(func(k key) bool { return k.id == id })
}

// byCreated is the order of lists of sessions: oldest first, then by id.
func byCreated(a, b *Info) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// hiddenLabel marks the sessions behind stateless runs.
const hiddenLabel = "warren.dev/run"

// Count returns the number of sessions.
func (m *Manager) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

// Counts returns the number of sessions in each state and of each tenant,
// the hidden sessions of stateless runs included.
func (m *Manager) Counts() (byState map[State]int, byTenant map[string]int) {
	byState = map[State]int{StateCreating: 0, StateRunning: 0, StateDeleting: 0, StateFailed: 0}
	byTenant = map[string]int{}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, e := range m.live {
		e.mu.Lock()
		st := e.rec.State
		if e.deleting {
			st = StateDeleting
		}
		e.mu.Unlock()
		byState[st]++
		byTenant[k.tenant]++
	}
	return byState, byTenant
}

// Delete deletes a session: its processes, mounts, cgroup and files.
func (m *Manager) Delete(ctx context.Context, tenant, id string) (err error) {
	defer func() { m.obs.Deleted(err) }()
	e, err := m.lookup(tenant, id)
	if err != nil {
		return err
	}
	return m.delete(ctx, key{tenant, id}, e, "deleted")
}

// forgetRecord removes the record of a session whose create failed. If the
// store refuses, the record stays in state creating and the next start's
// Recover marks it failed; the log says so now, since a user who was told
// the create failed would otherwise meet a "failed" session later with no
// clue why.
func (m *Manager) forgetRecord(ctx context.Context, rec *Session) {
	if err := m.store.DeleteSession(context.WithoutCancel(ctx), rec.Tenant, rec.ID); err != nil {
		m.logFor(ctx).Error("remove the record of a session that failed to start; it will show as failed after a restart", "session_id", rec.ID, "tenant", rec.Tenant, "error", err)
	}
}

func (m *Manager) delete(ctx context.Context, k key, e *entry, why string) error {
	<-e.ready
	if e.err != nil {
		return errdefs.New(errdefs.ErrNotFound, "session %q not found", k.id)
	}
	e.mu.Lock()
	if e.deleting {
		e.mu.Unlock()
		select {
		case <-e.gone:
			return e.goneErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	e.deleting = true
	e.rec.State = StateDeleting
	rec := *e.rec
	e.mu.Unlock()
	// Deletion finishes even if the caller leaves.
	dctx := context.WithoutCancel(ctx)
	if err := m.store.UpdateSession(dctx, &rec); err != nil {
		// Deletion goes on: a record left behind is removed by the next
		// daemon's Recover, whatever state it names.
		m.logFor(ctx).Warn("record a session being deleted", "session_id", k.id, "tenant", k.tenant, "error", err)
	}
	start := time.Now()
	var derr error
	if f, ok := e.sb.(freezer); ok && rec.Paused() {
		// Frozen processes die only once thawed (pause.go); the kill
		// that follows thaws as well, so a failure here only costs time.
		_ = f.Thaw()
	}
	if e.sb != nil {
		derr = e.sb.Destroy(dctx)
	} else {
		derr = m.rt.Remove(rec.Name) // a session lost while the daemon was away
	}
	log := m.logFor(ctx)
	if derr != nil {
		log.Error("session teardown incomplete", "session_id", k.id, "tenant", k.tenant, "sandbox", rec.Name, "error", derr)
		// Try once more from the outside; what remains is logged.
		if err := m.rt.Remove(rec.Name); err != nil {
			log.Error("sandbox leftovers remain", "session_id", k.id, "tenant", k.tenant, "sandbox", rec.Name, "error", err)
		}
	}
	var ferr error
	if err := m.store.DeleteSession(dctx, k.tenant, k.id); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
		log.Error("forget session", "session_id", k.id, "tenant", k.tenant, "error", err)
		// Not acknowledged: the record would bring the session back (as
		// failed) at the next start, where a new delete removes it.
		ferr = errdefs.New(errdefs.ErrUnavailable, "the session's sandbox is gone but its record stays (%w); delete it again after a restart", err)
	}
	m.detachLayers(rec.Name)
	m.detachNetwork(rec.Name)
	m.releaseImage(rec.Name)
	m.mu.Lock()
	if m.live[k] == e {
		delete(m.live, k)
	}
	m.mu.Unlock()
	e.goneErr = ferr
	close(e.gone)
	if rec.Labels[hiddenLabel] == "" {
		log.Info("session "+why, "session_id", k.id, "tenant", k.tenant, "sandbox", rec.Name, "duration", time.Since(start))
	}
	return ferr
}

// use returns a running session's sandbox for one call and marks it in use;
// the caller must call the returned done.
func (m *Manager) use(ctx context.Context, tenant, id string) (*entry, func(), error) {
	e, err := m.lookup(tenant, id)
	if err != nil {
		return nil, nil, err
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	if e.err != nil {
		return nil, nil, errdefs.New(errdefs.ErrNotFound, "session %q not found", id)
	}
	e.mu.Lock()
	state, reason := e.rec.State, e.rec.Reason
	if e.deleting {
		state = StateDeleting
	}
	paused := e.rec.Paused()
	e.mu.Unlock()
	if paused && state == StateRunning {
		// Its processes are frozen: a call would wait for them forever.
		return nil, nil, errdefs.New(errdefs.ErrConflict, "session %q is paused; resume it first", id)
	}
	switch state {
	case StateDeleting:
		return nil, nil, errdefs.New(errdefs.ErrNotFound, "session %q is being deleted", id)
	case StateFailed:
		return nil, nil, errdefs.New(errdefs.ErrConflict, "session %q has failed (%s); delete it", id, reason)
	}
	e.inflight.Add(1)
	e.lastUsed.Store(time.Now().UnixNano())
	return e, func() {
		e.lastUsed.Store(time.Now().UnixNano())
		e.inflight.Add(-1)
	}, nil
}

// sandboxErr explains a failed call on a session whose sandbox may have
// died or been deleted meanwhile.
func (m *Manager) sandboxErr(e *entry, id string, err error) error {
	select {
	case <-e.sb.Done():
		e.mu.Lock()
		deleting := e.deleting
		e.mu.Unlock()
		if deleting {
			return errdefs.New(errdefs.ErrNotFound, "session %q was deleted while the call ran", id)
		}
		return errdefs.New(errdefs.ErrConflict, "session %q has failed: %v", id, e.sb.ExitErr())
	default:
	}
	// A delete may cut the agent's connection before the sandbox is
	// done: the call still lost to the delete.
	e.mu.Lock()
	deleting := e.deleting
	e.mu.Unlock()
	if deleting && !errdefs.Classified(err) {
		return errdefs.New(errdefs.ErrNotFound, "session %q was deleted while the call ran", id)
	}
	return err
}

// reaper deletes sessions whose idle TTL or lifetime ran out.
func (m *Manager) reaper() {
	defer m.reaperWG.Done()
	t := time.NewTicker(m.cfg.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		m.mu.Lock()
		var flush []*entry
		var due []struct {
			k   key
			e   *entry
			why string
		}
		for k, e := range m.live {
			select {
			case <-e.ready:
			default:
				continue
			}
			if e.err != nil || e.inflight.Load() > 0 {
				continue
			}
			s := e.snapshot()
			if s.State == StateRunning && s.LastUsedAt.UnixNano()-e.flushed.Load() > int64(flushEvery) {
				flush = append(flush, e)
			}
			if s.State != StateDeleting && now.After(s.ExpiresAt()) {
				why := ReapIdle
				if s.MaxLifetime > 0 && !now.Before(s.CreatedAt.Add(s.MaxLifetime)) {
					why = ReapLifetime
				}
				due = append(due, struct {
					k   key
					e   *entry
					why string
				}{k, e, why})
			}
		}
		onExpire := m.onExpire
		m.mu.Unlock()
		for _, d := range due {
			if onExpire != nil && onExpire(context.Background(), d.e.snapshot()) {
				continue
			}
			_ = m.delete(context.Background(), d.k, d.e, "expired") // it logs what it could not remove
			m.obs.Reaped(d.why)
		}
		m.flushLastUsed(flush)
	}
}

// flushEvery is how far a session's last use may run ahead of the store's
// copy: a daemon that dies loses at most this much of a session's idle
// clock, and the store sees at most one write per session per flushEvery.
const flushEvery = 30 * time.Second

// flushLastUsed saves the last-use times of sessions in use, so that a
// daemon that crashes does not expire them early when it comes back.
func (m *Manager) flushLastUsed(es []*entry) {
	for _, e := range es {
		s := e.snapshot()
		if s.State != StateRunning {
			continue
		}
		if err := m.store.UpdateSession(context.Background(), s); err != nil {
			m.log.Warn("save last use", "session_id", s.ID, "error", err)
			continue
		}
		e.flushed.Store(s.LastUsedAt.UnixNano())
	}
}

// Ready reports whether the manager accepts new sessions.
func (m *Manager) Ready() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.closing
}

// Close stops the reaper and deletes every session.
func (m *Manager) Close(ctx context.Context) error { return m.close(ctx, false) }

// Detach stops the manager and leaves running sessions running, with their
// records saved, for the next daemon to adopt (Recover). Sessions still
// being created are deleted.
func (m *Manager) Detach(ctx context.Context) error { return m.close(ctx, true) }

func (m *Manager) close(ctx context.Context, keep bool) error {
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return nil
	}
	m.closing = true
	all := make(map[key]*entry, len(m.live))
	for k, e := range m.live {
		all[k] = e
	}
	m.mu.Unlock()
	close(m.stop)
	m.reaperWG.Wait()
	m.drainPool(ctx)
	var wg sync.WaitGroup
	for k, e := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if keep && m.detach(ctx, e) {
				return
			}
			_ = m.delete(ctx, k, e, "deleted at shutdown") // it logs what it could not remove
		}()
	}
	wg.Wait()
	// Deleted sandboxes finish leaving the disk before the daemon goes.
	m.rt.Wait()
	return nil
}

// detach saves a running session and lets go of its sandbox; false if the
// session is not running (or saving failed) and must be deleted instead.
func (m *Manager) detach(ctx context.Context, e *entry) bool {
	<-e.ready
	if e.err != nil || e.sb == nil {
		return false
	}
	s := e.snapshot()
	if s.State != StateRunning || s.Labels[hiddenLabel] != "" {
		return s.State == StateFailed // kept as failed; deleted with the next daemon's TTLs
	}
	if err := m.store.UpdateSession(context.WithoutCancel(ctx), s); err != nil {
		m.log.Error("save session for the next daemon", "session_id", s.ID, "error", err)
		return false
	}
	close(e.gone) // ends watch: the sandbox's Done now means detached
	e.sb.Detach()
	return true
}

// attachLayers resolves and counts the workspace and snapshot a create
// request names (nil when it names neither).
func (m *Manager) attachLayers(ctx context.Context, rec *Session, req *CreateRequest) (*attached, error) {
	if req.Workspace == "" && req.WorkspaceMode == "" && req.Snapshot == "" {
		return nil, nil
	}
	if off, ok := m.layersAPI.(layersOff); ok {
		return nil, off.err
	}
	return m.layers.attach(ctx, rec, req)
}

// detachLayers forgets what the session whose sandbox is name used.
func (m *Manager) detachLayers(name string) {
	if m.layers != nil {
		m.layers.detach(name)
	}
}

// useSession implements layerHost.
func (m *Manager) useSession(ctx context.Context, tenant, id string) (*Session, string, Sandbox, func(), error) {
	e, done, err := m.use(ctx, tenant, id)
	if err != nil {
		return nil, "", nil, nil, err
	}
	return e.snapshot(), e.Cwd(), e.sb, done, nil
}

// createDiff names the parameters in which a create of an existing id
// asks for something other than what the session has: only those the
// request sets count (an empty field takes what the session has), so that
// repeating a create, or creating by id alone, returns the session, while
// asking for another image or other limits under the same id is a conflict
// rather than a silent answer with a session the caller did not ask for.
// want is the request as validateCreate resolved it.
func createDiff(req *CreateRequest, want, have *Session) []string {
	var diff []string
	add := func(set, differs bool, name string) {
		if set && differs {
			diff = append(diff, name)
		}
	}
	add(req.Image != "", want.Image != have.Image, "image")
	add(req.Env != nil, !maps.Equal(want.Env, have.Env), "env")
	add(req.Cwd != "", want.BaseDir != have.BaseDir, "cwd")
	add(req.Limits.MemoryMB != 0, want.Limits.MemoryMB != have.Limits.MemoryMB, "limits.memory_mb")
	add(req.Limits.CPUs != 0, want.Limits.CPUs != have.Limits.CPUs, "limits.cpus")
	add(req.Limits.Pids != 0, want.Limits.Pids != have.Limits.Pids, "limits.pids")
	add(req.Limits.DiskMB != 0, want.Limits.DiskMB != have.Limits.DiskMB, "limits.disk_mb")
	add(req.Network != "", want.Network != have.Network, "network")
	add(req.IdleTTL != 0, want.IdleTTL != have.IdleTTL, "ttl_seconds")
	add(req.MaxLifetime != 0, want.MaxLifetime != have.MaxLifetime, "max_lifetime_seconds")
	add(req.Labels != nil && !req.Hidden, !maps.Equal(want.Labels, have.Labels), "labels")
	add(req.User != "", want.User != have.User, "user")
	return diff
}
