package console

import (
	"archive/tar"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.SandboxMain()
	os.Exit(m.Run())
}

// browser finds Debian's chromium (or another the CHROMIUM variable
// names), or skips saying what is missing.
func browser(t *testing.T) (node, chromium string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("needs node (.ci/run installs it)")
	}
	chromium = os.Getenv("CHROMIUM")
	if chromium == "" {
		for _, name := range []string{"chromium", "chromium-browser"} {
			if p, err := exec.LookPath(name); err == nil {
				chromium = p
				break
			}
		}
	}
	if chromium == "" {
		t.Skip("needs Debian's chromium (apt-get install chromium; .ci/run installs it) or CHROMIUM=/path/to/chrome")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "playwright-core", "package.json")); err != nil {
		t.Skip("needs the npm package playwright-core: run npm ci in test/console (make test does)")
	}
	return node, chromium
}

// TestConsole drives the console as a user would (e2e.mjs): sign in with
// a bad key and a good one, create a session, type echo hi in its terminal
// and see hi, resize the page and see the shell's size follow, attach a
// second viewer and reattach after a reload, upload files by the file
// input and by drag and drop and read them through exec, view, edit,
// download and delete files, follow a process's log across a reload, open
// every page at two sizes under the strict CSP without a violation, check
// that a key of another tenant sees none of the sessions and that a page
// of another origin (another loopback port, the same site) cannot act with
// the cookie, delete the session, and sign out and see the old cookie
// refused.
func TestConsole(t *testing.T) {
	node, chromium := browser(t)
	h := daemontest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	other, err := h.Client.CreateKey(ctx, &api.CreateKeyRequest{Tenant: "other", Name: "console-test"})
	if err != nil {
		t.Fatal(err)
	}
	shots, err := filepath.Abs("screenshots")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, "e2e.mjs")
	cmd.Env = append(os.Environ(),
		"WARREN_URL="+h.URL, "WARREN_KEY="+h.AdminKey, "WARREN_OTHER_KEY="+other.Secret,
		"WARREN_PULL_REF="+pushTestImage(t), "WARREN_IMPORT_TAR="+rootfsTar(t),
		"CHROMIUM="+chromium, "SHOTS="+shots)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("e2e.mjs (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("e2e.mjs: %v", err)
	}
	t.Logf("screenshots in %s", shots)
}

// TestConsoleFirefox runs the part of the console a browser engine can
// break in Firefox (firefox.mjs): Debian's firefox-esr over WebDriver BiDi
// signs in, creates a session, types echo hi in its terminal and sees hi,
// and renders the pages under the strict CSP without a violation.
func TestConsoleFirefox(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("needs node (.ci/run installs it)")
	}
	firefox := os.Getenv("FIREFOX")
	if firefox == "" {
		if firefox, err = exec.LookPath("firefox-esr"); err != nil {
			t.Skip("needs Debian's firefox-esr (apt-get install firefox-esr; .ci/run installs it) or FIREFOX=/path/to/firefox")
		}
	}
	// WebSocket is global from node 22; node 20 has it behind a flag.
	var flags []string
	if v, err := exec.Command(node, "--version").Output(); err == nil {
		major, _ := strconv.Atoi(strings.TrimPrefix(strings.Split(strings.TrimSpace(string(v)), ".")[0], "v"))
		if major < 22 {
			flags = append(flags, "--experimental-websocket")
		}
	}
	h := daemontest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	shots, err := filepath.Abs("screenshots")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, append(flags, "firefox.mjs")...)
	// Firefox keeps its profile and caches under HOME: a test's own.
	cmd.Env = append(os.Environ(), "WARREN_URL="+h.URL, "WARREN_KEY="+h.AdminKey,
		"FIREFOX="+firefox, "SHOTS="+shots, "HOME="+t.TempDir())
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("firefox.mjs (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("firefox.mjs: %v", err)
	}
}

// pushTestImage serves an in-process registry on loopback with a small
// image of two random layers for the images page to pull, and returns its
// reference.
func pushTestImage(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	img, err := random.Image(256<<10, 2)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	ref := strings.TrimPrefix(srv.URL, "http://") + "/console/tiny:1"
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

// rootfsTar writes a small root filesystem (testutil's busybox one) as a
// tar for the images page to import, and returns its path.
func rootfsTar(t *testing.T) string {
	t.Helper()
	root := testutil.BusyboxRootfs(t)
	p := filepath.Join(t.TempDir(), "rootfs.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(root)); err != nil {
		t.Fatalf("tar %s: %v", root, err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}
