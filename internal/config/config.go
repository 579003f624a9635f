package config

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/network/rules"
	"github.com/warrenhq/warren/internal/session"
)

// DefaultListen is the daemon's default address: loopback only.
const DefaultListen = "127.0.0.1:7433"

// DefaultDataDir holds the daemon's state unless told otherwise.
const DefaultDataDir = "/var/lib/warren"

// Config is the daemon's configuration.
type Config struct {
	Listen       string
	DataDir      string
	CgroupParent string
	LogFormat    string // json or text
	LogLevel     string // debug, info, warn, error
	// ShutdownGrace is how long in-flight requests may run after a stop
	// signal before sessions are torn down.
	ShutdownGrace time.Duration
	// CORSOrigins are the browser origins, besides the daemon's own, whose
	// pages may call the API and open its WebSockets (package edge parses
	// and applies them); empty: none.
	CORSOrigins []string
	// PprofListen, if set, is a loopback address where the daemon serves
	// net/http/pprof, without authentication: for profiling on the host.
	PprofListen string
	// TLSCertFile and TLSKeyFile, if set, make the daemon serve HTTPS
	// (HTTP/1.1 and HTTP/2 by ALPN) instead of cleartext on Listen.
	TLSCertFile, TLSKeyFile string
	// AllowNoUserNS lets the daemon run where user namespaces are not
	// available; sandboxed code then runs as an unprivileged host user.
	AllowNoUserNS bool
	// CgroupFavorDynMods turns on favordynmods on the host's cgroup2
	// mount at start, so moving a sandbox's init into its cgroups does not
	// wait for an RCU grace period (see package cgroup). It is a host-wide
	// setting; the daemon never turns it off again.
	CgroupFavorDynMods bool
	// IDBase is the first host uid and gid of sandboxes' id blocks (65536
	// ids each). Blocks are handed out host-wide, through a registry every
	// daemon on the host shares, on one grid: IDBase differs from the
	// default by a multiple of 65536.
	IDBase int64
	// NoDiskQuota runs without a layer store: writable layers are then
	// unlimited and sessions may not ask for limits.disk_mb.
	NoDiskQuota bool
	// Disk is how the sessions' disk limits are backed by the data
	// directory's filesystem (see internal/quota's guard.go).
	Disk Disk
	// Shutdown is what a stop does to running sessions: ShutdownKeep
	// leaves them running for the next daemon to adopt, ShutdownDestroy
	// deletes them.
	Shutdown string
	// MCPAllowedHosts is a comma-separated list of host names that a
	// request to /mcp arriving on a loopback address may name in its Host
	// header besides loopback names: those of a reverse proxy on the same
	// host. "*" allows any. See MCPHosts.
	MCPAllowedHosts string
	// PreviewDomain, if set, serves sessions' ports at hosts named
	// {port}-{session}.PreviewDomain besides their /v1 paths
	// (docs/PORTS.md); the operator points a wildcard DNS record there.
	PreviewDomain string
	Session       session.Config
	Auth          Auth
	Network       Network
	Fleet         Fleet
}

// Disk: the per-layer images of the sessions' writable layers are sparse.
// Without Overcommit a layer is created only if the free space backs every
// live layer's limit and the new one; with it, limits may add up to more
// than the disk holds. In both, writes inside sessions fail with ENOSPC
// once the free space falls under ReserveWatermarkMB, before the host
// filesystem fills and a layer's write-back would be lost.
type Disk struct {
	Overcommit bool
	// ReserveWatermarkMB is the free space kept (0: 5% of the filesystem,
	// at most 256 MiB).
	ReserveWatermarkMB int64
}

