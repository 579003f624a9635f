// The recipes in this directory are not run by CI (it has no Kubernetes or
// Nomad cluster); these tests keep them from rotting silently: they must
// parse, keep the privileges docs/FLEET.md explains, and name only
// settings the daemon has, with values it accepts.
package packaging_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/warrenhq/warren/internal/config"
)

// checkSettings fails on a WARREN_ variable that is no setting, or whose
// literal value the setting refuses (values made at deploy time, such as
// $(NODE_IP) or ${NOMAD_IP_api}, are not checked).
func checkSettings(t *testing.T, file string, env map[string]string) {
	t.Helper()
	byEnv := map[string]config.Setting{}
	for _, s := range config.Settings() {
		byEnv[s.Env] = s
	}
	for name, v := range env {
		if !strings.HasPrefix(name, "WARREN_") {
			continue
		}
		s, ok := byEnv[name]
		if !ok {
			t.Errorf("%s: %s is not a setting of warren serve (docs/CONFIG.md)", file, name)
			continue
		}
		if strings.Contains(v, "$(") || strings.Contains(v, "${") || strings.HasPrefix(v, "var.") {
			continue
		}
		c := config.Default()
		if err := s.Set(&c, v); err != nil {
			t.Errorf("%s: %s=%q: %v", file, name, v, err)
		}
	}
}

func TestKubernetesDaemonSet(t *testing.T) {
	const file = "kubernetes/warren-daemonset.yaml"
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	type container struct {
		Name            string
		Command         []string
		SecurityContext struct{ Privileged bool } `yaml:"securityContext"`
		Env             []struct {
			Name, Value string
		}
		VolumeMounts []struct {
			Name      string
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
		Resources struct {
			Limits map[string]string
		}
	}
	type object struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string
		Metadata   struct{ Name, Namespace string }
		Data       map[string]string
		Spec       struct {
			Template struct {
				Spec struct {
					HostNetwork bool `yaml:"hostNetwork"`
					HostPID     bool `yaml:"hostPID"`
					Containers  []container
					Volumes     []struct {
						Name     string
						HostPath *struct{ Path, Type string } `yaml:"hostPath"`
					}
				}
			}
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(false)
	kinds := map[string]object{}
	for {
		var o object
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
			t.Fatalf("%s: a document without apiVersion, kind or name: %+v", file, o)
		}
		kinds[o.Kind] = o
	}
	ds, ok := kinds["DaemonSet"]
	if !ok || kinds["ConfigMap"].Data == nil {
		t.Fatalf("%s: want a DaemonSet and a ConfigMap, have %v", file, kinds)
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork || spec.HostPID || len(spec.Containers) != 1 {
		t.Fatalf("%s: hostNetwork %v, hostPID %v, %d containers; want host network, own PIDs, one container", file, spec.HostNetwork, spec.HostPID, len(spec.Containers))
	}
	c := spec.Containers[0]
	if !c.SecurityContext.Privileged || len(c.Resources.Limits) > 0 || strings.Join(c.Command, " ") != "/usr/local/bin/warren serve" {
		t.Fatalf("%s: privileged %v, limits %v, command %v", file, c.SecurityContext.Privileged, c.Resources.Limits, c.Command)
	}
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	mounted := map[string]bool{}
	for _, m := range c.VolumeMounts {
		if hostPaths[m.Name] != "" && hostPaths[m.Name] != m.MountPath {
			t.Errorf("%s: host path %s mounted at %s", file, hostPaths[m.Name], m.MountPath)
		}
		mounted[m.MountPath] = true
	}
	for _, p := range []string{"/var/lib/warren", "/run/warren"} {
		if !mounted[p] {
			t.Errorf("%s: %s is not mounted from the host", file, p)
		}
	}
	env := map[string]string{}
	for k, v := range kinds["ConfigMap"].Data {
		env[k] = v
	}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for _, need := range []string{"WARREN_FLEET_ETCD", "WARREN_FLEET_NODE", "WARREN_FLEET_ADVERTISE", "WARREN_LISTEN", "WARREN_SHUTDOWN"} {
		if env[need] == "" {
			t.Errorf("%s: %s is not set", file, need)
		}
	}
	checkSettings(t, file, env)
}

// TestNomadJob checks the job's HCL is well formed (balanced blocks,
// closed strings; go.mod has no HCL parser and this is not worth one) and
// that it keeps the privileges and settings the docs describe.
func TestNomadJob(t *testing.T) {
	const file = "nomad/warren.nomad.hcl"
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	if err := balanced(src); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, want := range []string{`type        = "system"`, `driver = "docker"`, `privileged   = true`, `network_mode = "host"`,
		`"/var/lib/warren:/var/lib/warren"`, `"/run/warren:/run/warren"`} {
		if !strings.Contains(src, want) {
			t.Errorf("%s: no %s", file, want)
		}
	}
	if strings.Contains(src, `pid_mode`) && !strings.Contains(src, "pid_mode stays") {
		t.Errorf("%s: sets pid_mode; the sandboxes live in the task's own PID namespace", file)
	}
	env := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*(WARREN_[A-Z0-9_]+)\s*=\s*(?:"([^"]*)"|(var\.\w+))`).FindAllStringSubmatch(src, -1) {
		env[m[1]] = m[2] + m[3]
	}
	for _, need := range []string{"WARREN_FLEET_ETCD", "WARREN_FLEET_NODE", "WARREN_FLEET_ADVERTISE", "WARREN_LISTEN", "WARREN_SHUTDOWN"} {
		if env[need] == "" {
			t.Errorf("%s: %s is not set", file, need)
		}
	}
	checkSettings(t, file, env)
}

// balanced checks HCL's brackets pair up outside strings and comments, and
// every string ends on its line.
func balanced(src string) error {
	var stack []byte
	pairs := map[byte]byte{'}': '{', ']': '[', ')': '('}
	line := 1
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '\n':
			line++
		case '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			line++
		case '"':
			depth := 0 // ${ ... } inside the string
			for i++; ; i++ {
				if i >= len(src) || src[i] == '\n' {
					return errors.New("a string is not closed on line " + strconv.Itoa(line))
				}
				if src[i] == '\\' {
					i++
				} else if src[i] == '$' && i+1 < len(src) && src[i+1] == '{' {
					depth++
					i++
				} else if src[i] == '}' && depth > 0 {
					depth--
				} else if src[i] == '"' && depth == 0 {
					break
				}
			}
		case '{', '[', '(':
			stack = append(stack, c)
		case '}', ']', ')':
			if len(stack) == 0 || stack[len(stack)-1] != pairs[c] {
				return errors.New("an unmatched " + string(c) + " on line " + strconv.Itoa(line))
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		return errors.New("a " + string(stack[len(stack)-1]) + " is never closed")
	}
	return nil
}
