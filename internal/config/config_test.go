package config

import (
	"strings"
	"testing"
	"time"
)

func TestApplyEnv(t *testing.T) {
	env := map[string]string{
		"WARREN_LISTEN":       "127.0.0.1:9999",
		"WARREN_DATA_DIR":     "/srv/warren",
		"WARREN_MAX_SESSIONS": "7",
		"WARREN_LOG_FORMAT":   "text",
	}
	c := Default()
	if err := c.ApplyEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:9999" || c.DataDir != "/srv/warren" || c.Session.MaxSessions != 7 || c.LogFormat != "text" {
		t.Errorf("ApplyEnv gave %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
	bad := Default()
	if err := bad.ApplyEnv(func(k string) string {
		if k == "WARREN_MAX_SESSIONS" {
			return "many"
		}
		return ""
	}); err == nil || !strings.Contains(err.Error(), "WARREN_MAX_SESSIONS") {
		t.Errorf("ApplyEnv(WARREN_MAX_SESSIONS=many) = %v, want an error naming the variable", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"defaults", func(*Config) {}, ""},
		{"listen without port", func(c *Config) { c.Listen = "localhost" }, "listen address"},
		{"relative data dir", func(c *Config) { c.DataDir = "data" }, "absolute"},
		{"comma in data dir", func(c *Config) { c.DataDir = "/srv/a,b" }, "comma"},
		{"colon in data dir", func(c *Config) { c.DataDir = "/srv/a:b" }, "comma"},
		{"log format", func(c *Config) { c.LogFormat = "xml" }, "log format"},
		{"log level", func(c *Config) { c.LogLevel = "loud" }, "log level"},
		{"max sessions", func(c *Config) { c.Session.MaxSessions = 0 }, "max sessions"},
		{"shutdown mode", func(c *Config) { c.Shutdown = "later" }, "shutdown"},
		{"negative grace", func(c *Config) { c.ShutdownGrace = -time.Second }, "shutdown_grace (--shutdown-grace) must not be negative"},
		{"negative tenant cap", func(c *Config) { c.Auth.TenantDefaults.MaxCPUs = -1 }, "tenant_defaults.max_cpus"},
		{"negative min free disk turns the check off", func(c *Config) { c.Session.MinFreeDiskMB = -1 }, ""},
		{"default memory above max", func(c *Config) { c.Session.DefaultLimits.MemoryMB = 32768 }, "session.default_limits.memory_mb must not be above session.max_limits.memory_mb"},
		{"default idle ttl above built-in max", func(c *Config) { c.Session.DefaultIdleTTL = 8 * 24 * time.Hour; c.Session.MaxIdleTTL = 0 }, "session.idle_ttl"},
		{"zero default under lowered max", func(c *Config) { c.Session.DefaultLimits.CPUs = 0; c.Session.MaxLimits.CPUs = 0.5 }, "session.default_limits.cpus"},
		{"default equal to max", func(c *Config) { c.Session.DefaultTimeout = c.Session.MaxTimeout }, ""},
		{"cors origins", func(c *Config) {
			c.CORSOrigins = []string{"https://console.example.com", "http://localhost:5173", "https://*.example.com", "*"}
		}, ""},
		{"cors origin without scheme", func(c *Config) { c.CORSOrigins = []string{"console.example.com"} }, "cors_origins"},
		{"cors origin with a path", func(c *Config) { c.CORSOrigins = []string{"https://example.com/app"} }, "cors_origins"},
		{"cors origin with a wildcard inside", func(c *Config) { c.CORSOrigins = []string{"https://a.*.example.com"} }, "cors_origins"},
		{"mcp allowed hosts", func(c *Config) { c.MCPAllowedHosts = "warren.example.com, proxy.internal,*" }, ""},
		{"mcp allowed host with a port", func(c *Config) { c.MCPAllowedHosts = "warren.example.com:443" }, "mcp_allowed_hosts"},
		{"mcp allowed host as a URL", func(c *Config) { c.MCPAllowedHosts = "https://warren.example.com" }, "mcp_allowed_hosts"},
	}
	for _, tc := range tests {
		c := Default()
		tc.mutate(&c)
		err := c.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestExposure: without authentication the daemon serves loopback only,
// unless told otherwise.
func TestExposure(t *testing.T) {
	for _, tc := range []struct {
		listen             string
		disabled, insecure bool
		ok                 bool
	}{
		{"0.0.0.0:7433", false, false, true},
		{"127.0.0.1:7433", true, false, true},
		{"[::1]:7433", true, false, true},
		{"localhost:7433", true, false, true},
		{"0.0.0.0:7433", true, false, false},
		{":7433", true, false, false},
		{"[::]:7433", true, false, false},
		{"10.1.2.3:7433", true, false, false},
		{"0.0.0.0:7433", true, true, true},
	} {
		c := Default()
		c.Listen, c.Auth.Disabled, c.Auth.Insecure = tc.listen, tc.disabled, tc.insecure
		err := c.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("listen %s, auth off %v, insecure %v: Validate() = %v, want ok %v", tc.listen, tc.disabled, tc.insecure, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--insecure") {
			t.Errorf("the refusal does not say how to override: %v", err)
		}
	}
}
