package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/e2b"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/fleet"
	"github.com/warrenhq/warren/internal/fleet/etcdmember"
	"github.com/warrenhq/warren/internal/fleet/etcdreg"
	"github.com/warrenhq/warren/internal/fleet/registry"
	"github.com/warrenhq/warren/internal/session"
)

// fleetNode is the daemon's part in a fleet (docs/FLEET.md): its etcd
// member if it runs one, the registry client and the node's membership.
type fleetNode struct {
	member *etcdmember.Member
	reg    *etcdreg.Registry
	node   *fleet.Node
	// manager is set once the manager exists; the node's capacity
	// refresh reads it from its own goroutine.
	manager atomic.Pointer[session.Manager]
	// auth keeps API keys and tenants' settings in the registry.
	auth *fleet.AuthStore
	// clientTLS checks the other nodes' certificates (fleet.ca_file; nil:
	// the host's roots).
	clientTLS *tls.Config
}

// authStore is where keys and tenants' settings live: the local store, or
// the fleet's (docs/FLEET.md, "Tenants, keys, quotas").
func (d *Daemon) authStore() fleet.LocalAuth {
	if d.fleet == nil {
		return d.store
	}
	return d.fleet.auth
}

// fleetAuth hooks the daemon's key and tenant caches to the fleet's
// changes (a key revoked or a quota changed on another node drops them
// here), and copies the node's own keys and tenants into the registry in
// the background (fleet.AuthStore.Import).
func (d *Daemon) fleetAuth(authn *auth.Authenticator) {
	if d.fleet == nil {
		return
	}
	f := d.fleet
	f.node.OnAuthChange(func(id string) {
		if authn != nil {
			authn.Forget(id)
		}
	}, d.tenants.forget)
	go func() {
		if err := f.auth.Import(f.node.Context(), filepath.Join(d.cfg.DataDir, "fleet-imported")); err != nil && f.node.Context().Err() == nil {
			d.log.Error("copying this node's API keys and tenants into the fleet's registry failed", "error", err)
		}
	}()
}

// startFleet makes the daemon a node of its fleet, when one is
// configured: it starts the embedded etcd member, connects to the registry
// and joins (in the background: a daemon whose registry is down starts
// and serves what it has).
func (d *Daemon) startFleet(ctx context.Context) error {
	fc := d.cfg.Fleet
	if !fc.Enabled() {
		return nil
	}
	f := &fleetNode{}
	d.fleet = f
	name := fc.Node
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("fleet node name: %w", err)
		}
		name = h
	}
	addr := strings.TrimSuffix(fc.Advertise, "/")
	if addr == "" {
		addr = "http://" + d.ln.Addr().String()
	}
	var err error
	if f.clientTLS, err = fleetClientTLS(fc.CAFile); err != nil {
		return err
	}
	endpoints := fc.Etcd
	if fc.Embedded {
		clientURL := fc.ClientURL
		if clientURL == "" {
			clientURL = "http://127.0.0.1:2379"
		}
		f.member, err = etcdmember.Start(etcdmember.Config{Name: name, Dir: filepath.Join(d.cfg.DataDir, "etcd"),
			ClientURL: clientURL, InitialCluster: fc.InitialCluster, Token: "warren" + fc.Prefix})
		if err != nil {
			return err
		}
		if len(endpoints) == 0 {
			endpoints = []string{clientURL}
		}
	}
	if f.reg, err = openRegistry(fc, endpoints); err != nil {
		return err
	}
	f.node, err = fleet.Join(ctx, fleet.Config{Registry: f.reg, Name: name, Addr: addr, Capacity: d.cfg.Session.MaxSessions,
		TTL: fc.NodeTTL, Grace: fc.LostGrace, Version: Version, Log: d.log,
		Count: func() int {
			if m := f.manager.Load(); m != nil {
				return m.Count()
			}
			return 0
		},
		Quota: func(ctx context.Context, tenant string) (registry.Quota, error) {
			l, err := d.tenants.Limits(ctx, tenant)
			return registry.Quota{MaxSessions: l.MaxSessions, MaxMemoryMB: l.MaxMemoryMB, MaxMilliCPUs: fleet.MilliCPUs(l.MaxCPUs)}, err
		}})
	if err != nil {
		return err
	}
	f.auth = f.node.AuthStore(d.store)
	d.log.Info("this daemon is a fleet node", "node", name, "advertise", addr, "etcd", endpoints, "embedded_member", fc.Embedded)
	return nil
}

