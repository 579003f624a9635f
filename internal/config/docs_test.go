package config

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the settings table of docs/CONFIG.md and packaging/warren.toml from Settings")

// tableHelp introduces each TOML table in docs/CONFIG.md and the example
// config.
var tableHelp = map[string]string{
	"":                       "The daemon itself.",
	"session":                "Sessions: how many, and the defaults and maxima of what one may ask for. A zero duration or size stands for the built-in value.",
	"session.default_limits": "Resource limits of a session that asks for none. Zero stands for the built-in value.",
	"session.max_limits":     "The largest limits a session may ask for. Zero stands for the built-in value.",
	"auth":                   "Who may call the daemon, and how often.",
	"auth.jwt":               "JWTs accepted besides the daemon's own API keys; none unless secret_file, jwks_url or jwks_file is set.",
	"tenant_defaults":        "Quotas of every tenant whose own settings leave them zero. Zero means no cap.",
}

// tables returns the settings grouped by table, in file order.
func tables() (names []string, by map[string][]Setting) {
	by = map[string][]Setting{}
	for _, s := range Settings() {
		t, _ := s.Table()
		if _, ok := by[t]; !ok {
			names = append(names, t)
		}
		by[t] = append(by[t], s)
	}
	return names, by
}

// settingsMarkdown is the generated part of docs/CONFIG.md.
func settingsMarkdown() string {
	def := Default()
	var b strings.Builder
	names, by := tables()
	for i, t := range names {
		if i > 0 {
			b.WriteString("\n")
		}
		if t == "" {
			b.WriteString("### Top level\n\n")
		} else {
			fmt.Fprintf(&b, "### `[%s]`\n\n", t)
		}
		fmt.Fprintf(&b, "%s\n\n", tableHelp[t])
		b.WriteString("| key | flag | environment | default | meaning |\n| --- | --- | --- | --- | --- |\n")
		for _, s := range by[t] {
			_, name := s.Table()
			d := "`" + s.Value(&def) + "`"
			if (s.Type() == "string" || s.Type() == "list") && s.Value(&def) == "" {
				d = "none"
			}
			fmt.Fprintf(&b, "| `%s` | `--%s` | `%s` | %s | %s |\n", name, s.Flag, s.Env, d, markdownCell.Replace(s.Help))
		}
	}
	return b.String()
}

// markdownCell escapes what a table cell of help text would take for
// Markdown: the column separator, and the asterisks of origin wildcards.
var markdownCell = strings.NewReplacer("|", `\|`, "*", `\*`)

// exampleTOML is packaging/warren.toml: every setting, commented out at its
// default, with its meaning.
func exampleTOML() string {
	def := Default()
	var b strings.Builder
	b.WriteString(`# /etc/warren/warren.toml: the configuration of warren serve.
#
# Every setting is here, commented out at its default value: uncomment a line
# to change it. Unknown keys are errors. WARREN_* environment variables and
# warren serve's flags override this file; "warren config print --config
# /etc/warren/warren.toml" shows the result and where each value came from.
# docs/CONFIG.md describes every setting.
#
# Durations are strings such as "90s", "30m" or "24h".
`)
	names, by := tables()
	for _, t := range names {
		b.WriteString("\n")
		for _, l := range wrap(tableHelp[t], 76) {
			fmt.Fprintf(&b, "# %s\n", l)
		}
		if t != "" {
			fmt.Fprintf(&b, "[%s]\n", t)
		}
		for _, s := range by[t] {
			_, name := s.Table()
			b.WriteString("\n")
			for _, l := range wrap(capitalize(s.Help)+". Flag --"+s.Flag+", env "+s.Env+".", 76) {
				fmt.Fprintf(&b, "# %s\n", l)
			}
			fmt.Fprintf(&b, "#%s = %s\n", name, s.TOML(&def))
		}
	}
	return b.String()
}

func capitalize(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// wrap breaks s into lines of at most width bytes, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

const (
	beginSettings = "<!-- BEGIN SETTINGS: generated from internal/config/settings.go by go test ./internal/config -update; do not edit -->\n"
	endSettings   = "<!-- END SETTINGS -->\n"
)

func repoFile(name string) string { return filepath.Join("..", "..", name) }

// TestConfigDoc: docs/CONFIG.md lists every setting, as Settings says.
func TestConfigDoc(t *testing.T) {
	p := repoFile("docs/CONFIG.md")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	head, rest, ok1 := strings.Cut(doc, beginSettings)
	_, tail, ok2 := strings.Cut(rest, endSettings)
	if !ok1 || !ok2 {
		t.Fatalf("%s lacks the markers %q and %q", p, beginSettings, endSettings)
	}
	want := head + beginSettings + settingsMarkdown() + endSettings + tail
	if *update {
		if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want, doc); diff != "" {
		t.Errorf("%s is out of date; run go test ./internal/config -update (-want +got):\n%s", p, diff)
	}
	// Belt and braces: the table names each setting's key, flag and
	// variable.
	for _, s := range Settings() {
		_, name := s.Table()
		for _, w := range []string{"`" + name + "`", "`--" + s.Flag + "`", "`" + s.Env + "`"} {
			if !strings.Contains(doc, w) {
				t.Errorf("%s does not mention %s (setting %s)", p, w, s.Key)
			}
		}
	}
}

// TestExampleConfig: packaging/warren.toml lists every setting, and as
// shipped (all commented out) gives the defaults; uncommented, the
// defaults too.
func TestExampleConfig(t *testing.T) {
	p := repoFile("packaging/warren.toml")
	want := exampleTOML()
	if *update {
		if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("%s is out of date; run go test ./internal/config -update (-want +got):\n%s", p, diff)
	}
	c := Default()
	if keys, err := c.ApplyTOML(b); err != nil || len(keys) != 0 || !reflect.DeepEqual(c, Default()) {
		t.Errorf("%s as shipped: ApplyTOML set %v, %v; want nothing", p, keys, err)
	}
	var uncommented bytes.Buffer
	for l := range strings.Lines(string(b)) {
		if strings.HasPrefix(l, "#") && strings.Contains(l, " = ") && !strings.HasPrefix(l, "# ") {
			l = l[1:]
		}
		uncommented.WriteString(l)
	}
	c = Default()
	keys, err := c.ApplyTOML(uncommented.Bytes())
	if err != nil || len(keys) != len(Settings()) || !reflect.DeepEqual(c, Default()) {
		t.Errorf("%s uncommented: ApplyTOML set %d of %d settings, %v; want all, at their defaults", p, len(keys), len(Settings()), err)
	}
}
