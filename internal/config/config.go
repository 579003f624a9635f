// Package config holds the daemon's settings: embedded defaults, overridden
// by WARREN_* environment variables, overridden by flags.
package config

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/auth"
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
	// AllowNoUserNS lets the daemon run where user namespaces are not
	// available; sandboxed code then runs as an unprivileged host user.
	AllowNoUserNS bool
	// NoDiskQuota runs without a layer store: writable layers are then
	// unlimited and sessions may not ask for limits.disk_mb.
	NoDiskQuota bool
	// Shutdown is what a stop does to running sessions: ShutdownKeep
	// leaves them running for the next daemon to adopt, ShutdownDestroy
	// deletes them.
	Shutdown string
	Session  session.Config
	Auth     Auth
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
		Listen:        DefaultListen,
		DataDir:       DefaultDataDir,
		CgroupParent:  "warren",
		LogFormat:     "json",
		LogLevel:      "info",
		ShutdownGrace: 10 * time.Second,
		Shutdown:      ShutdownKeep,
		Session:       session.DefaultConfig(),
		Auth:          Auth{RateLimit: 200, RateBurst: 400},
	}
}

// Setting is one environment-settable field.
type Setting struct {
	Env  string
	Help string
	set  func(c *Config, v string) error
}

// Settings lists the settings that environment variables can change.
func Settings() []Setting {
	return []Setting{
		{"WARREN_LISTEN", "address to serve the API on (host:port)", func(c *Config, v string) error { c.Listen = v; return nil }},
		{"WARREN_DATA_DIR", "directory for the database, images and sandboxes", func(c *Config, v string) error { c.DataDir = v; return nil }},
		{"WARREN_CGROUP_PARENT", "cgroup under which sessions are placed", func(c *Config, v string) error { c.CgroupParent = v; return nil }},
		{"WARREN_LOG_FORMAT", "json or text", func(c *Config, v string) error { c.LogFormat = v; return nil }},
		{"WARREN_LOG_LEVEL", "debug, info, warn or error", func(c *Config, v string) error { c.LogLevel = v; return nil }},
		{"WARREN_MAX_SESSIONS", "most sessions at once", func(c *Config, v string) error { return setInt(&c.Session.MaxSessions, v) }},
		{"WARREN_JWT_SECRET_FILE", "file holding the HS256 secret of accepted JWTs", func(c *Config, v string) error { c.Auth.JWTSecretFile = v; return nil }},
		{"WARREN_JWKS_URL", "URL of the JWKS of accepted RS256/ES256 JWTs", func(c *Config, v string) error { c.Auth.JWKSURL = v; return nil }},
	}
}

func setInt(p *int, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", v)
	}
	*p = n
	return nil
}

// ApplyEnv overrides c with the environment (getenv is os.Getenv in the
// daemon).
func (c *Config) ApplyEnv(getenv func(string) string) error {
	for _, s := range Settings() {
		if v := getenv(s.Env); v != "" {
			if err := s.set(c, v); err != nil {
				return fmt.Errorf("%s: %w", s.Env, err)
			}
		}
	}
	return nil
}

// Validate checks the configuration.
func (c *Config) Validate() error {
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
	if err := c.checkExposure(); err != nil {
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
