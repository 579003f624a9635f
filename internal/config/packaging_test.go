package config

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unitDirectives returns the directives of a systemd unit, comments left
// out, as "Section.Key" → values.
func unitDirectives(t *testing.T, text string) map[string][]string {
	t.Helper()
	d := map[string][]string{}
	section := ""
	for l := range strings.Lines(text) {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "["):
			section = strings.Trim(l, "[]")
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				t.Errorf("unit line %q is not key=value", l)
				continue
			}
			d[section+"."+k] = append(d[section+"."+k], v)
		}
	}
	return d
}

// TestSystemdUnit: packaging/warren.service starts the daemon on the
// installed config, keeps sessions across stop and restart, delegates its
// cgroup, and sets nothing that would hide the sandboxes' mounts.
func TestSystemdUnit(t *testing.T) {
	p := repoFile("packaging/warren.service")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	d := unitDirectives(t, string(b))
	for k, want := range map[string]string{
		"Service.Type":        "exec",
		"Service.ExecStart":   "/usr/local/bin/warren serve --config /etc/warren/warren.toml",
		"Service.Delegate":    "yes",
		"Service.KillMode":    "process",
		"Service.Restart":     "on-failure",
		"Install.WantedBy":    "multi-user.target",
		"Service.TasksMax":    "infinity",
		"Service.LimitNOFILE": "1024:524288",
	} {
		if got := d[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s: %s = %q, want %q", p, k, got, want)
		}
	}
	// Each of these runs the daemon in a private mount namespace, or puts
	// a seccomp filter on every sandbox.
	for _, k := range []string{"ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "PrivateMounts",
		"ProtectKernelModules", "ProtectKernelTunables", "ProtectControlGroups", "ProtectProc", "ReadOnlyPaths",
		"InaccessiblePaths", "TemporaryFileSystem", "MountFlags", "SystemCallFilter", "RestrictNamespaces",
		"ProtectHostname", "NoNewPrivileges", "CapabilityBoundingSet", "UMask"} {
		if _, ok := d["Service."+k]; ok {
			t.Errorf("%s sets %s, which breaks sandboxes (see the comment in the unit)", p, k)
		}
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze here")
	}
	// verify wants ExecStart's binary to exist: point it at this test's.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "warren.service")
	text := strings.ReplaceAll(string(b), "/usr/local/bin/warren", self)
	if err := os.WriteFile(unit, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// It exits 0 on unknown keys and bad values, but says so.
	out, err := exec.Command(analyze, "verify", "--man=no", unit).CombinedOutput()
	if err != nil || strings.Contains(string(out), "warren.service") {
		t.Errorf("systemd-analyze verify %s: %v\n%s", p, err, out)
	}
}
