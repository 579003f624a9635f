package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Setting is one field of Config as the user sees it: a TOML key, a flag of
// warren serve and an environment variable.
type Setting struct {
	// Key is the TOML key, dotted by table: "session.max_sessions" is
	// max_sessions in [session].
	Key string
	// Flag is warren serve's flag, without the dashes.
	Flag string
	// Env is the environment variable: WARREN_ and Flag in upper snake
	// case.
	Env string
	// Help says what the setting does, as a phrase without a full stop.
	Help string
	// field returns a pointer to the setting's field of c: a *string,
	// *int, *int64, *float64, *bool, *time.Duration or *[]string.
	field func(c *Config) any
	// signed is set on the numbers that may be negative; Validate refuses
	// a negative value of any other.
	signed bool
}

// setting makes a Setting whose environment variable follows from flag.
func setting(key, flag, help string, field func(c *Config) any) Setting {
	return Setting{Key: key, Flag: flag, Env: "WARREN_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_")), Help: help, field: field}
}

// negativeOK returns s, allowed to be negative.
func (s Setting) negativeOK() Setting {
	s.signed = true
	return s
}

// settings is every setting, in the order of the TOML file: top-level keys
// first, then each table with its keys together (a table cannot be reopened
// once another has started).
var settings = []Setting{
	setting("listen", "listen", "address to serve the API on (host:port)", func(c *Config) any { return &c.Listen }),
	setting("cors_origins", "cors-origins", "browser origins besides the daemon's own whose pages may call the API and open its WebSockets, such as https://console.example.com or https://*.example.com (\"*\": any; a token in ?token= needs none); comma-separated in the flag and environment", func(c *Config) any { return &c.CORSOrigins }),
	setting("data_dir", "data-dir", "directory for the database, images and sandboxes", func(c *Config) any { return &c.DataDir }),
	setting("cgroup_parent", "cgroup-parent", "cgroup under which sessions are placed, relative to the cgroup root (on v2 it needs a delegated subtree)", func(c *Config) any { return &c.CgroupParent }),
	setting("cgroup_favor_dynmods", "cgroup-favor-dynmods", "turn on the host's cgroup2 favordynmods option at start: sandbox starts then skip an RCU grace period (5-20 ms) when moving into their cgroups (host-wide; Linux 6.0+)", func(c *Config) any { return &c.CgroupFavorDynMods }),
	setting("log_format", "log-format", "log format: json or text", func(c *Config) any { return &c.LogFormat }),
	setting("log_level", "log-level", "log level: debug, info, warn or error", func(c *Config) any { return &c.LogLevel }),
	setting("shutdown", "shutdown", "what stopping does to running sessions: keep (the next start adopts them) or destroy", func(c *Config) any { return &c.Shutdown }),
	setting("tls_cert_file", "tls-cert-file", "PEM file of the certificate (chain) to serve HTTPS with on listen, HTTP/1.1 and HTTP/2 (empty: cleartext, with HTTP/2 for gRPC as h2c); read again within 10 s when it changes, so a renewal needs no restart", func(c *Config) any { return &c.TLSCertFile }),
	setting("tls_key_file", "tls-key-file", "PEM file of tls_cert_file's private key", func(c *Config) any { return &c.TLSKeyFile }),
	setting("pprof_listen", "pprof-listen", "loopback address to serve Go's profiler (net/http/pprof) on, for profiling the daemon (empty: off)", func(c *Config) any { return &c.PprofListen }),
	setting("shutdown_grace", "shutdown-grace", "how long in-flight requests may run after a stop signal", func(c *Config) any { return &c.ShutdownGrace }),
	setting("allow_no_userns", "allow-no-userns", "run where user namespaces are unavailable: sandboxed code then runs as an unprivileged host user, not as root in its own namespace", func(c *Config) any { return &c.AllowNoUserNS }),
	setting("mcp_allowed_hosts", "mcp-allowed-hosts", "host names besides loopback ones that a request to /mcp on a loopback address may carry in its Host header, comma-separated: those of a reverse proxy on the same host (\"*\": any; the check guards a loopback daemon against DNS rebinding)", func(c *Config) any { return &c.MCPAllowedHosts }),
	setting("preview_domain", "preview-domain", "domain under which sessions' ports are also served by host name, as {port}-{session}.DOMAIN (a wildcard DNS record *.DOMAIN must point at the daemon; empty: only the /v1/sessions/{id}/ports/{port}/ paths)", func(c *Config) any { return &c.PreviewDomain }),
	setting("id_base", "id-base", "first host uid and gid of sandboxes' id blocks (65536 each), handed out host-wide through a registry in /run/warren that every daemon on the host shares; it must differ from 1000000000 by a multiple of 65536", func(c *Config) any { return &c.IDBase }),
	setting("no_disk_quota", "no-disk-quota", "run without disk limits on sessions' writable layers (sessions may then not ask for limits.disk_mb)", func(c *Config) any { return &c.NoDiskQuota }),
	setting("disk.overcommit", "disk-overcommit", "grant sessions' disk limits (limits.disk_mb) beyond the data directory's free space (workspaces are always backed). Off (the default), a session or workspace is created only if the free space backs every live layer's limit plus the new one, less what each already uses, and the watermark (beyond: 503 unavailable), so a write a session was told succeeded is never lost to a full host filesystem; this makes disk space, at the default 1 GiB limit, what bounds how many sessions fit. On, more sessions fit and the watermark alone protects the data: the writes of sessions fail with ENOSPC near it. Applies to per-layer images (internal/quota's image-per-layer mode)", func(c *Config) any { return &c.Disk.Overcommit }),
	setting("disk.reserve_watermark_mb", "disk-reserve-watermark-mb", "free space in MiB kept on the data directory's filesystem for what is not a layer (0: 5% of the filesystem, at most 256 MiB): below it, writes inside sessions fail with ENOSPC before the host filesystem fills, in both overcommit modes, and rise again when space returns", func(c *Config) any { return &c.Disk.ReserveWatermarkMB }),

	setting("session.max_sessions", "max-sessions", "most sessions at once, over all tenants", func(c *Config) any { return &c.Session.MaxSessions }),
	setting("session.default_image", "default-image", "image of a session that names none", func(c *Config) any { return &c.Session.DefaultImage }),
	setting("session.idle_ttl", "idle-ttl", "idle time after which a session is deleted, unless it asks otherwise", func(c *Config) any { return &c.Session.DefaultIdleTTL }),
	setting("session.max_idle_ttl", "max-idle-ttl", "longest idle TTL a session may ask for", func(c *Config) any { return &c.Session.MaxIdleTTL }),
	setting("session.lifetime", "lifetime", "time after which a session is deleted however busy, unless it asks otherwise", func(c *Config) any { return &c.Session.DefaultMaxLifetime }),
	setting("session.max_lifetime", "max-lifetime", "longest lifetime a session may ask for", func(c *Config) any { return &c.Session.MaxLifetime }),
	setting("session.exec_timeout", "exec-timeout", "timeout of a command that asks for none", func(c *Config) any { return &c.Session.DefaultTimeout }),
	setting("session.max_exec_timeout", "max-exec-timeout", "longest timeout a command may ask for", func(c *Config) any { return &c.Session.MaxTimeout }),
	setting("session.exec_output_bytes", "exec-output-bytes", "output a command keeps per stream, unless it asks otherwise (max_output_bytes)", func(c *Config) any { return &c.Session.DefaultMaxOutput }),
	setting("session.max_exec_output_bytes", "max-exec-output-bytes", "most output per stream a command may ask to keep", func(c *Config) any { return &c.Session.MaxOutput }),
	setting("session.max_file_bytes", "max-file-bytes", "largest file the file API moves (413 beyond)", func(c *Config) any { return &c.Session.MaxFileBytes }),
	setting("session.background_log_bytes", "background-log-bytes", "output of background processes a session keeps", func(c *Config) any { return &c.Session.BackgroundLogBytes }),
	setting("session.create_timeout", "create-timeout", "how long creating a sandbox may take", func(c *Config) any { return &c.Session.CreateTimeout }),
	setting("session.reap_interval", "reap-interval", "how often expired sessions are looked for", func(c *Config) any { return &c.Session.ReapInterval }),
	setting("session.pool_size", "pool-size", "sandboxes of the default image kept started and waiting, so that a create with default settings takes one (0: no pool)", func(c *Config) any { return &c.Session.PoolSize }),
	setting("session.min_free_disk_mb", "min-free-disk-mb", "free space in MiB the data directory's filesystem must keep for a session to be created (0: 1 GiB or 5% of the filesystem, whichever is smaller; negative: no check)", func(c *Config) any { return &c.Session.MinFreeDiskMB }).negativeOK(),

	setting("session.default_limits.memory_mb", "default-memory-mb", "memory limit of a session that asks for none", func(c *Config) any { return &c.Session.DefaultLimits.MemoryMB }),
	setting("session.default_limits.cpus", "default-cpus", "CPU limit of a session that asks for none", func(c *Config) any { return &c.Session.DefaultLimits.CPUs }),
	setting("session.default_limits.pids", "default-pids", "process limit of a session that asks for none", func(c *Config) any { return &c.Session.DefaultLimits.Pids }),
	setting("session.default_limits.disk_mb", "default-disk-mb", "writable-layer limit of a session that asks for none", func(c *Config) any { return &c.Session.DefaultLimits.DiskMB }),

	setting("session.max_limits.memory_mb", "max-memory-mb", "largest memory limit a session may ask for", func(c *Config) any { return &c.Session.MaxLimits.MemoryMB }),
	setting("session.max_limits.cpus", "max-cpus", "largest CPU limit a session may ask for", func(c *Config) any { return &c.Session.MaxLimits.CPUs }),
	setting("session.max_limits.pids", "max-pids", "largest process limit a session may ask for", func(c *Config) any { return &c.Session.MaxLimits.Pids }),
	setting("session.max_limits.disk_mb", "max-disk-mb", "largest writable-layer limit a session may ask for", func(c *Config) any { return &c.Session.MaxLimits.DiskMB }),

	setting("auth.disabled", "no-auth", "serve every caller as admin of the tenant \"default\" (loopback only, unless insecure)", func(c *Config) any { return &c.Auth.Disabled }),
	setting("auth.insecure", "insecure", "allow auth.disabled on a non-loopback address", func(c *Config) any { return &c.Auth.Insecure }),
	setting("auth.rate_limit", "rate-limit", "requests per second one API key or JWT subject may make (0: unlimited); in a fleet, across all its nodes", func(c *Config) any { return &c.Auth.RateLimit }),
	setting("auth.rate_burst", "rate-burst", "burst of requests one API key may make above the rate limit", func(c *Config) any { return &c.Auth.RateBurst }),

	setting("auth.jwt.secret_file", "jwt-secret-file", "accept HS256 JWTs signed with the secret (at least 32 bytes) in this file", func(c *Config) any { return &c.Auth.JWTSecretFile }),
	setting("auth.jwt.jwks_url", "jwks-url", "accept RS256/ES256 JWTs signed by the keys this JWKS URL serves", func(c *Config) any { return &c.Auth.JWKSURL }),
	setting("auth.jwt.jwks_file", "jwks-file", "accept RS256/ES256 JWTs signed by the keys of this JWKS file", func(c *Config) any { return &c.Auth.JWKSFile }),
	setting("auth.jwt.tenant_claim", "jwt-tenant-claim", "JWT claim that names the caller's tenant", func(c *Config) any { return &c.Auth.JWTTenantClaim }),
	setting("auth.jwt.admin_claim", "jwt-admin-claim", "boolean JWT claim that makes the caller an admin (none if empty)", func(c *Config) any { return &c.Auth.JWTAdminClaim }),
	setting("auth.jwt.audience", "jwt-audience", "audience a JWT must carry in aud (none checked if empty)", func(c *Config) any { return &c.Auth.JWTAudience }),
	setting("auth.jwt.issuer", "jwt-issuer", "issuer a JWT must carry in iss (none checked if empty)", func(c *Config) any { return &c.Auth.JWTIssuer }),

	setting("tenant_defaults.max_sessions", "tenant-max-sessions", "sessions one tenant may hold at once, unless its settings say otherwise (0: only max_sessions)", func(c *Config) any { return &c.Auth.TenantDefaults.MaxSessions }),
	setting("tenant_defaults.max_memory_mb", "tenant-max-memory-mb", "memory limits one tenant's sessions may hold in total (0: no cap)", func(c *Config) any { return &c.Auth.TenantDefaults.MaxMemoryMB }),
	setting("tenant_defaults.max_cpus", "tenant-max-cpus", "CPU limits one tenant's sessions may hold in total (0: no cap)", func(c *Config) any { return &c.Auth.TenantDefaults.MaxCPUs }),
	setting("tenant_defaults.max_lifetime", "tenant-max-lifetime", "longest a tenant's session may live (0: no cap)", func(c *Config) any { return &c.Auth.TenantDefaults.MaxLifetime }),
	setting("tenant_defaults.max_workspaces", "tenant-max-workspaces", "workspaces one tenant may keep, unless its settings say otherwise (0: no cap)", func(c *Config) any { return &c.Auth.TenantDefaults.MaxWorkspaces }),
	setting("tenant_defaults.max_snapshots", "tenant-max-snapshots", "snapshots one tenant may keep, unless its settings say otherwise (0: no cap)", func(c *Config) any { return &c.Auth.TenantDefaults.MaxSnapshots }),
	setting("tenant_defaults.max_exec_timeout", "tenant-max-exec-timeout", "longest timeout a tenant's command may ask for (0: no cap)", func(c *Config) any { return &c.Auth.TenantDefaults.MaxExecTimeout }),
	setting("tenant_defaults.allow_public_ports", "tenant-allow-public-ports", "let tenants whose settings do not say otherwise make their sessions' ports public (served without authentication)", func(c *Config) any { return &c.Auth.TenantPublicPorts }),

	setting("network.range", "network-range", "IPv4 range the sessions' links are numbered from, one /30 per session with egress (empty: 10.213.0.0/16); it is always blocked to sessions", func(c *Config) any { return &c.Network.Range }),
	setting("network.egress_interface", "network-egress-interface", "interface sessions' egress is masqueraded out of (empty: whichever the route takes, the default route's)", func(c *Config) any { return &c.Network.EgressInterface }),
	setting("network.dns_upstream", "network-dns-upstream", "resolvers (ip or ip:port) the sessions' DNS forwarder asks (empty: the host's, from /etc/resolv.conf, or systemd-resolved's upstreams when it names the 127.0.0.53 stub); comma-separated in the flag and environment", func(c *Config) any { return &c.Network.DNSUpstream }),
	setting("network.allow_private", "network-allow-private", "IPv4 ranges (CIDR) taken out of the always-blocked list, so sessions may reach them (such as a private package mirror); the host's own addresses and the sessions' range stay blocked; comma-separated in the flag and environment", func(c *Config) any { return &c.Network.AllowPrivate }),
	setting("network.default_mode", "network-default-mode", "network of a session created without one: none, open or allowlist (with network.default_allow); a tenant whose ceiling is below it gets none", func(c *Config) any { return &c.Session.DefaultNetwork }),
	setting("network.default_allow", "network-default-allow", "allow rules of network.default_mode allowlist (names, *.wildcards, IPv4 addresses or CIDRs, each with an optional :port); comma-separated in the flag and environment", func(c *Config) any { return &c.Session.DefaultNetworkAllow }),
	setting("network.max_connections", "network-max-connections", "cap on each networked session's concurrent connections (0: 1024; negative: no cap), so that one session cannot fill the host's connection tracking table", func(c *Config) any { return &c.Network.MaxConnections }).negativeOK(),
	setting("network.netns", "network-netns", "path of a network namespace that holds the sessions' uplink (their host-side links, warren's nftables table, the DNS forwarder), such as /run/netns/egress (empty: the daemon's own)", func(c *Config) any { return &c.Network.NetNS }),

	setting("fleet.etcd", "fleet-etcd", "etcd client URLs (http://host:2379) of the fleet's registry: set, the daemon is a node of a fleet (docs/FLEET.md); empty: a single node; comma-separated in the flag and environment", func(c *Config) any { return &c.Fleet.Etcd }),
	setting("fleet.node", "fleet-node", "this node's name in the fleet (empty: the host name)", func(c *Config) any { return &c.Fleet.Node }),
	setting("fleet.advertise", "fleet-advertise", "base URL other nodes reach this daemon's API at, such as http://10.0.0.7:7433 (empty: http:// and the listen address, which must then not be a wildcard)", func(c *Config) any { return &c.Fleet.Advertise }),
	setting("fleet.node_ttl", "fleet-node-ttl", "lease of this node's registry entry: this long after its last renewal the fleet counts the node dead and answers 503 for its sessions (whole seconds)", func(c *Config) any { return &c.Fleet.NodeTTL }),
	setting("fleet.lost_grace", "fleet-lost-grace", "how long after a node was counted dead its sessions are declared lost, their quota given back, and the node made to delete them if it returns", func(c *Config) any { return &c.Fleet.LostGrace }),
	setting("fleet.prefix", "fleet-prefix", "etcd key prefix of the fleet's records (two fleets may share one etcd under two prefixes)", func(c *Config) any { return &c.Fleet.Prefix }),
	setting("fleet.ca_file", "fleet-ca-file", "PEM file of the CAs that sign the other nodes' serving certificates, for forwarding to nodes advertised at https:// (empty: the host's roots)", func(c *Config) any { return &c.Fleet.CAFile }),
	setting("fleet.etcd_ca_file", "fleet-etcd-ca-file", "PEM file of the CAs that sign etcd's server certificates (empty: the host's roots, for https endpoints)", func(c *Config) any { return &c.Fleet.EtcdCAFile }),
	setting("fleet.etcd_cert_file", "fleet-etcd-cert-file", "PEM client certificate presented to etcd (with fleet.etcd_key_file)", func(c *Config) any { return &c.Fleet.EtcdCertFile }),
	setting("fleet.etcd_key_file", "fleet-etcd-key-file", "PEM key of fleet.etcd_cert_file", func(c *Config) any { return &c.Fleet.EtcdKeyFile }),
	setting("fleet.etcd_username", "fleet-etcd-username", "etcd user to authenticate as (with fleet.etcd_password_file)", func(c *Config) any { return &c.Fleet.EtcdUsername }),
	setting("fleet.etcd_password_file", "fleet-etcd-password-file", "file holding fleet.etcd_username's password", func(c *Config) any { return &c.Fleet.EtcdPasswordFile }),
	setting("fleet.etcd_embedded", "fleet-etcd-embedded", "run an etcd member inside this daemon, one of fleet.etcd_initial_cluster, so three daemons need no separate etcd; its data is in the data directory's etcd/", func(c *Config) any { return &c.Fleet.Embedded }),
	setting("fleet.etcd_initial_cluster", "fleet-etcd-initial-cluster", "the embedded members as name=peer URL (node names: a=http://10.0.0.7:2380,b=...), the same on every member; comma-separated in the flag and environment", func(c *Config) any { return &c.Fleet.InitialCluster }),
	setting("fleet.etcd_client_url", "fleet-etcd-client-url", "URL the embedded member serves etcd's clients on (empty: http://127.0.0.1:2379); when fleet.etcd is empty it is this node's only endpoint", func(c *Config) any { return &c.Fleet.ClientURL }),
}

