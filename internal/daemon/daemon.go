// Package daemon wires warren's daemon together: configuration, store,
// images, cgroups, runtime, session manager and the API server, with
// start-up and shutdown in a fixed order.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/agentbin"
	"github.com/warrenhq/warren/internal/audit"
	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/cgroup"
	"github.com/warrenhq/warren/internal/cleanup"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/httpapi"
	"github.com/warrenhq/warren/internal/image"
	"github.com/warrenhq/warren/internal/metrics"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/quota"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
	"github.com/warrenhq/warren/internal/workspace"
)

// Version is set at build time (-ldflags "-X ...daemon.Version=...").
var Version = "dev"

// Daemon is a running warren daemon.
type Daemon struct {
	cfg     config.Config
	rt      *sandbox.Runtime
	log     *slog.Logger
	lock    *os.File
	store   *store.SQLite
	images  *image.Store
	cgroups *cgroup.Hierarchy
	layers  *quota.Layers
	manager *session.Manager
	network *network.Manager // sessions' egress (network.go)
	api     *httpapi.Server
	edge    *edge.Edge
	origins *edge.Origins // cors_origins: browser origins besides the daemon's own
	audit   *audit.Log
	tenants *tenantLimits
	// handler serves every transport on the one port (transports.go).
	handler   http.Handler
	ln        net.Listener
	srv       *http.Server
	pprof     *http.Server // the profiler, if configured
	pprofAddr atomic.Value // string
	// keep: the daemon stopped and left its sessions running.
	keep bool
	// adminKey is the admin key this start created, "" if keys existed.
	adminKey string
	metrics  *metrics.Metrics
	history  *metrics.History // the console's last hour of metrics
	ready    *readiness
	// stopping is set when Shutdown begins: /readyz answers 503 from then.
	stopping atomic.Bool

	// workspaces holds the workspaces' directories (layers.go).
	workspaces *workspace.Store
	// fleet is the daemon's part in a fleet, nil for a single node
	// (fleet.go).
	fleet *fleetNode
}

// New prepares a daemon: it takes the data directory, opens the store and
// image store, starts the sandbox runtime and the session manager (which
// recovers from a previous run) and sets up the edge and the transports,
// having bound the listen address first of all (so that a busy port fails
// before anything is written). On error everything acquired so far is
// released, in reverse order.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	origins, err := edge.ParseOrigins(cfg.CORSOrigins)
	if err != nil {
		return nil, fmt.Errorf("cors_origins: %w", err)
	}
	d := &Daemon{cfg: cfg, log: log, origins: origins}
	c := cleanup.Make(d.release)
	defer c.Clean()
	// Bind first: a busy port fails before anything is created or
	// printed (no data directory, no admin key). Connections that arrive
	// during recovery wait in the backlog until Serve.
	if err := d.listen(); err != nil {
		return nil, err
	}
	c.Add(func() { d.ln.Close() })
	if err := d.takeDataDir(); err != nil {
		return nil, err
	}
	if err := d.openStores(); err != nil {
		return nil, err
	}
	if err := d.startRuntime(); err != nil {
		return nil, err
	}
	if err := d.startFleet(ctx); err != nil {
		return nil, err
	}
	if err := d.startManager(ctx); err != nil {
		return nil, err
	}
	// From here a failure stops the sessions Recover adopted.
	c.Add(func() { d.logClose("sessions", d.manager.Close(ctx)) })
	if err := d.openEdge(ctx); err != nil {
		return nil, err
	}
	if err := d.mountTransports(); err != nil {
		return nil, err
	}
	c.Release()
	return d, nil
}

// takeDataDir creates the data directory and locks it for this daemon.
func (d *Daemon) takeDataDir() error {
	// 0711: sandboxes' roots are unprivileged host users that must pass
	// through (never list) the data directory to reach their own layers.
	if err := os.MkdirAll(d.cfg.DataDir, 0o711); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if err := os.Chmod(d.cfg.DataDir, 0o711); err != nil {
		return err
	}
	var err error
	d.lock, err = lockDir(d.cfg.DataDir)
	return err
}