// MCPHosts returns MCPAllowedHosts as a list.
func (c *Config) MCPHosts() []string {
	return strings.FieldsFunc(c.MCPAllowedHosts, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
}

// Auth configures who may call the daemon.
type Auth struct {
	// Disabled serves every caller as the admin of the tenant "default".
	// The daemon refuses it on a non-loopback address unless Insecure.
	Disabled bool
	// Insecure allows Disabled on a non-loopback address.
	Insecure bool
	// JWTSecretFile holds the HS256 secret (at least 32 bytes) of JWTs the
	// daemon accepts besides its own API keys.
	JWTSecretFile string
	// JWKSURL and JWKSFile name the keys of RS256 and ES256 JWTs.
	JWKSURL, JWKSFile string
	// JWTTenantClaim names the claim holding the tenant ("tenant").
	JWTTenantClaim string
	// JWTAdminClaim, if set, names a boolean claim that makes the caller
	// an administrator.
	JWTAdminClaim string
	// JWTAudience and JWTIssuer, if set, must match aud and iss.
	JWTAudience, JWTIssuer string
	// RateLimit is how many requests per second one API key (or JWT
	// subject) may make, with bursts of RateBurst; 0 for no limit.
	RateLimit float64
	RateBurst int
	// TenantDefaults applies to every tenant where its own settings leave a
	// field zero.
	TenantDefaults auth.Quota
	// TenantPublicPorts lets every tenant whose own settings do not say
	// otherwise serve ports without authentication.
	TenantPublicPorts bool
}

// JWT returns the JWT settings, nil when no JWT is accepted.
func (a *Auth) JWT() (*auth.JWTConfig, error) {
	if a.JWTSecretFile == "" && a.JWKSURL == "" && a.JWKSFile == "" {
		return nil, nil
	}
	j := &auth.JWTConfig{JWKSURL: a.JWKSURL, JWKSFile: a.JWKSFile, TenantClaim: a.JWTTenantClaim,
		AdminClaim: a.JWTAdminClaim, Audience: a.JWTAudience, Issuer: a.JWTIssuer, Leeway: 30 * time.Second}
	if a.JWTSecretFile != "" {
		b, err := os.ReadFile(a.JWTSecretFile)
		if err != nil {
			return nil, fmt.Errorf("JWT secret: %w", err)
		}
		j.HS256Secret = bytes.TrimSpace(b)
	}
	return j, nil
}

// The values of Config.Shutdown.
const (
	ShutdownKeep    = "keep"
	ShutdownDestroy = "destroy"
)

// Default returns the embedded defaults.
func Default() Config {
	return Config{
		Listen:             DefaultListen,
		DataDir:            DefaultDataDir,
		CgroupParent:       "warren",
		CgroupFavorDynMods: true,
		IDBase:             DefaultIDBase,
		LogFormat:          "json",
		LogLevel:           "info",
		ShutdownGrace:      10 * time.Second,
		Shutdown:           ShutdownKeep,
		Session:            session.DefaultConfig(),
		Auth:               Auth{JWTTenantClaim: "tenant", RateLimit: 200, RateBurst: 400},
		Fleet:              Fleet{NodeTTL: 10 * time.Second, LostGrace: 5 * time.Minute, Prefix: "/warren/fleet/"},
	}
}

// DefaultIDBase is the default IDBase (package sandbox's DefaultIDBase).
const DefaultIDBase = 1_000_000_000

// Validate checks the configuration.
func (c *Config) Validate() error {
	if err := checkDefaultNetwork(c.Session.DefaultNetwork, c.Session.DefaultNetworkAllow); err != nil {
		return err
	}
	if c.IDBase < 65536 || c.IDBase+65536 > 1<<32-1 || (c.IDBase-DefaultIDBase)%65536 != 0 {
		return fmt.Errorf("id base %d: must be %d plus or minus a multiple of 65536, between 65536 and %d (blocks of 65536 ids sit on one grid for every daemon on the host)", c.IDBase, DefaultIDBase, int64(1<<32-1-65536))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen address %q: %w", c.Listen, err)
	}
	if !filepath.IsAbs(c.DataDir) {
		return fmt.Errorf("data dir %q must be an absolute path", c.DataDir)
	}
	if strings.ContainsAny(c.DataDir, ",:\\\n") {
		return fmt.Errorf("data dir %q must not contain a comma, colon or backslash (they cannot go into overlayfs options)", c.DataDir)
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		return fmt.Errorf("log format %q: use json or text", c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log level %q: use debug, info, warn or error", c.LogLevel)
	}
	if c.Shutdown != ShutdownKeep && c.Shutdown != ShutdownDestroy {
		return fmt.Errorf("shutdown %q: use keep or destroy", c.Shutdown)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return fmt.Errorf("tls_cert_file and tls_key_file go together")
	}
	if c.PprofListen != "" {
		host, _, err := net.SplitHostPort(c.PprofListen)
		ip := net.ParseIP(host)
		if err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
			return fmt.Errorf("pprof listen address %q: must be a loopback host:port (the profiler has no authentication)", c.PprofListen)
		}
	}
	for _, o := range c.CORSOrigins {
		if err := checkOrigin(o); err != nil {
			return fmt.Errorf("cors_origins: %q: %w", o, err)
		}
	}
	for _, h := range c.MCPHosts() {
		if strings.ContainsAny(h, "/:[]@") {
			return fmt.Errorf("mcp_allowed_hosts: %q is not a host name (give names such as warren.example.com, without scheme, port or path)", h)
		}
	}
	if d := c.PreviewDomain; d != "" && (strings.ContainsAny(d, "/:[]@* ") || strings.HasPrefix(d, ".") || strings.HasSuffix(d, ".") || !strings.Contains(d, ".")) {
		return fmt.Errorf("preview_domain: %q is not a domain name (give one such as preview.example.com, without scheme, port, path or wildcard)", d)
	}
	if err := c.checkExposure(); err != nil {
		return err
	}
	if err := c.checkFleet(); err != nil {
		return err
	}
	if c.Auth.RateLimit < 0 || c.Auth.RateBurst < 0 {
		return fmt.Errorf("rate limit and burst must not be negative")
	}
	if c.Auth.RateLimit > 0 && c.Auth.RateBurst < 1 {
		return fmt.Errorf("a rate limit needs a burst of at least 1")
	}
	if c.Session.MaxSessions < 1 {
		return fmt.Errorf("max sessions must be at least 1")
	}
	for _, s := range settings {
		if !s.signed && isNegative(s.field(c)) {
			return fmt.Errorf("%s (--%s) must not be negative", s.Key, s.Flag)
		}
	}
	return c.checkDefaultsWithinMaxima()
}

// checkOrigin checks an entry of cors_origins as far as its syntax goes:
// "*", or scheme://host[:port] with an http or https scheme and nothing
// after it, whose host may start with "*." (edge.ParseOrigins has the
// whole rule; config cannot import the edge).
func checkOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(strings.Replace(o, "://*.", "://wildcard.", 1))
	switch {
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("want an origin such as https://console.example.com")
	case u.Hostname() == "" || strings.Contains(u.Host, "*"):
		return fmt.Errorf("want a host, or \"*.\" and a domain")
	case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return fmt.Errorf("an origin is scheme://host[:port], with no path, query or user")
	}
	return nil
}

