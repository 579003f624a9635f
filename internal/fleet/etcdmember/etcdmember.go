// Package etcdmember runs an etcd member inside the warren daemon
// (--fleet-etcd-embedded), so that a fleet of three machines needs no
// other service: the first three daemons each run one member and together
// they are the fleet's etcd. Tests use it to start whole clusters in one
// process.
package etcdmember

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Config is one member.
type Config struct {
	// Name is the member's name, as in InitialCluster.
	Name string
	// Dir holds the member's data (its WAL and snapshots).
	Dir string
	// ClientURL is where clients reach the member (http://host:port).
	ClientURL string
	// InitialCluster is every member as name=peer URL; the member listens
	// for its peers on its own entry's URL.
	InitialCluster []string
	// Token tells this cluster's members from another's at bootstrap.
	Token string
	// Fast shortens the heartbeat and election timeouts and skips fsync:
	// for tests only, where losing the data at a crash does not matter.
	Fast bool
	// LogLevel is etcd's log level ("error" if empty).
	LogLevel string
}

// Member is a running member.
type Member struct {
	e   *embed.Etcd
	cfg Config
}

// Start starts the member. It returns once the member serves, without
// waiting for the cluster to have a quorum (the other members may not be
// up yet); Ready tells when it has.
func Start(cfg Config) (*Member, error) {
	var peer string
	for _, m := range cfg.InitialCluster {
		if name, u, ok := strings.Cut(m, "="); ok && name == cfg.Name {
			peer = u
		}
	}
	if peer == "" {
		return nil, fmt.Errorf("etcd member %q is not in the initial cluster %v", cfg.Name, cfg.InitialCluster)
	}
	pu, err := url.Parse(peer)
	if err != nil {
		return nil, fmt.Errorf("etcd member %s: peer URL %q: %w", cfg.Name, peer, err)
	}
	cu, err := url.Parse(cfg.ClientURL)
	if err != nil || cu.Host == "" {
		return nil, fmt.Errorf("etcd member %s: client URL %q: want http://host:port", cfg.Name, cfg.ClientURL)
	}
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.Dir
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	ec.InitialCluster = strings.Join(cfg.InitialCluster, ",")
	ec.InitialClusterToken = cfg.Token
	if ec.InitialClusterToken == "" {
		ec.InitialClusterToken = "warren-fleet"
	}
	ec.LogLevel = cfg.LogLevel
	if ec.LogLevel == "" {
		ec.LogLevel = "error"
	}
	if cfg.Fast {
		if cfg.LogLevel == "" {
			// Tests stop members on purpose; their peers' complaints
			// about it are noise.
			ec.LogLevel = "fatal"
		}
		ec.TickMs, ec.ElectionMs = 50, 500
		ec.UnsafeNoFsync = true
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("start etcd member %s: %w", cfg.Name, err)
	}
	return &Member{e: e, cfg: cfg}, nil
}

// Ready is closed once the member has joined a cluster with a leader.
func (m *Member) Ready() <-chan struct{} { return m.e.Server.ReadyNotify() }

// Err reports the member's fatal errors.
func (m *Member) Err() <-chan error { return m.e.Err() }

// ClientURL is where clients reach the member.
func (m *Member) ClientURL() string { return m.cfg.ClientURL }

// Name is the member's name.
func (m *Member) Name() string { return m.cfg.Name }

// Close stops the member; its data stays in Dir.
func (m *Member) Close() { m.e.Close() }

// Cluster is members started together, for tests.
type Cluster struct {
	Members []*Member
	Configs []Config
}

// StartCluster starts n members on free loopback ports, with data under
// dir, and waits until they have a leader.
func StartCluster(ctx context.Context, dir string, n int) (*Cluster, error) {
	c := &Cluster{}
	var initial []string
	clients := make([]string, n)
	for i := range n {
		pp, err := FreePort()
		if err != nil {
			return nil, err
		}
		cp, err := FreePort()
		if err != nil {
			return nil, err
		}
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, pp))
		clients[i] = fmt.Sprintf("http://127.0.0.1:%d", cp)
	}
	// One token for the whole cluster: members that bootstrap with
	// different tokens form different clusters and refuse each other.
	token := fmt.Sprintf("test-%d", time.Now().UnixNano())
	for i := range n {
		cfg := Config{Name: fmt.Sprintf("m%d", i), Dir: fmt.Sprintf("%s/m%d", dir, i), ClientURL: clients[i],
			InitialCluster: initial, Token: token, Fast: true}
		m, err := Start(cfg)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Members = append(c.Members, m)
		c.Configs = append(c.Configs, cfg)
	}
	for _, m := range c.Members {
		select {
		case <-m.Ready():
		case err := <-m.Err():
			c.Close()
			return nil, err
		case <-ctx.Done():
			c.Close()
			return nil, fmt.Errorf("etcd cluster not ready: %w", ctx.Err())
		}
	}
	return c, nil
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, cfg := range c.Configs {
		eps = append(eps, cfg.ClientURL)
	}
	return eps
}

// Stop stops member i (its data stays, Restart brings it back).
func (c *Cluster) Stop(i int) {
	if c.Members[i] != nil {
		c.Members[i].Close()
		c.Members[i] = nil
	}
}

// Restart starts a stopped member i again from its data.
func (c *Cluster) Restart(i int) error {
	m, err := Start(c.Configs[i])
	if err != nil {
		return err
	}
	c.Members[i] = m
	return nil
}

// Leader returns the index of the member that leads, or -1.
func (c *Cluster) Leader() int {
	for i, m := range c.Members {
		if m != nil && m.e.Server.Leader() == m.e.Server.MemberID() {
			return i
		}
	}
	return -1
}

// Close stops every member.
func (c *Cluster) Close() {
	for i := range c.Members {
		c.Stop(i)
	}
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
