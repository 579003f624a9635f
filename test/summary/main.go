// Command summary runs go test with -json and prints what go test prints
// without -v (a line per package, and the output of failed tests), then
// the tests that were skipped, each with its reason, so that a skip is
// never mistaken for a pass. It exits with go test's status. make test
// runs it: go run ./test/summary -race -count=1 ./... ($GO, if set, is the
// go command to run).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

func main() {
	goCmd := os.Getenv("GO") // make's $(GO)
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.Command(goCmd, append([]string{"test", "-json"}, os.Args[1:]...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(2)
	}
	failed := render(out, os.Stdout)
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(2)
	case failed:
		os.Exit(1)
	}
}

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// render reads go test -json from r and writes the summary to w. It
// reports whether a test or package failed.
func render(r io.Reader, w io.Writer) (failed bool) {
	type key struct{ pkg, test string }
	outputs := map[key][]string{}  // held until the test's end decides
	skips := map[string][]string{} // "pkg TestX" -> its reason lines
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Action == "" {
			fmt.Fprintln(w, sc.Text()) // not an event: pass it on
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output", "build-output":
			outputs[k] = append(outputs[k], e.Output)
		case "fail", "build-fail":
			failed = true
			for _, l := range outputs[k] {
				if !isProgress(l) {
					io.WriteString(w, l)
				}
			}
			delete(outputs, k)
		case "skip":
			if e.Test != "" {
				skips[e.Package+" "+e.Test] = skipReason(outputs[k])
			} else { // a package without tests: as go test prints it
				for _, l := range outputs[k] {
					io.WriteString(w, l)
				}
			}
			delete(outputs, k)
		case "pass":
			if e.Test == "" { // the package's "ok" line, as without -v
				for _, l := range outputs[k] {
					if strings.HasPrefix(l, "ok ") {
						io.WriteString(w, l)
					}
				}
			}
			delete(outputs, k)
		}
	}
	// Anything left never ended (a crash mid-test): show it.
	for _, ls := range outputs {
		for _, l := range ls {
			io.WriteString(w, l)
		}
	}
	if len(skips) == 0 {
		fmt.Fprintln(w, "skipped: none")
		return failed
	}
	names := make([]string, 0, len(skips))
	for n := range skips {
		names = append(names, n)
	}
	sort.Strings(names)
	plural := "s"
	if len(names) == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "skipped: %d test%s\n", len(names), plural)
	for _, n := range names {
		reason := strings.Join(skips[n], "; ")
		if reason == "" {
			reason = "(no reason given)"
		}
		fmt.Fprintf(w, "  SKIP %s: %s\n", n, reason)
	}
	return failed
}

// isProgress reports whether l is one of the lines -v adds to a test's
// output as it runs, which go test without -v does not print.
func isProgress(l string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// skipReason picks the messages out of a skipped test's output: the
// indented "file_test.go:12: ..." lines, without the position.
func skipReason(lines []string) []string {
	var out []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		if i := strings.Index(t, ": "); i > 0 && strings.Contains(t[:i], ".go:") {
			t = t[i+2:]
		}
		out = append(out, t)
	}
	return out
}
