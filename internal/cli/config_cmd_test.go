package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/config"
)

// runLocal runs warren with args and env, with no daemon to talk to.
func runLocal(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, &app{
		stdin:  strings.NewReader(""),
		stdout: &out,
		stderr: &errOut,
		getenv: func(k string) string { return env[k] },
		now:    func() time.Time { return now },
	})
	return out.String(), errOut.String(), code
}

// hasSetting reports whether the output of config print has the line
// "setting  # comment", however the comments are aligned.
func hasSetting(out, setting, comment string) bool {
	for l := range strings.Lines(out) {
		v, c, ok := strings.Cut(strings.TrimSpace(l), "#")
		if ok && strings.TrimSpace(v) == setting && strings.TrimSpace(c) == comment {
			return true
		}
	}
	return false
}

func writeConfig(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigPrint: file < environment < flags, each value's comment says
// where it came from, and the output reads back to the same configuration.
func TestConfigPrint(t *testing.T) {
	file := writeConfig(t, "warren.toml", `
listen = "127.0.0.1:1001"
data_dir = "/srv/file"
log_level = "debug"

[session]
idle_ttl = "45m"

[auth.jwt]
issuer = "https://issuer.example"
`)
	env := map[string]string{
		"WARREN_CONFIG":     file,
		"WARREN_DATA_DIR":   "/srv/env",
		"WARREN_LOG_LEVEL":  "warn",
		"WARREN_RATE_LIMIT": "5",
	}
	out, errOut, code := runLocal(t, env, "config", "print", "--log-level", "error", "--no-auth", "--default-cpus=2")
	if code != 0 {
		t.Fatalf("config print: exit %d, stderr %s", code, errOut)
	}
	if !strings.Contains(out, "# Config file: "+file+"\n") {
		t.Errorf("config print does not name the file:\n%s", out)
	}
	for _, want := range [][2]string{
		{`listen = "127.0.0.1:1001"`, "file"},
		{`data_dir = "/srv/env"`, "env WARREN_DATA_DIR"},
		{`log_level = "error"`, "flag --log-level"},
		{`log_format = "json"`, "default"},
		{`idle_ttl = "45m"`, "file"},
		{`cpus = 2.0`, "flag --default-cpus"},
		{`disabled = true`, "flag --no-auth"},
		{`rate_limit = 5.0`, "env WARREN_RATE_LIMIT"},
		{`issuer = "https://issuer.example"`, "file"},
	} {
		if !hasSetting(out, want[0], want[1]) {
			t.Errorf("config print lacks %s  # %s:\n%s", want[0], want[1], out)
		}
	}

	// The output is a config file that gives the same configuration.
	want, _, err := config.Load(config.LoadOptions{File: file, Getenv: func(k string) string { return env[k] },
		Flags: map[string]string{"log-level": "error", "no-auth": "true", "default-cpus": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	got, src, err := config.Load(config.LoadOptions{File: writeConfig(t, "printed.toml", out)})
	if err != nil {
		t.Fatalf("the printed config does not load: %v\n%s", err, out)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the printed config reads back differently (-want +got):\n%s", diff)
	}
	for k, s := range src {
		if s != config.FromFile {
			t.Errorf("%s is not in the printed config (source %s)", k, s)
		}
	}
}

// TestConfigFileFlag: --config wins over WARREN_CONFIG, and an empty
// --config reads no file.
func TestConfigFileFlag(t *testing.T) {
	envFile := writeConfig(t, "env.toml", "listen = \"127.0.0.1:2\"\n")
	flagFile := writeConfig(t, "flag.toml", "listen = \"127.0.0.1:3\"\n")
	env := map[string]string{"WARREN_CONFIG": envFile}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, `listen = "127.0.0.1:2"`},
		{[]string{"--config", flagFile}, `listen = "127.0.0.1:3"`},
		{[]string{"--config="}, `listen = "127.0.0.1:7433"`},
	} {
		out, errOut, code := runLocal(t, env, append([]string{"config", "print"}, tc.args...)...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("config print %v: exit %d, stderr %q, want %q in:\n%s", tc.args, code, errOut, tc.want, out)
		}
	}
}

func TestConfigPrintErrors(t *testing.T) {
	bad := writeConfig(t, "bad.toml", "listen = \"127.0.0.1:1\"\n[session]\nmax_sesions = 3\n")
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--config", bad}, "bad.toml: line 3: unknown key session.max_sesions"},
		{nil, []string{"--config", filepath.Join(t.TempDir(), "missing.toml")}, "missing.toml"},
		{map[string]string{"WARREN_MAX_SESSIONS": "many"}, nil, "WARREN_MAX_SESSIONS"},
		{nil, []string{"--idle-ttl", "soon"}, `"soon" is not a duration`},
		{nil, []string{"--log-format", "xml"}, "log format"},
		{nil, []string{"--listen", "0.0.0.0:7433", "--no-auth"}, "--insecure"},
	} {
		_, errOut, code := runLocal(t, tc.env, append([]string{"config", "print"}, tc.args...)...)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("config print %v (env %v): exit %d, stderr %q; want exit 1 and %q", tc.args, tc.env, code, errOut, tc.want)
		}
	}
}

// TestServeFlags: serve has a flag for every setting, and every flag it
// had before the config file still exists.
func TestServeFlags(t *testing.T) {
	f := serveCmd().Flags()
	for _, s := range config.Settings() {
		fl := f.Lookup(s.Flag)
		if fl == nil {
			t.Errorf("serve has no --%s for %s", s.Flag, s.Key)
			continue
		}
		if !strings.Contains(fl.Usage, s.Env) {
			t.Errorf("--%s does not name %s in its help", s.Flag, s.Env)
		}
	}
	for _, name := range []string{
		"config", "listen", "data-dir", "cgroup-parent", "log-format", "log-level", "max-sessions",
		"default-memory-mb", "default-cpus", "default-pids", "default-disk-mb", "idle-ttl", "exec-timeout",
		"max-file-bytes", "allow-no-userns", "no-disk-quota", "shutdown", "no-auth", "insecure",
		"jwt-secret-file", "jwks-url", "jwks-file", "jwt-tenant-claim", "jwt-admin-claim", "jwt-audience", "jwt-issuer",
		"rate-limit", "rate-burst", "tenant-max-sessions", "tenant-max-memory-mb", "tenant-max-cpus",
		"tenant-max-lifetime", "tenant-max-exec-timeout",
	} {
		if f.Lookup(name) == nil {
			t.Errorf("serve lost --%s", name)
		}
	}
	// A bool flag needs no value.
	if err := f.Parse([]string{"--no-auth", "--insecure"}); err != nil {
		t.Errorf("serve --no-auth --insecure: %v", err)
	}
}

func TestDoctorFlags(t *testing.T) {
	f := doctorCmd().Flags()
	for _, name := range []string{"config", "data-dir", "cgroup-parent"} {
		if f.Lookup(name) == nil {
			t.Errorf("doctor has no --%s", name)
		}
	}
	if f.Lookup("listen") != nil {
		t.Error("doctor has --listen, which it does not use")
	}
}

func TestVersion(t *testing.T) {
	out, errOut, code := runLocal(t, nil, "version")
	if code != 0 {
		t.Fatalf("version: exit %d, %s", code, errOut)
	}
	for _, want := range []string{"warren ", "\ncommit:", "\ngo:          go1.", "\nplatform:    "} {
		if !strings.Contains(out, want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
}
