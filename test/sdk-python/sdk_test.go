// Package sdkpython runs the Python SDK's test suite (sdk/python/tests,
// unittest) against a real daemon, so that `make test` covers the SDK: the
// daemon is started here, on a loopback port with its own data directory,
// and its URL and admin key reach Python through the environment.
package sdkpython

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/network/nettest"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.SandboxMain()
	os.Exit(m.Run())
}

// python returns the python3 to run the suite with, or skips t saying why.
// The SDK supports Python 3.9 and later.
func python(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3 (3.9 or later) to run the Python SDK's tests; none on PATH")
	}
	out, err := exec.Command(py, "-c", "import sys; print(sys.version_info >= (3, 9))").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "True" {
		t.Skipf("needs python3 3.9 or later for the Python SDK's tests; %s is not (%s)", py, strings.TrimSpace(string(out)))
	}
	return py
}

// sdkDir is sdk/python, from this package's directory.
func sdkDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs(filepath.Join("..", "..", "sdk", "python"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPythonSDK runs `python3 -m unittest` in sdk/python against a daemon.
func TestPythonSDK(t *testing.T) {
	py := python(t)
	// Sessions' egress goes through a namespace of the test's own into a
	// fake internet (nettest), so that the network calls run for real and
	// no other daemon on the machine holds the egress.
	world := nettest.NewWorld(t)
	h := daemontest.Start(t, func(c *config.Config) {
		c.Network.NetNS = world.HostPath
		c.Network.DNSUpstream = []string{nettest.UpstreamAddr}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"-m", "unittest", "discover", "-s", "tests", "-t", "."}
	if testing.Verbose() {
		args = append(args, "-v")
	}
	cmd := exec.CommandContext(ctx, py, args...)
	cmd.Dir = sdkDir(t)
	cmd.Env = append(os.Environ(),
		"WARREN_URL="+h.URL,
		"WARREN_API_KEY="+h.AdminKey,
		"WARREN_TEST_INTERNET=allowed.test,other.test", // names of the fake internet: one to allow, one to deny
		"PYTHONDONTWRITEBYTECODE=1",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("%s", out)
}

// BenchmarkPythonSDK runs sdk/python/bench/bench.py against a daemon
// without a rate limit: create + first exec + delete from the SDK and from
// curl, and the SDK's own overhead per call over a raw http.client call on
// the same kept-alive connection (docs/BENCHMARKS.md).
func BenchmarkPythonSDK(b *testing.B) {
	py, err := exec.LookPath("python3")
	if err != nil {
		b.Skip("needs python3")
	}
	h := daemontest.Start(b, func(c *config.Config) { c.Auth.RateLimit = 0 })
	dir, err := filepath.Abs(filepath.Join("..", "..", "sdk", "python"))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(py, "bench/bench.py")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "WARREN_URL="+h.URL, "WARREN_API_KEY="+h.AdminKey)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("bench.py: %v\n%s", err, out)
		}
		b.Logf("%s", out)
	}
}
