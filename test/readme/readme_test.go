package readme

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.SandboxMain()
	os.Exit(m.Run())
}

// marker comes on the line before a fenced sh block that the test runs.
const marker = "<!-- readme-test -->"

// block is a runnable block of the README and the output it must print.
type block struct {
	line   int    // of the opening fence, 1-based
	script string // the commands
	want   []string
}

// parseBlocks returns the marked blocks of readme in order. A marked block
// is a ```sh fence right after the marker; the next fenced block, if it is
// ```text and comes before the next marker, is its expected output.
func parseBlocks(readme string) ([]block, error) {
	lines := strings.Split(readme, "\n")
	var blocks []block
	var cur *block
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case l == marker:
			if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
				return nil, fmt.Errorf("line %d: %s is not followed by a ```sh block", i+1, marker)
			}
			body, end, err := fence(lines, i+1)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, block{line: i + 2, script: body})
			cur = &blocks[len(blocks)-1]
			i = end
		case strings.HasPrefix(l, "```"):
			body, end, err := fence(lines, i)
			if err != nil {
				return nil, err
			}
			if cur != nil && l == "```text" {
				cur.want = strings.Split(strings.TrimRight(body, "\n"), "\n")
			}
			cur = nil // only the first fence after a block may be its output
			i = end
		}
	}
	return blocks, nil
}

// fence returns the body of the fenced block that opens at lines[open] and
// the index of its closing fence.
func fence(lines []string, open int) (string, int, error) {
	var b strings.Builder
	for j := open + 1; j < len(lines); j++ {
		if strings.TrimSpace(lines[j]) == "```" {
			return b.String(), j, nil
		}
		b.WriteString(lines[j] + "\n")
	}
	return "", 0, fmt.Errorf("line %d: the fenced block never closes", open+1)
}

// jsonSpace is the space after a JSON separator, which protojson (the
// Connect answers) adds or leaves out at random, so that nobody compares
// its output byte for byte.
var jsonSpace = regexp.MustCompile(`([,:]) +`)

// matchLines checks that every line of want matches a line of got, in
// order (got may have more lines between). In want, "..." stands for any
// text within a line; spaces after "," and ":" do not count. Blank lines
// are ignored on both sides. It returns the first line of want that found
// no match, or "".
func matchLines(want, got []string) string {
	j := 0
	for _, w := range want {
		if strings.TrimSpace(w) == "" {
			continue
		}
		parts := strings.Split(jsonSpace.ReplaceAllString(w, "$1"), "...")
		for k := range parts {
			parts[k] = regexp.QuoteMeta(parts[k])
		}
		re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
		for ; j < len(got) && !re.MatchString(jsonSpace.ReplaceAllString(got[j], "$1")); j++ {
		}
		if j == len(got) {
			return w
		}
		j++
	}
	return ""
}

