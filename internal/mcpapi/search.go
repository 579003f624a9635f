package mcpapi

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/errdefs"
)

const (
	searchDefaultResults = 100
	searchMaxResults     = 1000
	searchTimeoutMs      = 60_000
	// searchLineChars bounds a matching line's text (minified files have
	// lines of megabytes).
	searchLineChars = 300
)

// SearchFilesInput is search_files' input.
type SearchFilesInput struct {
	SessionID    string `json:"session_id" jsonschema:"the session to search in"`
	Pattern      string `json:"pattern,omitempty" jsonschema:"regular expression (POSIX extended, as grep -E) that matching lines contain; leave out to find files by glob only"`
	Path         string `json:"path,omitempty" jsonschema:"directory or file to search: absolute, or relative to the session's working directory at creation (default: that directory)"`
	Glob         string `json:"glob,omitempty" jsonschema:"file name pattern such as \"*.go\" or \"test_*.py\", matched against each file's name"`
	IgnoreCase   bool   `json:"ignore_case,omitempty" jsonschema:"match letters of either case"`
	FixedStrings bool   `json:"fixed_strings,omitempty" jsonschema:"treat pattern as an exact string, not a regular expression"`
	MaxResults   int    `json:"max_results,omitempty" jsonschema:"most results to return (default 100, at most 1000)"`
}

// SearchMatch is a matching line, or a matching file when searching by
// glob only.
type SearchMatch struct {
	Path string `json:"path" jsonschema:"the file's absolute path"`
	Line int    `json:"line,omitempty" jsonschema:"the line number, from 1"`
	Text string `json:"text,omitempty" jsonschema:"the matching line (long lines are cut)"`
}

// SearchResult is search_files' output.
type SearchResult struct {
	Matches   []SearchMatch `json:"matches"`
	Truncated bool          `json:"truncated" jsonschema:"there were more results than were returned"`
}

func (t *tools) searchFiles(ctx context.Context, in *SearchFilesInput) (*SearchResult, []mcp.Content, error) {
	limit := in.MaxResults
	switch {
	case limit < 0:
		return nil, nil, invalid("max_results must not be negative")
	case limit == 0:
		limit = searchDefaultResults
	case limit > searchMaxResults:
		limit = searchMaxResults
	}
	if in.Pattern == "" && in.Glob == "" {
		return nil, nil, invalid("give a pattern to search file contents for, a glob to find files by name, or both")
	}
	root := in.Path
	if root == "" {
		root = "."
	}
	// Resolve the root as the file tools do, so that results name paths
	// read_file understands; a missing root is not_found.
	e, err := t.b.StatFile(ctx, in.SessionID, root)
	if err != nil {
		return nil, nil, err
	}
	argv := searchArgv(in, path.Clean(e.Path))
	res, err := t.b.Exec(ctx, in.SessionID, &api.ExecRequest{Argv: argv, TimeoutMs: searchTimeoutMs})
	if err != nil {
		return nil, nil, err
	}
	if res.TimedOut {
		return nil, nil, errdefs.New(errdefs.ErrResourceExhausted, "the search took longer than %d seconds; search a smaller directory or narrow it with glob", searchTimeoutMs/1000)
	}
	// grep: 0 found, 1 nothing found, 2 trouble (which may come with
	// results, e.g. an unreadable file). find: 0, or 1 with trouble.
	if res.Stdout == "" && (in.Pattern != "" && res.ExitCode > 1 || in.Pattern == "" && res.ExitCode != 0) {
		msg := strings.TrimSpace(res.Stderr)
		if msg == "" {
			msg = fmt.Sprintf("%s exited with status %d", argv[0], res.ExitCode)
		}
		return nil, nil, invalid("search failed: %s", msg)
	}
	out := parseSearch(res.Stdout, in.Pattern != "", limit)
	if res.Truncated {
		out.Truncated = true
	}
	return out, text(searchText(out)), nil
}

// searchArgv is the grep or find command of a search under root. Every
// part of the input is an argument of its own, never shell text.
func searchArgv(in *SearchFilesInput, root string) []string {
	glob := in.Glob
	if i := strings.LastIndexByte(glob, '/'); i >= 0 {
		glob = glob[i+1:] // "src/**/*.go" matches names as "*.go"
	}
	if in.Pattern == "" {
		return []string{"find", root, "-name", ".git", "-prune", "-o", "-type", "f", "-name", glob, "-print"}
	}
	argv := []string{"grep", "-r", "-n", "-H", "-I", "-s", "--null", "--color=never", "--exclude-dir=.git"}
	if in.IgnoreCase {
		argv = append(argv, "-i")
	}
	if in.FixedStrings {
		argv = append(argv, "-F")
	} else {
		argv = append(argv, "-E")
	}
	if glob != "" {
		argv = append(argv, "--include="+glob)
	}
	return append(argv, "-e", in.Pattern, "--", root)
}

// parseSearch reads grep's "path\x00line:text" lines (or find's paths),
// keeping at most limit results.
func parseSearch(stdout string, grep bool, limit int) *SearchResult {
	out := &SearchResult{Matches: []SearchMatch{}}
	lines := strings.Split(stdout, "\n")
	// The last element is "" after a final newline, or a line the output
	// cap cut short.
	lines = lines[:len(lines)-1]
	for _, l := range lines {
		if len(out.Matches) == limit {
			out.Truncated = true
			break
		}
		if !grep {
			out.Matches = append(out.Matches, SearchMatch{Path: l})
			continue
		}
		path, rest, ok := strings.Cut(l, "\x00")
		if !ok {
			continue
		}
		num, txt, _ := strings.Cut(rest, ":")
		n, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		out.Matches = append(out.Matches, SearchMatch{Path: path, Line: n, Text: cutLine(txt)})
	}
	return out
}

// cutLine bounds a line's text without splitting a character.
func cutLine(s string) string {
	s = strings.TrimRight(s, "\r")
	if len(s) <= searchLineChars {
		return s
	}
	cut := searchLineChars
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " [...]"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func searchText(r *SearchResult) string {
	var b bytes.Buffer
	if len(r.Matches) == 0 {
		b.WriteString("no matches\n")
	}
	for _, m := range r.Matches {
		if m.Line > 0 {
			fmt.Fprintf(&b, "%s:%d: %s\n", m.Path, m.Line, m.Text)
		} else {
			fmt.Fprintf(&b, "%s\n", m.Path)
		}
	}
	if r.Truncated {
		b.WriteString("[more results were left out: narrow the search (path, glob, a more specific pattern) or raise max_results]\n")
	}
	return b.String()
}
