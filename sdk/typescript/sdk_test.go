package sdktypescript

import (
	"bytes"
	"context"
	"io"
	"net"
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
	"github.com/warrenhq/warren/internal/network/nettest"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.SandboxMain()
	os.Exit(m.Run())
}

// needs skips the test unless node and the npm packages are there.
func needs(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("needs node (.ci/run installs it)")
	}
	for _, pkg := range []string{"typescript", "openapi-typescript", "ws", "ai", "@langchain/core", "@openai/agents-core", "zod", "typedoc"} {
		if _, err := os.Stat(filepath.Join("node_modules", pkg, "package.json")); err != nil {
			t.Skipf("needs the npm package %s: run npm ci in sdk/typescript (make test does)", pkg)
		}
	}
	return node
}

// runner runs node scripts in this directory against a daemon.
type runner struct {
	t    *testing.T
	ctx  context.Context
	node string
	env  []string
}

func (r *runner) run(what string, args ...string) string {
	r.t.Helper()
	cmd := exec.CommandContext(r.ctx, r.node, args...)
	cmd.Env = append(os.Environ(), r.env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("%s: %v\n%s", what, err, out)
	}
	r.t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
	return string(out)
}

// build compiles src/ into dist/ (git-ignored) with tsc --strict, and the
// examples into dist-examples/.
func build(r *runner) {
	r.t.Helper()
	tsc := filepath.Join("node_modules", "typescript", "bin", "tsc")
	r.run("tsc", tsc, "-p", "tsconfig.json")
	r.run("tsc examples", tsc, "-p", "tsconfig.examples.json")
}

// TestSDK is the whole SDK against one daemon.
func TestSDK(t *testing.T) {
	node := needs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	r := &runner{t: t, ctx: ctx, node: node}

	t.Run("types match api/openapi.yaml", func(t *testing.T) {
		gen := filepath.Join(t.TempDir(), "openapi.ts")
		(&runner{t: t, ctx: ctx, node: node}).run("openapi-typescript",
			filepath.Join("node_modules", "openapi-typescript", "bin", "cli.js"), filepath.Join("..", "..", "api", "openapi.yaml"), "-o", gen)
		want, err := os.ReadFile(gen)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("src", "openapi.ts"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("src/openapi.ts is not what openapi-typescript makes of api/openapi.yaml: run npm run gen in sdk/typescript")
		}
	})

	build(r)
	// Sessions' egress goes through a namespace of the test's own into a
	// fake internet (names *.test), so that the network policy is exercised
	// for real and no other daemon on the host is in the way.
	world := nettest.NewWorld(t)
	// The origin of the browser test's page, listed in cors_origins as an
	// operator lists a web app's.
	page, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pageOrigin := "http://" + page.Addr().String()
	h := daemontest.Start(t, func(c *config.Config) {
		c.Network.NetNS = world.HostPath
		c.Network.DNSUpstream = []string{nettest.UpstreamAddr}
		c.CORSOrigins = []string{pageOrigin}
	})
	// A second daemon whose keys may make one call a second (bursts of 3),
	// for the rate-limit test: on the first, with the default 200/s, whether
	// a burst of calls is limited depends on how fast the machine is.
	limited := daemontest.Start(t, func(c *config.Config) { c.Auth.RateLimit, c.Auth.RateBurst = 1, 3 })
	r.env = []string{"WARREN_URL=" + h.URL, "WARREN_KEY=" + h.AdminKey, "WARREN_FAKE_INTERNET=1",
		"WARREN_LIMITED_URL=" + limited.URL, "WARREN_LIMITED_KEY=" + limited.AdminKey}

	t.Run("node --test", func(t *testing.T) {
		rr := &runner{t: t, ctx: ctx, node: node, env: r.env}
		out := rr.run("node --test", "--test", "--test-concurrency=1", "--test-reporter=spec",
			filepath.Join("test", "sdk.test.mjs"), filepath.Join("test", "adapters.test.mjs"))
		t.Logf("%s", out)
		// A skip must never read as a pass: name each one.
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "﹣") || strings.Contains(line, "# SKIP") {
				t.Logf("skipped: %s", strings.TrimSpace(line))
			}
		}
	})

	t.Run("browser", func(t *testing.T) {
		browser(t, ctx, page, pageOrigin, h)
	})

	t.Run("README quick start", func(t *testing.T) {
		b, err := os.ReadFile("README.md")
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile("(?s)<!-- quickstart -->\\s*```js\\n(.*?)```").FindSubmatch(b)
		if m == nil {
			t.Fatal("README.md has no ```js block after <!-- quickstart -->")
		}
		// Inside the package, so that "@warren/sdk" resolves to it (a
		// package's own name resolves through its exports).
		f := filepath.Join("dist", "readme-quickstart.mjs")
		if err := os.WriteFile(f, m[1], 0o644); err != nil {
			t.Fatal(err)
		}
		out := (&runner{t: t, ctx: ctx, node: node, env: r.env}).run("quick start", f)
		if !strings.Contains(out, "hello from warren") {
			t.Fatalf("quick start printed:\n%s", out)
		}
		t.Logf("%s", out)
	})

	t.Run("examples", func(t *testing.T) {
		for _, ex := range []string{"fix-failing-test", "serve-web-app", "fork-best-of-n"} {
			out := (&runner{t: t, ctx: ctx, node: node, env: r.env}).run(ex, filepath.Join("dist-examples", ex+".js"))
			t.Logf("%s:\n%s", ex, out)
		}
	})

	t.Run("typedoc", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "api")
		(&runner{t: t, ctx: ctx, node: node}).run("typedoc",
			filepath.Join("node_modules", "typedoc", "bin", "typedoc"), "--out", out, "--treatWarningsAsErrors")
		if _, err := os.Stat(filepath.Join(out, "classes", "index.Warren.html")); err != nil {
			t.Fatalf("typedoc made no page for Warren: %v", err)
		}
	})

	t.Run("benchmark", func(t *testing.T) {
		out := (&runner{t: t, ctx: ctx, node: node, env: r.env}).run("bench", filepath.Join("bench", "bench.mjs"))
		t.Logf("%s", strings.TrimSpace(out))
	})

	// Every session the SDK created was deleted by the tests.
	ss, err := h.Client.ListSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) > 0 {
		t.Errorf("%d session(s) left behind, such as %s", len(ss), ss[0].ID)
	}
}

// browser runs test/browser.html in headless Chromium: the SDK's ESM files
// as tsc makes them, loaded by a page of another origin (listed in the
// daemon's cors_origins) that holds a token, not a key. The page POSTs its
// result to /result of the server that serves it.
func browser(t *testing.T, ctx context.Context, page net.Listener, origin string, h *daemontest.Harness) {
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		page.Close()
		t.Skip("needs chromium (Debian's chromium package) to run the SDK in a browser")
	}
	result := make(chan string, 1)
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(".")))
	mux.HandleFunc("POST /result", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		select {
		case result <- string(b):
		default:
		}
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(page)
	defer srv.Close()

	tok, err := h.Client.CreateToken(ctx, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	u := origin + "/test/browser.html?url=" + h.URL + "&token=" + tok.Token
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+t.TempDir(), u)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	select {
	case got := <-result:
		if !strings.HasPrefix(got, "RESULT ok ") {
			t.Fatalf("in the browser: %s", got)
		}
		t.Logf("in the browser: %s", got)
	case <-cctx.Done():
		t.Fatalf("the page reported nothing in 90 s; chromium said:\n%s", logs.String())
	}
}
