package agent

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseExports(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want []string
	}{
		// bash 5.2: `declare -x`, double quotes for printable values.
		{"bash plain", `declare -x A="plain"` + "\n", []string{"A=plain"}},
		{"bash escapes in double quotes", `declare -x Q="a\"b\$c\` + "`" + `d\\e"` + "\n", []string{"Q=a\"b$c`d\\e"}},
		{"bash single quote in double quotes", `declare -x S="it's"` + "\n", []string{"S=it's"}},
		{"bash other backslashes stay", `declare -x P="a\b\n"` + "\n", []string{`P=a\b\n`}},
		{"bash empty", `declare -x EMPTY=""` + "\n", []string{"EMPTY="}},
		{"bash spaces and equals", `declare -x SP="  a = b  "` + "\n", []string{"SP=  a = b  "}},
		{"bash UTF-8", `declare -x U="héllo wörld ✓ 日本"` + "\n", []string{"U=héllo wörld ✓ 日本"}},
		{"bash exported but unset", "declare -x UNSET\ndeclare -x B=\"1\"\n", []string{"B=1"}},
		{"bash readonly and integer", "declare -rx RO=\"1\"\ndeclare -ix I=\"3\"\ndeclare -irx IR=\"4\"\n", []string{"RO=1", "I=3", "IR=4"}},
		{"bash names", "declare -x _=\"u\"\ndeclare -x a1_B2=\"x\"\n", []string{"_=u", "a1_B2=x"}},

		// bash 5.2: $'...' once a value has a byte it will not print.
		{"bash newline", `declare -x N=$'line1\nline2'` + "\n", []string{"N=line1\nline2"}},
		{"bash trailing newline", `declare -x N=$'x\n'` + "\n", []string{"N=x\n"}},
		{"bash tab", `declare -x T=$'a\tb'` + "\n", []string{"T=a\tb"}},
		{"bash named controls", `declare -x R=$'\r\v\f\a\b\E'` + "\n", []string{"R=\r\v\f\a\b\x1b"}},
		{"bash octal controls", `declare -x C=$'a\001b\177\037'` + "\n", []string{"C=a\x01b\x7f\x1f"}},
		{"bash escape sequence", `declare -x PS=$'\E[1;32m$ \E[0m'` + "\n", []string{"PS=\x1b[1;32m$ \x1b[0m"}},
		{"bash invalid UTF-8", `declare -x H=$'\303'` + "\n" + `declare -x H2=$'a\377\200b'` + "\n", []string{"H=\xc3", "H2=a\xff\x80b"}},
		{"bash octal then digit", `declare -x D=$'\0017\0018'` + "\n", []string{"D=\x017\x018"}},
		{"bash UTF-8 bash will not print", `declare -x LS=$'\342\200\250'` + "\n", []string{"LS=\u2028"}},
		{"bash quotes and backslash in $''", `declare -x M=$'it\'s \\ "q" $HOME ` + "`x`" + `\n'` + "\n", []string{"M=it's \\ \"q\" $HOME `x`\n"}},
		{"bash UTF-8 next to escapes", `declare -x X=$'é\001é\t'` + "\n", []string{"X=é\x01é\t"}},
		{"bash other escape forms", `declare -x X=$'\x41\x4a\u00e9\U0001F600\cA\?\"'` + "\n", []string{"X=AJé😀\x01?\""}},
		{"bash unknown escape stays", `declare -x X=$'\q\z'` + "\n", []string{`X=\q\z`}},

		// bash arrays never reach the environment.
		{"bash indexed array", `declare -ax AR=([0]="x" [1]=$'a\ndeclare -x EVIL=1')` + "\ndeclare -x B=\"2\"\n", []string{"B=2"}},
		{"bash associative array", `declare -Ax AS=([k]="v" [$'x\ny']="declare -x EVIL=1" )` + "\n", nil},
		{"bash empty array", `declare -ax E=()` + "\n", nil},

		// A whole `export -p`.
		{"bash output", `declare -x HOME="/root"
declare -x OLDPWD
declare -x PATH="/usr/local/bin:/usr/bin:/bin"
declare -x PWD="/work"
declare -x SHLVL="1"
declare -x MULTI=$'one\ntwo\n\tthree'
declare -x _="/usr/bin/env"
`, []string{"HOME=/root", "PATH=/usr/local/bin:/usr/bin:/bin", "PWD=/work", "SHLVL=1", "MULTI=one\ntwo\n\tthree", "_=/usr/bin/env"}},
		{"no final newline", `declare -x A="1"`, []string{"A=1"}},
		{"CRLF is part of the value", "declare -x A=\"1\"\r\n", []string{"A=1\r"}},

		// dash and busybox ash: `export NAME='...'`.
		{"dash plain", "export A='plain'\n", []string{"A=plain"}},
		{"dash single quote", `export A='va'"'"'lue'` + "\n", []string{"A=va'lue"}},
		{"busybox single quote", `export A='va'\''lue'` + "\n", []string{"A=va'lue"}},
		{"dash only a quote", `export A=''"'"''` + "\n", []string{"A='"}},
		{"dash multi-line", "export A='line1\nline2\n'\nexport B='2'\n", []string{"A=line1\nline2\n", "B=2"}},
		{"dash raw bytes", "export A='\x01\x1b\x7f\xff\xc3 é $x `y` \\n \"'\n", []string{"A=\x01\x1b\x7f\xff\xc3 é $x `y` \\n \""}},
		{"dash empty", "export A=''\n", []string{"A="}},
		{"dash exported but unset", "export A\nexport B='x'\n", []string{"B=x"}},
		{"dash injection attempt", "export A='x\nexport EVIL=1\ndeclare -x EVIL2=2'\n", []string{"A=x\nexport EVIL=1\ndeclare -x EVIL2=2"}},
		{"typeset", "typeset -x A='1'\n", []string{"A=1"}},

		// Whatever else is on the stream is skipped.
		{"empty", "", nil},
		{"blank lines", "\n\n  \n\t\n", nil},
		{"other lines", "hello world\nreadonly A='1'\nexport\ndeclare -x\n-x A=1\n", nil},
		{"invalid names", "declare -x 1A=\"x\"\ndeclare -x A-B=\"x\"\nexport =x\n", nil},
		{"leading blanks", "  declare -x A=\"1\"\n\texport B='2'\n", []string{"A=1", "B=2"}},
		{"unterminated single quote", "export A='abc", []string{"A=abc"}},
		{"unterminated double quote", `declare -x A="abc`, []string{"A=abc"}},
		{"unterminated $''", `declare -x A=$'abc`, []string{"A=abc"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := parseExports([]byte(tc.out))
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("parseExports(%q) (-want +got):\n%s", tc.out, diff)
			}
		})
	}
}