// openStores opens the state store and the image store, with the base
// image ready.
func (d *Daemon) openStores() error {
	var err error
	if d.store, err = store.Open(filepath.Join(d.cfg.DataDir, "warren.db")); err != nil {
		return err
	}
	if d.images, err = image.Open(filepath.Join(d.cfg.DataDir, "images")); err != nil {
		return err
	}
	if _, err := d.images.EnsureBase(); err != nil {
		// A full disk must not keep the daemon from serving the sessions
		// it adopts (and deletes, which free space): it starts with the
		// stored base image, or without one, creates from it answering
		// unavailable.
		if !errdefs.Is(err, errdefs.ErrUnavailable) {
			return fmt.Errorf("prepare the base image: %w", err)
		}
		d.log.Warn("could not prepare the base image; starting with what is stored", "error", err)
	}
	return nil
}

// startRuntime detects the cgroups, decides what isolation this host
// allows (user namespaces, seccomp, disk quotas) and starts the sandbox
// runtime.
func (d *Daemon) startRuntime() error {
	cfg, log := d.cfg, d.log
	var err error
	if d.cgroups, err = cgroup.Detect(cfg.CgroupParent); err != nil {
		return err
	}
	if cfg.CgroupFavorDynMods {
		if point, changed, err := cgroup.FavorDynMods(true); err != nil {
			log.Warn("sandbox starts wait for an RCU grace period when they enter their cgroups", "reason", err)
		} else if changed {
			log.Info("turned on favordynmods on the cgroup2 mount, so sandbox starts do not wait for an RCU grace period (cgroup_favor_dynmods = false leaves it alone)", "mount", point)
		}
	}
	opts := sandbox.Options{UserNS: true, IDBase: uint32(cfg.IDBase)}
	if err := sandbox.ProbeUserNS(filepath.Join(cfg.DataDir, "images")); err != nil {
		if !cfg.AllowNoUserNS {
			return fmt.Errorf("sandboxes cannot run in user namespaces here (%v); run `warren doctor`, or pass --allow-no-userns to run sandboxed code as an unprivileged host user instead", err)
		}
		log.Warn("running without user namespaces: sandboxed code runs as an unprivileged host user", "reason", err)
		opts.UserNS = false
	}
	if opts.Seccomp, _, err = sandbox.Seccomp(opts.UserNS, d.cgroups.Version()); err != nil {
		return fmt.Errorf("compile the seccomp filter: %w", err)
	}
	if !cfg.NoDiskQuota {
		if d.layers, err = quota.Open(cfg.DataDir, quota.Options{Overcommit: cfg.Disk.Overcommit, WatermarkBytes: cfg.Disk.ReserveWatermarkMB << 20}); err != nil {
			return fmt.Errorf("open the layer store for disk limits (%w); pass --no-disk-quota to run without disk limits", err)
		}
		opts.Layers = d.layers
	}
	if opts.ProgramFile, err = agentbin.Memfd(); err != nil {
		if opts.Program, err = agentbin.Install(filepath.Join(cfg.DataDir, "bin")); err != nil {
			// Still correct, only slower to start and bigger per session.
			log.Warn("sandboxes run this binary again as their agent", "reason", err)
			opts.Program = ""
		}
	}
	d.rt, err = sandbox.NewRuntime(filepath.Join(cfg.DataDir, "sessions"), d.cgroups, opts)
	return err
}