// Fleet makes the daemon a node of a fleet (package fleet,
// docs/FLEET.md). It is off while Etcd is empty and Embedded false.
type Fleet struct {
	Etcd      []string
	Node      string
	Advertise string
	// CAFile holds the CAs of the other nodes' certificates (https://
	// advertise URLs); empty: the host's roots.
	CAFile    string
	NodeTTL   time.Duration
	LostGrace time.Duration
	Prefix    string
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile configure TLS to etcd.
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	EtcdUsername, EtcdPasswordFile        string
	// Embedded runs an etcd member in the daemon, one of InitialCluster
	// (name=peer URL), serving clients at ClientURL.
	Embedded       bool
	InitialCluster []string
	ClientURL      string
}

// Enabled reports whether the daemon is a node of a fleet.
func (f *Fleet) Enabled() bool { return len(f.Etcd) > 0 || f.Embedded }

// Network configures sessions' egress (package network; docs/NETWORKING.md).
type Network struct {
	Range           string
	EgressInterface string
	DNSUpstream     []string
	AllowPrivate    []string
	NetNS           string
	MaxConnections  int
}

// Settings returns every setting, in the order of the TOML file.
func Settings() []Setting {
	return append([]Setting(nil), settings...)
}

// Type names the setting's kind of value: string, int, float, bool,
// duration or list (of strings).
func (s Setting) Type() string {
	switch s.field(&Config{}).(type) {
	case *string:
		return "string"
	case *int, *int64:
		return "int"
	case *float64:
		return "float"
	case *bool:
		return "bool"
	case *time.Duration:
		return "duration"
	case *[]string:
		return "list"
	}
	panic("config: setting " + s.Key + " has a field of an unknown type")
}

