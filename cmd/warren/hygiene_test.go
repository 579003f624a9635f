package main

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(filepath.Dir(wd))
}

// TestPackageDocs checks that every package has exactly one package comment
// (tailscale's rule): in doc.go once a package has several files.
func TestPackageDocs(t *testing.T) {
	root := moduleRoot(t)
	docs := map[string][]string{}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Errorf("parse %s: %v", p, err)
			return nil
		}
		dir := filepath.Dir(p)
		if _, ok := docs[dir]; !ok {
			docs[dir] = nil
		}
		if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
			docs[dir] = append(docs[dir], filepath.Base(p))
			if !strings.HasPrefix(f.Doc.Text(), "Package "+f.Name.Name+" ") && !strings.HasPrefix(f.Doc.Text(), "Command ") {
				t.Errorf("%s: the package comment must start with \"Package %s \"", p, f.Name.Name)
			}
		}
		return nil
	})
	for dir, files := range docs {
		rel, _ := filepath.Rel(root, dir)
		switch len(files) {
		case 0:
			t.Errorf("no package comment in %s", rel)
		case 1:
		default:
			t.Errorf("several package comments in %s: %v", rel, files)
		}
	}
}

// TestSandboxSideDeps keeps the code that runs inside every sandbox (init
// and agent) small and free of the daemon's heavy machinery.
func TestSandboxSideDeps(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go tool")
	}
	banned := []string{"net/http", "database/sql", "modernc.org/sqlite", "github.com/spf13/cobra", "go.yaml.in/yaml/v3",
		"github.com/warrenhq/warren/internal/session", "github.com/warrenhq/warren/internal/httpapi", "github.com/warrenhq/warren/internal/store",
		"google.golang.org/grpc", "google.golang.org/protobuf", "connectrpc.com", "github.com/prometheus",
		"github.com/google/go-containerregistry", "github.com/modelcontextprotocol"}
	// cmd/warren-agent is the whole program every sandbox runs: what it
	// links, each sandbox pays for at start and in memory.
	for _, pkg := range []string{"./internal/agent", "./internal/nsinit", "./cmd/warren-agent"} {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Dir = moduleRoot(t)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range banned {
				if dep == b || strings.HasPrefix(dep, b+"/") {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}

// TestTransportDeps keeps the transports on the core's side of the runtime
// interface (session.Runtime): none of them may reach the sandbox, its
// init, its agent or the protocol the daemon speaks with that agent, so
// that a transport never depends on how (or where) sandboxes run.
//
// The rule is transitive: a transport may not reach a banned package
// through any other package either, except through the composition roots
// that exist to wire or probe the runtime (internal/daemon builds it,
// internal/doctor tries it out); the CLI hosts `warren serve` and `warren
// doctor`, so it imports those two, and the walk stops at them.
func TestTransportDeps(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go tool")
	}
	const mod = "github.com/warrenhq/warren/"
	transports := []string{"internal/httpapi", "internal/grpcapi", "internal/mcpapi", "internal/edge", "internal/wire",
		"client", "internal/cli"}
	banned := []string{"internal/agentproto", "internal/sandbox", "internal/nsinit", "internal/agent"}
	roots := map[string]bool{mod + "internal/daemon": true, mod + "internal/doctor": true}
	root := moduleRoot(t)
	var pkgs []string
	for _, p := range transports {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			pkgs = append(pkgs, "./"+p)
		}
	}
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, pkgs...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		imports[f[0]] = f[1:]
	}
	for _, p := range pkgs {
		from := mod + strings.TrimPrefix(p, "./")
		// Breadth first, remembering the way, so a failure shows the path.
		via := map[string]string{from: ""}
		queue := []string{from}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			for _, b := range banned {
				if cur == mod+b {
					path := []string{cur}
					for at := via[cur]; at != ""; at = via[at] {
						path = append([]string{at}, path...)
					}
					t.Errorf("%s reaches %s: %s", p, b, strings.Join(path, " -> "))
				}
			}
			if roots[cur] {
				continue
			}
			for _, next := range imports[cur] {
				if _, seen := via[next]; !seen && strings.HasPrefix(next, mod) {
					via[next] = cur
					queue = append(queue, next)
				}
			}
		}
	}
}

// TestRuntimeDeps keeps the daemon's side of the sandbox apart from the
// sandbox's side: package sandbox talks to init over the descriptors and
// status values of package spec, and to the agent over agentproto, never
// by linking their code.
func TestRuntimeDeps(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go tool")
	}
	cmd := exec.Command("go", "list", "-deps", "./internal/sandbox")
	cmd.Dir = moduleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./internal/sandbox: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, b := range []string{"github.com/warrenhq/warren/internal/nsinit", "github.com/warrenhq/warren/internal/agent"} {
			if dep == b {
				t.Errorf("./internal/sandbox depends on %s", dep)
			}
		}
	}
}