func isNegative(p any) bool {
	switch p := p.(type) {
	case *int:
		return *p < 0
	case *int64:
		return *p < 0
	case *float64:
		return *p < 0
	case *time.Duration:
		return *p < 0
	}
	return false
}

// checkDefaultsWithinMaxima refuses a session default above its maximum: a
// session that asked for nothing could never be created. Zero stands for
// the built-in value (session.DefaultConfig), as the manager reads it.
func (c *Config) checkDefaultsWithinMaxima() error {
	d := session.DefaultConfig()
	or := func(v, def float64) float64 {
		if v == 0 {
			return def
		}
		return v
	}
	s, l, ml := &c.Session, &c.Session.DefaultLimits, &c.Session.MaxLimits
	dl, dml := d.DefaultLimits, d.MaxLimits
	for _, p := range []struct {
		def, max string
		v, m     float64
	}{
		{"session.idle_ttl", "session.max_idle_ttl", or(float64(s.DefaultIdleTTL), float64(d.DefaultIdleTTL)), or(float64(s.MaxIdleTTL), float64(d.MaxIdleTTL))},
		{"session.lifetime", "session.max_lifetime", or(float64(s.DefaultMaxLifetime), float64(d.DefaultMaxLifetime)), or(float64(s.MaxLifetime), float64(d.MaxLifetime))},
		{"session.exec_timeout", "session.max_exec_timeout", or(float64(s.DefaultTimeout), float64(d.DefaultTimeout)), or(float64(s.MaxTimeout), float64(d.MaxTimeout))},
		{"session.exec_output_bytes", "session.max_exec_output_bytes", or(float64(s.DefaultMaxOutput), float64(d.DefaultMaxOutput)), or(float64(s.MaxOutput), float64(d.MaxOutput))},
		{"session.default_limits.memory_mb", "session.max_limits.memory_mb", or(float64(l.MemoryMB), float64(dl.MemoryMB)), or(float64(ml.MemoryMB), float64(dml.MemoryMB))},
		{"session.default_limits.cpus", "session.max_limits.cpus", or(l.CPUs, dl.CPUs), or(ml.CPUs, dml.CPUs)},
		{"session.default_limits.pids", "session.max_limits.pids", or(float64(l.Pids), float64(dl.Pids)), or(float64(ml.Pids), float64(dml.Pids))},
		{"session.default_limits.disk_mb", "session.max_limits.disk_mb", or(float64(l.DiskMB), float64(dl.DiskMB)), or(float64(ml.DiskMB), float64(dml.DiskMB))},
	} {
		if p.v > p.m {
			return fmt.Errorf("%s must not be above %s", p.def, p.max)
		}
	}
	return nil
}