// Set parses v as a flag or environment variable spells it ("30m", "512",
// "true", "a,b") and stores it in c. A list's items are separated by
// commas; spaces around them and empty ones are dropped.
func (s Setting) Set(c *Config, v string) error {
	switch p := s.field(c).(type) {
	case *string:
		*p = v
	case *int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		*p = n
	case *int64:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		*p = n
	case *float64:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%q is not a number", v)
		}
		*p = f
	case *bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		*p = b
	case *time.Duration:
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q is not a duration such as 90s, 30m or 24h", v)
		}
		*p = d
	case *[]string:
		*p = nil
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				*p = append(*p, item)
			}
		}
	}
	return nil
}

// Value returns the setting's value in c as a flag or environment variable
// spells it; Set(c, Value(c)) changes nothing.
func (s Setting) Value(c *Config) string {
	switch p := s.field(c).(type) {
	case *string:
		return *p
	case *int:
		return strconv.Itoa(*p)
	case *int64:
		return strconv.FormatInt(*p, 10)
	case *float64:
		return strconv.FormatFloat(*p, 'f', -1, 64)
	case *bool:
		return strconv.FormatBool(*p)
	case *time.Duration:
		return formatDuration(*p)
	case *[]string:
		return strings.Join(*p, ",")
	}
	panic("config: setting " + s.Key + " has a field of an unknown type")
}

