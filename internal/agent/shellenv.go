package agent

import (
	"strconv"
	"strings"
)

// parseExports turns the output of `export -p` (bash's `declare -x NAME=...`
// or a POSIX shell's `export NAME='...'`) into NAME=value pairs. Variables
// that are exported but unset are skipped, as the environment of a child
// would skip them.
func parseExports(out []byte) []string {
	p := &wordParser{s: string(out)}
	var env []string
	for !p.eof() {
		p.skipSpace()
		word, ok := p.word()
		if !ok {
			p.skipLine()
			continue
		}
		if word != "declare" && word != "export" && word != "typeset" {
			p.skipLine()
			continue
		}
		p.skipBlanks()
		// Flags such as -x, -rx; skip arrays, which never reach the
		// environment.
		array := false
		for p.peek() == '-' {
			flags, _ := p.word()
			if strings.ContainsAny(flags, "aA") {
				array = true
			}
			p.skipBlanks()
		}
		name := p.name()
		if name == "" {
			p.skipLine()
			continue
		}
		if p.peek() != '=' {
			p.skipLine()
			continue
		}
		p.i++
		value := p.value()
		p.skipLine()
		if !array {
			env = append(env, name+"="+value)
		}
	}
	return env
}

type wordParser struct {
	s string
	i int
}

func (p *wordParser) eof() bool { return p.i >= len(p.s) }

func (p *wordParser) peek() byte {
	if p.eof() {
		return 0
	}
	return p.s[p.i]
}

func (p *wordParser) skipSpace() {
	for !p.eof() && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

func (p *wordParser) skipBlanks() {
	for !p.eof() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *wordParser) skipLine() {
	for !p.eof() && p.s[p.i] != '\n' {
		p.i++
	}
}

// word reads an unquoted word.
func (p *wordParser) word() (string, bool) {
	start := p.i
	for !p.eof() && p.s[p.i] != ' ' && p.s[p.i] != '\t' && p.s[p.i] != '\n' {
		p.i++
	}
	return p.s[start:p.i], p.i > start
}

func (p *wordParser) name() string {
	start := p.i
	for !p.eof() {
		c := p.s[p.i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || (p.i > start && c >= '0' && c <= '9') {
			p.i++
			continue
		}
		break
	}
	return p.s[start:p.i]
}

// value reads one shell word made of adjacent quoted and unquoted parts.
func (p *wordParser) value() string {
	var b strings.Builder
	for !p.eof() {
		c := p.s[p.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			return b.String()
		case c == '\'':
			end := strings.IndexByte(p.s[p.i+1:], '\'')
			if end < 0 {
				b.WriteString(p.s[p.i+1:])
				p.i = len(p.s)
				return b.String()
			}
			b.WriteString(p.s[p.i+1 : p.i+1+end])
			p.i += end + 2
		case c == '"':
			p.i++
			for !p.eof() && p.s[p.i] != '"' {
				if p.s[p.i] == '\\' && p.i+1 < len(p.s) && strings.IndexByte("\"\\$`\n", p.s[p.i+1]) >= 0 {
					if p.s[p.i+1] != '\n' {
						b.WriteByte(p.s[p.i+1])
					}
					p.i += 2
					continue
				}
				b.WriteByte(p.s[p.i])
				p.i++
			}
			p.i++
		case c == '$' && p.i+1 < len(p.s) && p.s[p.i+1] == '\'':
			p.i += 2
			p.ansiC(&b)
		case c == '\\' && p.i+1 < len(p.s):
			b.WriteByte(p.s[p.i+1])
			p.i += 2
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return b.String()
}

// ansiC decodes the body of $'...' up to and including the closing quote.
func (p *wordParser) ansiC(b *strings.Builder) {
	for !p.eof() {
		c := p.s[p.i]
		if c == '\'' {
			p.i++
			return
		}
		if c != '\\' || p.i+1 >= len(p.s) {
			b.WriteByte(c)
			p.i++
			continue
		}
		p.i++
		e := p.s[p.i]
		p.i++
		switch e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '\\', '\'', '"', '?':
			b.WriteByte(e)
		case 'c':
			if !p.eof() {
				b.WriteByte(p.s[p.i] & 0x1f)
				p.i++
			}
		case 'x':
			b.WriteByte(byte(p.digits(16, 2)))
		case 'u':
			b.WriteRune(rune(p.digits(16, 4)))
		case 'U':
			b.WriteRune(rune(p.digits(16, 8)))
		default:
			if e >= '0' && e <= '7' {
				p.i--
				b.WriteByte(byte(p.digits(8, 3)))
			} else {
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		}
	}
}

func (p *wordParser) digits(base, max int) int {
	start := p.i
	for p.i < len(p.s) && p.i-start < max {
		c := p.s[p.i]
		ok := c >= '0' && c <= '7' || base == 16 && (c >= '8' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F')
		if !ok {
			break
		}
		p.i++
	}
	v, _ := strconv.ParseUint(p.s[start:p.i], base, 32)
	return int(v)
}

// shellQuote quotes s for any POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