// checkExposure refuses to serve without authentication anywhere but on
// loopback, unless told to with Insecure.
func (c *Config) checkExposure() error {
	if !c.Auth.Disabled || c.Auth.Insecure {
		return nil
	}
	host, _, _ := net.SplitHostPort(c.Listen)
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing to serve %s without authentication: anyone who reaches it would own every session; "+
		"listen on 127.0.0.1, enable authentication, or pass --insecure if something else guards the port", c.Listen)
}

// checkDefaultNetwork validates network.default_mode and default_allow.
func checkDefaultNetwork(mode string, allow []string) error {
	switch mode {
	case "", "none", "open":
		if len(allow) > 0 {
			return fmt.Errorf("network.default_allow needs network.default_mode allowlist, not %q", mode)
		}
	case "allowlist":
	default:
		return fmt.Errorf("network.default_mode %q is not one of none, open, allowlist", mode)
	}
	for _, a := range allow {
		if _, err := rules.Parse(a); err != nil {
			return fmt.Errorf("network.default_allow rule %q: %w", a, err)
		}
	}
	return nil
}

// checkFleet checks the fleet settings when the fleet is on.
func (c *Config) checkFleet() error {
	f := &c.Fleet
	if !f.Enabled() {
		return nil
	}
	if f.NodeTTL < time.Second || f.NodeTTL%time.Second != 0 {
		return fmt.Errorf("fleet.node_ttl %v: want whole seconds, at least 1s (etcd's leases count seconds)", f.NodeTTL)
	}
	if strings.ContainsAny(f.Node, "/ ") {
		return fmt.Errorf("fleet.node %q: a node name has no slash or space", f.Node)
	}
	if !strings.HasPrefix(f.Prefix, "/") {
		return fmt.Errorf("fleet.prefix %q: want a key prefix such as /warren/fleet/", f.Prefix)
	}
	for _, e := range f.Etcd {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("fleet.etcd: %q is not an etcd client URL such as http://10.0.0.7:2379", e)
		}
	}
	if f.Advertise != "" {
		if u, err := url.Parse(f.Advertise); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("fleet.advertise: %q is not a base URL such as http://10.0.0.7:7433", f.Advertise)
		}
	} else if host, _, _ := net.SplitHostPort(c.Listen); host == "" || net.ParseIP(host).IsUnspecified() {
		return fmt.Errorf("fleet.advertise: the daemon listens on %s, a wildcard; say which address other nodes reach it at (--fleet-advertise http://HOST:PORT)", c.Listen)
	} else if c.TLSCertFile != "" {
		// The default would be https://IP:PORT, which a certificate
		// rarely names.
		return fmt.Errorf("fleet.advertise: with tls_cert_file, say which https:// URL (a name the certificate holds) other nodes reach this daemon at")
	}
	if (f.EtcdCertFile == "") != (f.EtcdKeyFile == "") {
		return fmt.Errorf("fleet.etcd_cert_file and fleet.etcd_key_file go together")
	}
	if (f.EtcdUsername == "") != (f.EtcdPasswordFile == "") {
		return fmt.Errorf("fleet.etcd_username and fleet.etcd_password_file go together")
	}
	if f.Embedded {
		if len(f.InitialCluster) == 0 {
			return fmt.Errorf("fleet.etcd_embedded needs fleet.etcd_initial_cluster (name=peer URL of every member)")
		}
		for _, m := range f.InitialCluster {
			name, u, ok := strings.Cut(m, "=")
			if pu, err := url.Parse(u); !ok || name == "" || err != nil || pu.Host == "" {
				return fmt.Errorf("fleet.etcd_initial_cluster: %q is not name=http://host:port", m)
			}
		}
		if f.ClientURL != "" {
			if u, err := url.Parse(f.ClientURL); err != nil || u.Host == "" {
				return fmt.Errorf("fleet.etcd_client_url: %q is not a URL such as http://10.0.0.7:2379", f.ClientURL)
			}
		}
	} else if len(f.InitialCluster) > 0 || f.ClientURL != "" {
		return fmt.Errorf("fleet.etcd_initial_cluster and fleet.etcd_client_url configure an embedded member: set fleet.etcd_embedded too")
	}
	return nil
}