// TestREADME builds warren, starts its daemon on a free loopback port with
// a fresh data directory, and runs the README's marked blocks against it
// in one bash, from a fresh directory, with the README's address and data
// directory replaced by the daemon's.
func TestREADME(t *testing.T) {
	testutil.RequiresRoot(t)
	testutil.BusyboxRootfs(t) // skips without the static busybox the walk-through copies
	for _, tool := range []string{"bash", "curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the quick start needs %s: %v", tool, err)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseBlocks(string(readme))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if len(blocks) < 3 {
		t.Fatalf("README.md has %d blocks marked %s, want the quick start's", len(blocks), marker)
	}

	work := t.TempDir()
	bin := filepath.Join(work, "bin", "warren")
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	start := time.Now()
	build := exec.Command(goCmd, "build", "-o", bin, "./cmd/warren")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as make build
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/warren: %v\n%s", err, out)
	}
	t.Logf("built bin/warren in %v", time.Since(start).Round(time.Millisecond))

	dataDir := testutil.TraversableDir(t)
	cgroupParent := fmt.Sprintf("%s%d-readme", testutil.TestCgroupPrefix, os.Getpid())
	testutil.CheckLeaks(t, cgroupParent, filepath.Join(dataDir, "sessions"), filepath.Join(dataDir, "layers"))
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var daemonLog bytes.Buffer
	serve := exec.Command(bin, "serve", "--listen", addr, "--data-dir", dataDir, "--cgroup-parent", cgroupParent,
		// Leave nothing behind, and the host's cgroup2 mount as it is.
		"--shutdown", "destroy", "--cgroup-favor-dynmods=false", "--log-format", "text")
	serve.Stdout, serve.Stderr = &daemonLog, &daemonLog
	start = time.Now()
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		serve.Process.Signal(syscall.SIGTERM)
		if err := serve.Wait(); err != nil {
			t.Errorf("the daemon ended with %v; its log:\n%s", err, daemonLog.String())
		}
	}
	t.Cleanup(stop)
	waitHealthy(t, "http://"+addr, serve)
	t.Logf("the daemon answered %v after its start", time.Since(start).Round(time.Millisecond))

	// One bash for every block, so that variables and functions carry over
	// as in the reader's terminal; a line of its own before each block
	// splits the output.
	var script strings.Builder
	script.WriteString("set -e\n")
	for i, b := range blocks {
		fmt.Fprintf(&script, "echo '%s%d'\n", splitMark, i)
		s := strings.NewReplacer("localhost:7433", "localhost:"+strconv.Itoa(port), "127.0.0.1:7433", addr,
			"/var/lib/warren", dataDir).Replace(b.script)
		script.WriteString(s)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-c", script.String())
	sh.Dir = work
	// The CLI's defaults are the README's address and data directory.
	sh.Env = append(os.Environ(), "WARREN_ADDR=http://"+addr, "WARREN_DATA_DIR="+dataDir)
	var stdout, stderr bytes.Buffer
	sh.Stdout, sh.Stderr = &stdout, &stderr
	start = time.Now()
	runErr := sh.Run()
	t.Logf("the walk-through ran in %v", time.Since(start).Round(time.Millisecond))
	outs := splitOutput(stdout.String(), len(blocks))
	for i, b := range blocks {
		if i >= len(outs) {
			t.Errorf("README.md:%d: the block did not run (an earlier one failed)", b.line)
			continue
		}
		if miss := matchLines(b.want, outs[i]); miss != "" {
			t.Errorf("README.md:%d: the output lacks (in order) the line\n\t%s\nIt printed:\n\t%s", b.line, miss, strings.Join(outs[i], "\n\t"))
		}
	}
	if runErr != nil {
		t.Errorf("README.md:%d: the block failed: %v\nstderr:\n%s", blocks[max(len(outs)-1, 0)].line, runErr, stderr.String())
	}
	if t.Failed() {
		stop()
		t.Logf("the daemon's log:\n%s", daemonLog.String())
	}
}

// splitMark starts the line the script prints before each block.
const splitMark = "=== readme block "

// splitOutput splits the script's stdout at its block lines: one element
// per block that started.
func splitOutput(out string, n int) [][]string {
	var outs [][]string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), splitMark) {
			outs = append(outs, nil)
			continue
		}
		if len(outs) > 0 {
			outs[len(outs)-1] = append(outs[len(outs)-1], sc.Text())
		}
	}
	return outs
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitHealthy waits for the daemon at url to answer /healthz.
func waitHealthy(t *testing.T, url string, serve *exec.Cmd) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if serve.ProcessState != nil {
			t.Fatalf("the daemon exited: %v", serve.ProcessState)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the daemon did not answer /healthz within 30 s")
}

// TestMatchLines checks the matcher of expected output itself.
func TestMatchLines(t *testing.T) {
	got := []string{`{"id":"demo","state":"running","cwd":"/workspace"}`, "", "hi", "extra", "busybox sha256:abc"}
	for _, tc := range []struct {
		want []string
		miss string
	}{
		{[]string{`{"id":"demo",...,"cwd":"/workspace"}`, "hi", "busybox sha256:..."}, ""},
		{[]string{"hi", "extra"}, ""},
		{[]string{"extra", "hi"}, "hi"}, // order matters
		{[]string{"h"}, "h"},            // whole lines
		{[]string{`{"id": "demo", ...}`}, ""},
		{[]string{`{"id":"other",...}`}, `{"id":"other",...}`},
	} {
		if miss := matchLines(tc.want, got); miss != tc.miss {
			t.Errorf("matchLines(%q) = %q, want %q", tc.want, miss, tc.miss)
		}
	}
}
