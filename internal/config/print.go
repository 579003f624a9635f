package config

import (
	"fmt"
	"io"
	"strings"
)

// WriteTOML writes c as a TOML document that ApplyTOML reads back to c,
// every setting in it. With src, each value ends in a comment saying where
// it came from: "# default", "# file", "# env WARREN_LISTEN", "# flag
// --listen".
func WriteTOML(w io.Writer, c *Config, src Sources) error {
	var b strings.Builder
	for i := 0; i < len(settings); {
		table, _ := settings[i].Table()
		j := i
		for j < len(settings) {
			if t, _ := settings[j].Table(); t != table {
				break
			}
			j++
		}
		if table != "" {
			fmt.Fprintf(&b, "\n[%s]\n", table)
		}
		// Align the comments of one table.
		lines := make([]string, 0, j-i)
		width := 0
		for _, s := range settings[i:j] {
			_, name := s.Table()
			l := name + " = " + s.TOML(c)
			lines = append(lines, l)
			width = max(width, len(l))
		}
		for k, s := range settings[i:j] {
			if src == nil {
				fmt.Fprintln(&b, lines[k])
				continue
			}
			fmt.Fprintf(&b, "%-*s  # %s\n", width, lines[k], src.describe(s))
		}
		i = j
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// describe says where s's value came from, naming the variable or flag.
func (src Sources) describe(s Setting) string {
	switch from := src[s.Key]; from {
	case FromEnv:
		return "env " + s.Env
	case FromFlag:
		return "flag --" + s.Flag
	case "":
		return string(FromDefault)
	default:
		return string(from)
	}
}