// sessionStore is the store the manager records sessions in: the local
// one, wrapped by the fleet's when the daemon is a node of one.
func (d *Daemon) sessionStore() session.Store {
	if d.fleet == nil {
		return d.store
	}
	return d.fleet.node.Store(d.store)
}

// fleetRecovered runs once the manager recovered the previous run's
// sessions: the node compares them with the registry (fencing those the
// fleet declared lost) as soon as the registry answers, and takes creates
// from then on.
func (d *Daemon) fleetRecovered() {
	if d.fleet == nil {
		return
	}
	f := d.fleet
	f.manager.Store(d.manager)
	d.metrics.Registry().MustRegister(f.node.Collector())
	go func() {
		if err := f.node.Reconcile(context.Background(), d.store, d.manager.Delete); err != nil {
			d.log.Error("comparing this node's sessions with the fleet's registry failed; it takes no new sessions", "error", err)
			return
		}
		d.log.Info("fleet node ready", "node", f.node.Name())
		// Moves this node's sessions away while it is marked so (warren
		// node drain --move).
		f.node.StartMover(d.manager, f.clientTLS)
	}()
}

// forward routes requests for sessions other nodes own to them (edge
// Forward); without a fleet it is next itself.
func (d *Daemon) forward(next http.Handler) http.Handler {
	if d.fleet == nil {
		return next
	}
	n := d.fleet.node
	files := e2b.NewFleetFiles(n.Secret)
	f := &edge.Forwarding{Node: n.Name(), Secret: n.Secret, PreviewDomain: d.cfg.PreviewDomain, TLS: d.fleet.clientTLS,
		Credentials: e2b.WarrenCredentials,
		SignedSandbox: func(r *http.Request) string {
			return files.Sandbox(r, func(yield func(tenant, id string, created time.Time) bool) {
				n.Cache().Sessions(func(s registry.Session) bool { return yield(s.Tenant, s.ID, s.Created) })
			})
		},
		LocateID: func(id string) edge.Owner {
			r, ok := n.Cache().LookupID(id, n.Name())
			if !ok {
				return edge.Owner{}
			}
			return edge.Owner{Known: true, Here: r.Session.Node == n.Name(), Node: r.Session.Node, Addr: r.Node.Addr,
				Alive: r.Alive, Lost: r.Session.State == registry.Lost, Moving: r.Session.State == registry.Moving}
		},
		Place: func(exclude []string) edge.Owner {
			p, ok := n.Place(exclude...)
			if !ok {
				return edge.Owner{}
			}
			return edge.Owner{Known: true, Here: p.Name == n.Name(), Node: p.Name, Addr: p.Addr, Alive: true}
		},
		Peers: func(tenant string) ([]edge.Owner, []edge.LostSession) {
			holders, lost := n.Cache().Holders(tenant)
			var peers []edge.Owner
			live := map[string]bool{}
			for _, p := range n.Cache().Nodes() {
				live[p.Name] = true
				if p.Name != n.Name() {
					peers = append(peers, edge.Owner{Known: true, Node: p.Name, Addr: p.Addr, Alive: true})
				}
			}
			for h := range holders {
				if !live[h] && h != n.Name() {
					peers = append(peers, edge.Owner{Known: true, Node: h})
				}
			}
			out := make([]edge.LostSession, len(lost))
			for i, l := range lost {
				out[i] = edge.LostSession{Tenant: l.Tenant, ID: l.ID, Node: l.Node, Created: l.Created, LostAt: l.LostAt}
			}
			return peers, out
		},
		ForgetLost: func(ctx context.Context, tenant, id string) error {
			r, ok := n.Cache().Lookup(tenant, id)
			if !ok {
				return nil
			}
			return n.Registry().DeleteSession(ctx, tenant, id, r.Session.Node)
		},
		Locate: func(tenant, id string) edge.Owner {
			r, ok := n.Cache().Lookup(tenant, id)
			if !ok {
				return edge.Owner{}
			}
			return edge.Owner{Known: true, Here: r.Session.Node == n.Name(), Node: r.Session.Node, Addr: r.Node.Addr,
				Alive: r.Alive, Lost: r.Session.State == registry.Lost, Moving: r.Session.State == registry.Moving}
		}}
	// Every transport's list of sessions covers the fleet.
	d.manager.SetFleetLister(n.Name(), d.edge.FleetLister(f))
	return d.edge.Forward(f, next)
}

