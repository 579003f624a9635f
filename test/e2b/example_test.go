package e2b

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// TestVercelAIExample runs docs/E2B.md's worked example (example.mjs): the
// Vercel AI SDK calls a tool that runs Python through E2B's SDK in a
// warren sandbox, and the tool's output is the program's.
func TestVercelAIExample(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("needs node (.ci/run installs it)")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "ai")); err != nil {
		t.Skip("needs the npm packages: run npm ci in test/e2b (make test does)")
	}
	h := daemontest.Start(t, nil)
	key := e2bKey(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "example.mjs")
	cmd.Env = append(os.Environ(), "E2B_API_URL="+h.URL+"/e2b", "E2B_SANDBOX_URL="+h.URL+"/e2b", "E2B_API_KEY="+key, "E2B_DEBUG=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node example.mjs: %v\n%s", err, out)
	}
	if want := `{"stdout":"1267650600228229401496703205376\n","stderr":"","exitCode":0}`; strings.TrimSpace(string(out)) != want {
		t.Fatalf("example.mjs printed %s, want %s", out, want)
	}
}
