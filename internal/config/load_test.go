package config

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSettingsCoverConfig: every field of Config is exactly one setting,
// so none is missing from the file, the flags, the environment, warren
// config print or docs/CONFIG.md; and keys, flags and variables are unique.
func TestSettingsCoverConfig(t *testing.T) {
	var c Config
	fields := map[uintptr]string{} // address → Go path
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		if v.Kind() == reflect.Struct && v.Type() != reflect.TypeFor[time.Duration]() {
			for i := range v.NumField() {
				walk(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
			return
		}
		fields[v.Addr().Pointer()] = path
	}
	walk(reflect.ValueOf(&c).Elem(), "Config")
	seen := map[string]bool{}
	for _, s := range Settings() {
		addr := reflect.ValueOf(s.field(&c)).Pointer()
		path, ok := fields[addr]
		if !ok {
			t.Errorf("setting %s is no leaf field of Config, or shares one with another setting", s.Key)
			continue
		}
		delete(fields, addr)
		for _, name := range []string{"key " + s.Key, "flag " + s.Flag, "env " + s.Env} {
			if seen[name] {
				t.Errorf("%s is used twice", name)
			}
			seen[name] = true
		}
		if s.Help == "" {
			t.Errorf("setting %s (%s) has no help", s.Key, path)
		}
		if !strings.HasPrefix(s.Env, "WARREN_") || s.Env != strings.ToUpper(s.Env) {
			t.Errorf("setting %s: environment variable %q", s.Key, s.Env)
		}
	}
	for _, path := range fields {
		t.Errorf("%s has no setting: add it to settings (settings.go)", path)
	}
}

// TestSettingsGroupedByTable: a TOML table cannot be reopened, so each
// table's settings must be together, and the top level first.
func TestSettingsGroupedByTable(t *testing.T) {
	done := map[string]bool{}
	cur := ""
	for _, s := range Settings() {
		table, _ := s.Table()
		if table == cur {
			continue
		}
		if done[table] || table == "" {
			t.Errorf("setting %s: table [%s] was already closed", s.Key, table)
		}
		done[cur] = true
		cur = table
	}
}

// writeFile writes a config file for a test and returns its path.
func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "warren.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadPrecedence: defaults < file < environment < flags, and each
// value says where it came from.
func TestLoadPrecedence(t *testing.T) {
	file := writeFile(t, `
listen = "127.0.0.1:1001"   # file only
data_dir = "/srv/file"      # file, then env
log_level = "debug"         # file, env and flag

[session]
idle_ttl = "45m"

[session.default_limits]
cpus = 2

[auth.jwt]
issuer = "https://issuer.example"

[tenant_defaults]
max_lifetime = "6h"
`)
	env := map[string]string{
		"WARREN_DATA_DIR":    "/srv/env",
		"WARREN_LOG_LEVEL":   "warn",
		"WARREN_RATE_BURST":  "7",
		"WARREN_SHUTDOWN":    "destroy",
		"WARREN_UNKNOWN_VAR": "ignored",
	}
	flags := map[string]string{"log-level": "error", "no-auth": "true", "default-pids": "99", "shutdown": "keep"}
	c, src, err := Load(LoadOptions{File: file, Getenv: func(k string) string { return env[k] }, Flags: flags})
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Listen = "127.0.0.1:1001"
	want.DataDir = "/srv/env"
	want.LogLevel = "error"
	want.Session.DefaultIdleTTL = 45 * time.Minute
	want.Session.DefaultLimits.CPUs = 2
	want.Session.DefaultLimits.Pids = 99
	want.Auth.JWTIssuer = "https://issuer.example"
	want.Auth.TenantDefaults.MaxLifetime = 6 * time.Hour
	want.Auth.RateBurst = 7
	want.Auth.Disabled = true
	want.Shutdown = ShutdownKeep
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("Load() config differs (-want +got):\n%s", diff)
	}
	wantSrc := map[string]Source{
		"listen":                           FromFile,
		"data_dir":                         FromEnv,
		"log_level":                        FromFlag,
		"log_format":                       FromDefault,
		"session.idle_ttl":                 FromFile,
		"session.default_limits.cpus":      FromFile,
		"session.default_limits.pids":      FromFlag,
		"auth.jwt.issuer":                  FromFile,
		"tenant_defaults.max_lifetime":     FromFile,
		"auth.rate_burst":                  FromEnv,
		"auth.disabled":                    FromFlag,
		"shutdown":                         FromFlag,
		"session.max_sessions":             FromDefault,
		"tenant_defaults.max_exec_timeout": FromDefault,
	}
	for k, w := range wantSrc {
		if src[k] != w {
			t.Errorf("source of %s = %q, want %q", k, src[k], w)
		}
	}
	if len(src) != len(Settings()) {
		t.Errorf("Load() gave sources of %d settings, want all %d", len(src), len(Settings()))
	}
}

func TestLoadErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.toml")
	for _, tc := range []struct {
		name string
		opts LoadOptions
		want string
	}{
		{"missing file", LoadOptions{File: missing}, "nope.toml"},
		{"unknown key names file and line", LoadOptions{File: writeFile(t, "listen = \"127.0.0.1:1\"\n\n[session]\nmax_sesions = 3\n")}, "warren.toml: line 4: unknown key session.max_sesions"},
		{"bad env", LoadOptions{Getenv: func(k string) string {
			if k == "WARREN_IDLE_TTL" {
				return "soon"
			}
			return ""
		}}, `WARREN_IDLE_TTL: "soon" is not a duration`},
		{"bad flag", LoadOptions{Flags: map[string]string{"max-sessions": "many"}}, `--max-sessions: "many" is not a whole number`},
		{"not a setting", LoadOptions{Flags: map[string]string{"addr": "x"}}, "--addr is not a setting"},
	} {
		_, _, err := Load(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Load() = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestApplyTOMLStrict: whatever is not a setting, or not of its kind, is
// an error naming the key and its line; nothing of a bad file is applied.
func TestApplyTOMLStrict(t *testing.T) {
	for _, tc := range []struct {
		doc, want string
	}{
		{"listen = \"a:1\"\nlisen = \"b:2\"\n", "line 2: unknown key lisen"},
		{"[session]\nmax_sesions = 3\n", "line 2: unknown key session.max_sesions"},
		{"\n\n[sesion]\nmax_sessions = 3\n", "line 3: unknown table sesion"},
		{"[auth.jwt]\nsecret = \"x\"\n", "line 2: unknown key auth.jwt.secret"},
		{"Listen = \"a:1\"\n", "line 1: unknown key Listen (did you mean listen?)"},
		{"[Session]\n", "line 1: unknown table Session (did you mean session?)"},
		{"[session]\ndefault_limits = { cpus = 2, gpus = 1 }\n", "line 2: unknown key session.default_limits.gpus"},
		{"[listen]\n", "line 1: [listen]: listen is a setting, not a table"},
		{"[[session]]\n", "line 1: [[session]]: session is a table, not an array of tables"},
		{"session = 3\n", "line 1: session: is a TOML integer, want a table"},
		{"listen = 7433\n", "line 1: listen: is a TOML integer, want a string"},
		{"[session]\nidle_ttl = 30\n", `line 2: session.idle_ttl: is a TOML integer, want a duration string such as "90s"`},
		{"[session]\nidle_ttl = \"30 minutes\"\n", `line 2: session.idle_ttl: "30 minutes" is not a duration`},
		{"[session]\nmax_sessions = 1.5\n", "line 2: session.max_sessions: is a TOML float, want a whole number"},
		{"[auth]\ndisabled = \"yes\"\n", "line 2: auth.disabled: is a TOML string, want true or false"},
		{"listen = \"a\"\nlisten = \"b\"\n", "line 2"},
		{"listen = \n", "line 1"},
	} {
		c := Default()
		keys, err := c.ApplyTOML([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ApplyTOML(%q) = %v, want an error containing %q", tc.doc, err, tc.want)
		}
		if keys != nil || !reflect.DeepEqual(c, Default()) {
			t.Errorf("ApplyTOML(%q) failed but applied %v", tc.doc, keys)
		}
	}
	// Every problem is reported, not only the first.
	c := Default()
	_, err := c.ApplyTOML([]byte("lisen = \"a\"\n[session]\nmax_sesions = 3\n"))
	if err == nil || !strings.Contains(err.Error(), "line 1: unknown key lisen") || !strings.Contains(err.Error(), "line 3: unknown key session.max_sesions") {
		t.Errorf("ApplyTOML with two unknown keys = %v, want both", err)
	}
}

// TestApplyTOMLForms: dotted keys and inline tables are TOML too, and
// integers are numbers.
func TestApplyTOMLForms(t *testing.T) {
	c := Default()
	keys, err := c.ApplyTOML([]byte(`
session.max_sessions = 5
auth = { rate_limit = 3, jwt = { issuer = "i" } }
[session.max_limits]
cpus = 4
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Session.MaxSessions != 5 || c.Auth.RateLimit != 3 || c.Auth.JWTIssuer != "i" || c.Session.MaxLimits.CPUs != 4 {
		t.Errorf("ApplyTOML gave %+v", c)
	}
	if len(keys) != 4 {
		t.Errorf("ApplyTOML set %v, want 4 keys", keys)
	}
}

// otherValues returns a config in which every setting differs from its
// default, with strings that need quoting and durations of several units.
func otherValues(t *testing.T) Config {
	t.Helper()
	c, def := Default(), Default()
	for i, s := range Settings() {
		var v string
		switch s.Type() {
		case "string":
			v = "v" + s.Key + " \"quoted\" \\ tab\t é"
		case "int":
			v = s.Value(&def) + "1"
		case "float":
			v = "0.25"
			if s.Value(&def) == "0.25" {
				v = "0.5"
			}
		case "bool":
			v = "true"
			if s.Value(&def) == "true" {
				v = "false"
			}
		case "duration":
			v = []string{"1h", "90m", "1h0m30s", "250ms", "36h"}[i%5]
			if v == s.Value(&def) {
				v = "2h"
			}
		case "list":
			v = "https://console.example.com, https://*.preview.example.com"
		}
		if err := s.Set(&c, v); err != nil {
			t.Fatalf("%s.Set(%q): %v", s.Key, v, err)
		}
		if s.Value(&c) == s.Value(&def) {
			t.Fatalf("setting %s: %q is its default", s.Key, v)
		}
	}
	return c
}

// TestWriteTOMLRoundTrip: what WriteTOML writes reads back to the same
// config, every setting of it from the file.
func TestWriteTOMLRoundTrip(t *testing.T) {
	for name, c := range map[string]Config{"defaults": Default(), "other values": otherValues(t)} {
		src := Sources{}
		for _, s := range Settings() {
			src[s.Key] = FromEnv
		}
		var buf bytes.Buffer
		if err := WriteTOML(&buf, &c, src); err != nil {
			t.Fatal(err)
		}
		got := Default()
		keys, err := got.ApplyTOML(buf.Bytes())
		if err != nil {
			t.Fatalf("%s: ApplyTOML(WriteTOML()) = %v; the document:\n%s", name, err, buf.String())
		}
		if diff := cmp.Diff(c, got); diff != "" {
			t.Errorf("%s: round trip differs (-want +got):\n%s", name, diff)
		}
		if len(keys) != len(Settings()) {
			t.Errorf("%s: the document holds %d settings, want all %d", name, len(keys), len(Settings()))
		}
		if !strings.Contains(buf.String(), "# env WARREN_LISTEN\n") {
			t.Errorf("%s: no source comment on listen:\n%s", name, buf.String())
		}
	}
}

func TestSetValue(t *testing.T) {
	c := otherValues(t)
	for _, s := range Settings() {
		d := Default()
		if err := s.Set(&d, s.Value(&c)); err != nil || s.Value(&d) != s.Value(&c) {
			t.Errorf("%s: Set(Value() = %q) = %v, gave %q", s.Key, s.Value(&c), err, s.Value(&d))
		}
	}
	for _, tc := range []struct{ d, want string }{
		{"30m", "30m"}, {"168h", "168h"}, {"1h30m", "1h30m"}, {"0s", "0s"}, {"1m0.5s", "1m0.5s"}, {"-2h", "-2h"},
	} {
		d, _ := time.ParseDuration(tc.d)
		if got := formatDuration(d); got != tc.want {
			t.Errorf("formatDuration(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
	for _, bad := range []string{"NaN", "Inf", "-Inf", "x"} {
		d := Default()
		s, _ := lookupFlag("default-cpus")
		if err := s.Set(&d, bad); err == nil {
			t.Errorf("default-cpus accepted %q", bad)
		}
	}
}
