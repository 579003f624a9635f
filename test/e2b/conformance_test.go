package e2b

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.SandboxMain()
	os.Exit(m.Run())
}

// kit finds the conformance kit: $WARREN_E2B_KIT, else
// ../shared/conformance/e2b beside the repository.
func kit(t *testing.T) string {
	if k := os.Getenv("WARREN_E2B_KIT"); k != "" {
		if _, err := os.Stat(filepath.Join(k, "run.sh")); err != nil {
			t.Fatalf("WARREN_E2B_KIT=%s has no run.sh: %v", k, err)
		}
		return k
	}
	k, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "conformance", "e2b"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(k, "run.sh")); err != nil {
		t.Skipf("no E2B conformance kit: set WARREN_E2B_KIT, or put it at %s", k)
	}
	return k
}

// e2bKey makes an E2B-format key of the daemon's default tenant through
// POST /e2b/api-keys, as an admin would.
func e2bKey(t *testing.T, h *daemontest.Harness) string {
	req, _ := http.NewRequest(http.MethodPost, h.URL+"/e2b/api-keys", strings.NewReader(`{"name":"conformance"}`))
	resp, err := h.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /e2b/api-keys: %d %s", resp.StatusCode, body)
	}
	var k struct{ Key string }
	if err := json.Unmarshal(body, &k); err != nil || !regexp.MustCompile(`^e2b_[0-9a-f]{40}$`).MatchString(k.Key) {
		t.Fatalf("POST /e2b/api-keys answered %s", body)
	}
	return k.Key
}

// TestConformance runs every test of the kit against a daemon with
// authentication on, through an E2B-format key, and fails if any test
// fails. It logs the kit's per-file summary.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("the E2B conformance kit takes minutes (not in -short)")
	}
	dir := kit(t)
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("needs npm and node 20.19 or later (.ci/run installs them) to run E2B's SDK tests")
	}
	// The kit's vitest needs node 20.19; Debian 12's own nodejs is 18.
	v, err := exec.Command("node", "--version").Output()
	if err != nil {
		t.Skipf("needs node 20.19 or later to run E2B's SDK tests: %v", err)
	}
	var major, minor int
	fmt.Sscanf(strings.TrimPrefix(strings.TrimSpace(string(v)), "v"), "%d.%d", &major, &minor)
	if major < 20 || (major == 20 && minor < 19) {
		t.Skipf("the kit's vitest needs node 20.19 or later; this is %s", strings.TrimSpace(string(v)))
	}
	h := daemontest.Start(t, func(c *config.Config) {
		// The kit runs several files at once, each creating sandboxes.
		c.Session.MaxSessions = 200
		// Each is granted only disk the host can back (disk.overcommit
		// off): small layers keep the run's dozens of sandboxes within
		// any CI machine's free space; no test writes more than a few MiB.
		c.Session.DefaultLimits.DiskMB = 256
	})
	key := e2bKey(t, h)
	skip, err := filepath.Abs("skip.txt")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	api := h.URL + "/e2b"
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "run.sh"), "--skip-file", skip, api, api)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "E2B_API_KEY="+key, "E2B_DEBUG=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	summary := false
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "E2B conformance: per file") {
			summary = true
		}
		if summary {
			t.Log(l)
		}
	}
	if !summary {
		t.Logf("run.sh printed:\n%s", out.String())
	}
	if runErr != nil {
		t.Fatalf("the E2B conformance kit failed: %v", runErr)
	}
}