// fleetSecret is the fleet's shared secret for the E2B facade's access
// tokens (e2b.Config.FleetSecret), nil without a fleet.
func (d *Daemon) fleetSecret() func() []byte {
	if d.fleet == nil {
		return nil
	}
	return d.fleet.node.Secret
}

// fleetNodeName is the node's name in its fleet, "" without one.
func (d *Daemon) fleetNodeName() string {
	if d.fleet == nil {
		return ""
	}
	return d.fleet.node.Name()
}

// closeFleet leaves the fleet after the sessions were kept or deleted:
// the node's entry goes, then the registry client, then the etcd member.
func (d *Daemon) closeFleet() {
	f := d.fleet
	if f == nil {
		return
	}
	d.fleet = nil
	if f.node != nil {
		if err := f.node.Close(); err != nil {
			d.log.Warn("leave the fleet", "error", err)
		}
	}
	if f.reg != nil {
		f.reg.Close()
	}
	if f.member != nil {
		f.member.Close()
	}
}

// FleetRegistry connects to the registry the fleet settings of cfg name,
// for the commands that read or change it without a daemon (warren node).
func FleetRegistry(cfg config.Config) (*etcdreg.Registry, error) {
	fc := cfg.Fleet
	endpoints := fc.Etcd
	if len(endpoints) == 0 && fc.Embedded {
		endpoints = []string{fc.ClientURL}
		if fc.ClientURL == "" {
			endpoints = []string{"http://127.0.0.1:2379"}
		}
	}
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("no fleet configured: give --fleet-etcd (or the daemon's --config)")
	}
	return openRegistry(fc, endpoints)
}

// openRegistry connects to etcd at endpoints with fc's TLS and auth.
func openRegistry(fc config.Fleet, endpoints []string) (*etcdreg.Registry, error) {
	rc := etcdreg.Config{Endpoints: endpoints, Prefix: fc.Prefix, ElectionTTL: fc.NodeTTL}
	var err error
	if rc.TLS, err = etcdTLS(fc.EtcdCAFile, fc.EtcdCertFile, fc.EtcdKeyFile, endpoints); err != nil {
		return nil, err
	}
	if fc.EtcdUsername != "" {
		b, err := os.ReadFile(fc.EtcdPasswordFile)
		if err != nil {
			return nil, fmt.Errorf("fleet.etcd_password_file: %w", err)
		}
		rc.Username, rc.Password = fc.EtcdUsername, strings.TrimSpace(string(b))
	}
	return etcdreg.New(rc)
}

// etcdTLS builds the TLS configuration for etcd from the settings' files;
// nil when no https endpoint and no file asks for TLS.
func etcdTLS(caFile, certFile, keyFile string, endpoints []string) (*tls.Config, error) {
	https := false
	for _, e := range endpoints {
		https = https || strings.HasPrefix(e, "https://")
	}
	if !https && caFile == "" && certFile == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		var err error
		if c.RootCAs, err = certPool("fleet.etcd_ca_file", caFile); err != nil {
			return nil, err
		}
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("fleet.etcd_cert_file and fleet.etcd_key_file: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