// shells returns the POSIX shells on this machine to check against, each
// as argv to which "-c", script is appended, and the environment it needs.
func shells(t *testing.T) []shellCmd {
	t.Helper()
	var out []shellCmd
	if p, err := exec.LookPath("bash"); err == nil {
		out = append(out,
			shellCmd{name: "bash", argv: []string{p, "--noprofile", "--norc"}},
			shellCmd{name: "bash C.UTF-8", argv: []string{p, "--noprofile", "--norc"}, env: []string{"LC_ALL=C.UTF-8"}})
	}
	if _, err := os.Stat("/bin/dash"); err == nil {
		out = append(out, shellCmd{name: "dash", argv: []string{"/bin/dash"}})
	}
	if _, err := os.Stat("/bin/busybox"); err == nil {
		out = append(out, shellCmd{name: "busybox sh", argv: []string{"/bin/busybox", "sh"}})
	}
	if len(out) == 0 {
		t.Skip("no bash, dash or busybox on this machine")
	}
	return out
}

type shellCmd struct {
	name string
	argv []string
	env  []string
}

// run runs script in the shell with exactly env (plus the shell's own) and
// returns its standard output.
func (sh shellCmd) run(t *testing.T, script string, env []string) []byte {
	t.Helper()
	cmd := exec.Command(sh.argv[0], append(append(sh.argv[1:], "-c"), script)...)
	cmd.Env = append(append([]string{}, sh.env...), env...)
	cmd.Dir = t.TempDir() // where debris lands if quoting ever breaks
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s -c %.200q: %v\n%s", sh.name, script, err, stderr.Bytes())
	}
	return out
}

// randomValue returns a value of bytes 1..255, heavy in the bytes that
// quoting gets wrong.
func randomValue(r *rand.Rand) string {
	const tricky = "\n\t\r\v\f\a\b\x1b\x01\x7f\x80\xff\xc3\xa9 '\"$`\\!#&;|<>(){}[]*?~=%^-+.,:@/07x"
	var b strings.Builder
	n := r.IntN(24)
	if r.IntN(10) == 0 {
		n = r.IntN(300)
	}
	for b.Len() < n {
		switch r.IntN(4) {
		case 0, 1:
			b.WriteByte(tricky[r.IntN(len(tricky))])
		case 2:
			b.WriteByte(byte(1 + r.IntN(255)))
		default:
			runes := []rune{'é', '✓', '日', '😀', '\u2028', '\u0085', '\u00a0', '\ufeff'}
			b.WriteRune(runes[r.IntN(len(runes))])
		}
	}
	return b.String()
}

