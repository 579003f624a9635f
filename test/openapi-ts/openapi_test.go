package openapits

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.SandboxMain()
	os.Exit(m.Run())
}

// TestGeneratedClient generates a TypeScript client from the daemon's
// /openapi.json, type-checks check.ts against it with tsc --strict, and
// runs it: create, exec, file write and read, the streamed exec, delete.
func TestGeneratedClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("needs node (.ci/run installs it)")
	}
	for _, pkg := range []string{"openapi-typescript", "openapi-fetch", "typescript", "@types/node"} {
		if _, err := os.Stat(filepath.Join("node_modules", pkg, "package.json")); err != nil {
			t.Skipf("needs the npm package %s: run npm ci in test/openapi-ts (.ci/run does)", pkg)
		}
	}
	modules, err := filepath.Abs("node_modules")
	if err != nil {
		t.Fatal(err)
	}
	h := daemontest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// A project of its own, so that nothing generated lands in the tree
	// (package.json: check.ts is an ES module).
	dir := t.TempDir()
	for _, f := range []string{"check.ts", "tsconfig.json", "package.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	run := func(what string, env []string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, node, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
		return string(out)
	}
	// From the served document, as a user points the generator at a daemon.
	run("openapi-typescript", nil, filepath.Join("node_modules", "openapi-typescript", "bin", "cli.js"), h.URL+"/openapi.json", "-o", "schema.d.ts")
	run("tsc --strict", nil, filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json")
	out := run("node check.js", []string{"WARREN_URL=" + h.URL, "WARREN_KEY=" + h.AdminKey}, filepath.Join("out", "check.js"))
	t.Logf("%s", out)
}
