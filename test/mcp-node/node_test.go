package mcpnode

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/cli"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.SandboxMain()
	if os.Getenv(asWarren) == "1" {
		os.Exit(cli.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestNodeClient runs check.mjs against a daemon: the TypeScript SDK's
// client over Streamable HTTP.
func TestNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("needs node (.ci/run installs it)")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Skip("needs the npm packages: run npm ci in test/mcp-node (.ci/run does)")
	}
	h := daemontest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "check.mjs")
	cmd.Env = append(os.Environ(), "WARREN_MCP_URL="+h.URL+"/mcp", "WARREN_KEY="+h.AdminKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node check.mjs: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
