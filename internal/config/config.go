// Package config holds the daemon's settings: embedded defaults, overridden
// by WARREN_* environment variables, overridden by flags.
package config

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

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
	Session     session.Config
}

// Default returns the embedded defaults.
func Default() Config {
	return Config{
		Listen:        DefaultListen,
		DataDir:       DefaultDataDir,
		CgroupParent:  "warren",
		LogFormat:     "json",
		LogLevel:      "info",
		ShutdownGrace: 10 * time.Second,
		Session:       session.DefaultConfig(),
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
	if c.Session.MaxSessions < 1 {
		return fmt.Errorf("max sessions must be at least 1")
	}
	return nil
}