// startManager makes the session manager with its tenants' limits,
// layers, metrics and readiness check, and recovers the sessions of a
// previous run.
func (d *Daemon) startManager(ctx context.Context) error {
	d.tenants = newTenantLimits(d.authStore(), d.cfg.Auth.TenantDefaults, d.cfg.Auth.TenantPublicPorts)
	layers, err := d.openLayers()
	if err != nil {
		return err
	}
	net, err := d.openNetwork()
	if err != nil {
		return err
	}
	// The metrics hear of Recover's actions, so they come first.
	d.metrics = metrics.New(prometheus.NewRegistry())
	if d.network != nil {
		if err := d.metrics.Registry().Register(d.network); err != nil {
			return err
		}
	}
	d.manager = session.NewManager(d.cfg.Session, session.Deps{Store: d.sessionStore(), Runtime: sandbox.ForSessions(d.rt), Images: d.images,
		Tenants: d.tenants, Observer: d.metrics, Layers: layers, Log: d.log, Network: net})
	if err := d.metrics.WatchSessions(d.manager); err != nil {
		return err
	}
	d.ready = &readiness{store: d.store, cgroups: d.cgroups, manager: d.manager, stopping: &d.stopping}
	if err := d.manager.Recover(ctx); err != nil {
		return err
	}
	d.finishNetworkAdoption()
	d.fleetRecovered()
	return nil
}

// openEdge sets up what every transport passes through: authentication
// (with the first admin key on a first start), the rate limit and the
// audit log.
func (d *Daemon) openEdge(ctx context.Context) error {
	var authn *auth.Authenticator
	if d.cfg.Auth.Disabled {
		d.log.Warn("authentication is off: every caller is the admin of tenant " + edge.DefaultTenant)
	} else {
		jwt, err := d.cfg.Auth.JWT()
		if err != nil {
			return err
		}
		if authn, err = auth.New(auth.Config{Keys: d.authStore(), JWT: jwt}); err != nil {
			return err
		}
		if d.adminKey, err = bootstrapAdminKey(ctx, d.store, d.cfg.DataDir); err != nil {
			return err
		}
		if d.adminKey != "" {
			d.log.Info("created the first admin key", "file", filepath.Join(d.cfg.DataDir, AdminKeyFile), "tenant", BootstrapTenant)
		}
	}
	d.fleetAuth(authn)
	var err error
	if d.audit, err = audit.Open(filepath.Join(d.cfg.DataDir, "audit.log")); err != nil {
		return err
	}
	d.audit.SetNode(d.fleetNodeName())
	d.edge = edge.New(edge.Config{
		Auth:      authn,
		Audit:     d.audit,
		RateLimit: d.cfg.Auth.RateLimit,
		RateBurst: d.cfg.Auth.RateBurst,
		Log:       d.log,
	})
	if d.fleet != nil {
		// Each caller's rate limit holds across the fleet.
		d.fleet.node.ShareRates(d.edge.RateCounts, d.edge.SetRateShares)
	}
	return nil
}

// listen binds the API's address.
func (d *Daemon) listen() error {
	var err error
	if d.ln, err = net.Listen("tcp", d.cfg.Listen); err != nil {
		return fmt.Errorf("listen on %s: %w", d.cfg.Listen, err)
	}
	return nil
}

// lockDir makes sure one daemon at a time uses a data directory.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "warren.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another warren daemon is using %s", dir)
	}
	return f, nil
}

// AdminKey is the admin key this start created because the store had none
// ("" otherwise). It is also in the data directory's AdminKeyFile.
func (d *Daemon) AdminKey() string { return d.adminKey }

// Addr is the address the API listens on.
func (d *Daemon) Addr() net.Addr { return d.ln.Addr() }

// Manager returns the session manager (for tests and embedding).
func (d *Daemon) Manager() *session.Manager { return d.manager }

// Metrics returns the daemon's metrics, on a registry of their own.
func (d *Daemon) Metrics() *metrics.Metrics { return d.metrics }

// Handler returns the API handler.
func (d *Daemon) Handler() http.Handler { return d.handler }

// API returns the API server.
func (d *Daemon) API() *httpapi.Server { return d.api }