// TOML returns the setting's value in c as a TOML value: strings quoted,
// floats with a decimal point, durations as strings.
func (s Setting) TOML(c *Config) string {
	switch p := s.field(c).(type) {
	case *string:
		return tomlString(*p)
	case *float64:
		f := strconv.FormatFloat(*p, 'f', -1, 64)
		if !strings.Contains(f, ".") {
			f += ".0"
		}
		return f
	case *time.Duration:
		return tomlString(formatDuration(*p))
	case *[]string:
		items := make([]string, len(*p))
		for i, v := range *p {
			items[i] = tomlString(v)
		}
		return "[" + strings.Join(items, ", ") + "]"
	}
	return s.Value(c)
}

// Table returns the TOML table the setting belongs to ("" for the top
// level) and its key within it.
func (s Setting) Table() (table, name string) {
	if i := strings.LastIndexByte(s.Key, '.'); i >= 0 {
		return s.Key[:i], s.Key[i+1:]
	}
	return "", s.Key
}

// formatDuration writes d as time.Duration.String does, without the zero
// units at its end: "30m", not "30m0s"; "168h", not "168h0m0s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// lookupFlag returns the setting whose flag is name.
func lookupFlag(name string) (Setting, bool) {
	for _, s := range settings {
		if s.Flag == name {
			return s, true
		}
	}
	return Setting{}, false
}