// TestParseExportsRealShells exports random values in real shells and
// checks that parsing their `export -p` gives back exactly those values.
func TestParseExportsRealShells(t *testing.T) {
	const rounds, perRound = 5, 100
	for _, sh := range shells(t) {
		t.Run(sh.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(len(sh.name))))
			for round := range rounds {
				want := map[string]string{}
				var env []string
				for i := range perRound {
					name := fmt.Sprintf("WTEST_%d_%d", round, i)
					want[name] = randomValue(r)
					env = append(env, name+"="+want[name])
				}
				// Through the environment, and set by the shell itself
				// with shellQuote as the agent does.
				var script strings.Builder
				for i := range perRound / 2 {
					name := fmt.Sprintf("WTEST_SET_%d_%d", round, i)
					want[name] = randomValue(r)
					fmt.Fprintf(&script, "export %s=%s\n", name, shellQuote(want[name]))
				}
				script.WriteString("export -p\n")
				out := sh.run(t, script.String(), env)
				got := map[string]string{}
				for _, kv := range parseExports(out) {
					name, value, _ := strings.Cut(kv, "=")
					if strings.HasPrefix(name, "WTEST_") {
						got[name] = value
					}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("round %d: parseExports(export -p) (-want +got):\n%s\noutput:\n%q", round, diff, out)
				}
			}
		})
	}
}

// TestShellQuote checks that every shell reads a shellQuote'd word back as
// the exact string.
func TestShellQuote(t *testing.T) {
	fixed := []string{"", "'", "''", "a'b", `\`, `\'`, "$HOME", "`id`", "$(id)", "\n", "-n", "%s", "a b", "*", "~", "!x", "\x01\xff", "é"}
	for _, sh := range shells(t) {
		t.Run(sh.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(2, uint64(len(sh.name))))
			values := fixed
			for range 500 {
				values = append(values, randomValue(r))
			}
			// One word per printf argument, NUL-terminated, in batches.
			for start := 0; start < len(values); start += 100 {
				batch := values[start:min(start+100, len(values))]
				var script strings.Builder
				script.WriteString(`printf '%s\0'`)
				for _, v := range batch {
					script.WriteString(" " + shellQuote(v))
				}
				out := sh.run(t, script.String(), nil)
				got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
				if diff := cmp.Diff(batch, got); diff != "" {
					t.Fatalf("printf of shellQuote'd words (-want +got):\n%s", diff)
				}
			}
			// And alone, as the only argument of printf %s.
			for _, v := range values[:len(fixed)+50] {
				if got := string(sh.run(t, "printf %s "+shellQuote(v), nil)); got != v {
					t.Errorf("printf %%s %s = %q, want %q", shellQuote(v), got, v)
				}
			}
		})
	}
}

// FuzzParseExports checks that parseExports survives any input, returns
// only NAME=value pairs with valid names, and reads back its own pairs
// when they are printed in each shell's format.
func FuzzParseExports(f *testing.F) {
	for _, s := range []string{
		"declare -x A=\"1\"\ndeclare -x B=$'\\n\\001\\377'\n",
		"declare -ax AR=([0]=\"x\")\ndeclare -x UNSET\n",
		"export A='va'\"'\"'lue'\nexport B='a\nb'\n",
		"export A='va'\\''lue'\n",
		"declare -x X=$'\\x41\\u00e9\\U0001F600\\cA\\q\\'",
		"declare -x A=\"unterminated",
		"declare -x A=$'\\",
		"declare -x A=$'\\c",
		"declare -x A=$'\\U",
		"declare -x A=\\",
		"typeset -x A=a\\ b\"c\"$'d'",
		"declare -x A=$'\\udfff\\U7fffffff\\Uffffffff'",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		pairs := parseExports(out)
		for _, kv := range pairs {
			name, _, ok := strings.Cut(kv, "=")
			if !ok || !validName(name) {
				t.Fatalf("parseExports(%q) returned %q, not NAME=value", out, kv)
			}
		}
		for form, printVar := range map[string]func(name, value string) string{
			"dash":              dashExport,
			"bash $''":          bashANSIExport,
			"bash double-quote": bashDoubleExport,
		} {
			var b strings.Builder
			for _, kv := range pairs {
				name, value, _ := strings.Cut(kv, "=")
				b.WriteString(printVar(name, value) + "\n")
			}
			if got := parseExports([]byte(b.String())); !cmp.Equal(pairs, got, cmpopts.EquateEmpty()) {
				t.Fatalf("pairs printed in %s format do not parse back (-want +got):\n%s", form, cmp.Diff(pairs, got, cmpopts.EquateEmpty()))
			}
		}
	})
}

func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// dashExport prints a variable as dash's `export -p` does.
func dashExport(name, value string) string {
	return "export " + name + "='" + strings.ReplaceAll(value, "'", `'"'"'`) + "'"
}

// bashANSIExport prints a variable in bash's $'...' form, every byte that
// is not printable ASCII in octal.
func bashANSIExport(name, value string) string {
	var b strings.Builder
	b.WriteString("declare -x " + name + "=$'")
	for i := 0; i < len(value); i++ {
		switch c := value[i]; {
		case c == '\'' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "\\%03o", c)
		}
	}
	b.WriteString("'")
	return b.String()
}

// bashDoubleExport prints a variable in bash's double-quoted form.
func bashDoubleExport(name, value string) string {
	var b strings.Builder
	b.WriteString("declare -x " + name + `="`)
	for _, c := range []byte(value) {
		if strings.IndexByte("\"\\$`", c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteString(`"`)
	return b.String()
}