// Serve answers API requests until ctx ends, then shuts down: it stops
// accepting, lets in-flight requests finish for the grace period, deletes
// every session and releases the data directory.
func (d *Daemon) Serve(ctx context.Context) error {
	// One port for every transport: HTTP/1.1, and HTTP/2 in cleartext
	// (h2c) for gRPC. With TLS the daemon terminates it below net/http
	// (edge.TLSListener), which then sees the same cleartext protocols.
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	d.srv = &http.Server{
		Handler:           d.handler,
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	tlsCfg, err := d.serverTLS()
	if err != nil {
		return errors.Join(err, d.Shutdown())
	}
	// edge.Listener: net/http's own error answers in the envelope.
	ln, scheme := edge.Listener(d.ln), "http://"
	if tlsCfg != nil {
		ln, scheme = edge.TLSListener(d.ln, tlsCfg), "https://"
		d.srv.ConnContext = edge.TLSConnContext
		d.srv.Handler = edge.TLSRequests(d.handler)
	}
	if d.pprof, err = d.servePprof(); err != nil {
		return errors.Join(fmt.Errorf("profiler: %w", err), d.Shutdown())
	}
	errc := make(chan error, 1)
	go func() { errc <- d.srv.Serve(ln) }()
	d.log.Info("warren is serving", "addr", scheme+d.ln.Addr().String(), "data_dir", d.cfg.DataDir, "cgroup", fmt.Sprintf("v%d", d.cgroups.Version()), "version", Version)
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	return errors.Join(serveErr, d.Shutdown())
}

// Shutdown stops the daemon; it is safe to call more than once.
func (d *Daemon) Shutdown() error {
	d.stopping.Store(true)
	d.log.Info("shutting down")
	grace, cancel := context.WithTimeout(context.Background(), d.cfg.ShutdownGrace)
	defer cancel()
	if d.pprof != nil {
		d.pprof.Close()
	}
	if d.srv != nil {
		d.logClose("server (connections cut at the grace period)", d.srv.Shutdown(grace))
	} else if d.ln != nil {
		d.ln.Close()
	}
	// Sessions go before the remaining connections: a command still
	// running is cut off by its sandbox's end, or by the agent's
	// connection closing when sessions are kept.
	var err error
	if d.cfg.Shutdown == config.ShutdownKeep {
		err = d.manager.Detach(context.Background())
		d.keep = true
	} else {
		err = d.manager.Close(context.Background())
	}
	if d.srv != nil {
		d.srv.Close()
	}
	d.release()
	d.log.Info("stopped")
	return err
}

func (d *Daemon) release() {
	if d.history != nil {
		d.history.Stop()
	}
	if d.keep && d.cgroups != nil {
		// A keep that kept no session leaves nothing for a next daemon:
		// the parent cgroup and the layer mounts go as with destroy.
		if left, err := d.cgroups.Sessions(); err == nil && len(left) == 0 {
			d.keep = false
		}
	}
	d.closeLayers()
	d.closeNetwork()
	if d.rt != nil {
		d.logClose("runtime", d.rt.Close())
		d.rt = nil
	}
	if d.audit != nil {
		d.logClose("audit log", d.audit.Close())
		d.audit = nil
	}
	d.closeFleet()
	if d.store != nil {
		d.logClose("store", d.store.Close())
		d.store = nil
	}
	if d.layers != nil && d.keep {
		// Kept sandboxes write to their layers: they stay mounted.
		if err := d.layers.Release(); err != nil {
			d.log.Error("release the layer store", "error", err)
		}
		d.layers = nil
	}
	if d.layers != nil {
		if err := d.layers.Close(); err != nil {
			d.log.Error("close the layer store", "error", err)
		}
		d.layers = nil
	}
	if d.cgroups != nil && !d.keep {
		d.cgroups.Teardown()
	}
	if d.lock != nil {
		d.lock.Close()
		d.lock = nil
	}
}

// logClose logs a part of the daemon that did not close cleanly. Shutdown
// goes on: what a part leaves behind is found by the next start's
// reconciliation, and the log says where to look.
func (d *Daemon) logClose(what string, err error) {
	if err != nil {
		d.log.Warn("close "+what, "error", err)
	}
}
