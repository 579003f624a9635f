package daemon_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/httpapi"
)

// TestBusyPortCreatesNothing starts a daemon on a port another program
// holds: it must fail on the bind before it creates the data directory,
// and so before it makes (and the CLI prints) a first admin key that no
// daemon would ever serve.
func TestBusyPortCreatesNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := config.Default()
	cfg.Listen = busy.Addr().String()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.CgroupParent = "warren-test-busyport"
	cfg.CgroupFavorDynMods = false
	d, err := daemon.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		d.Shutdown()
		t.Fatal("New on a busy port succeeded")
	}
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "listen on "+cfg.Listen) {
		t.Errorf("New on a busy port: %v, want listen on %s: ...address already in use", err, cfg.Listen)
	}
	if _, err := os.Stat(cfg.DataDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the failed start left its data directory (stat: %v); it must bind before it writes anything", err)
	}
}

// TestImportBrokenShell imports, over REST, the rootfs that
// "busybox --install -s" makes: links to the host path of busybox. The
// daemon refuses it with 400 invalid_argument naming the link, where it
// used to accept it and fail every command with "session shell: start
// /bin/sh: no such file or directory".
func TestImportBrokenShell(t *testing.T) {
	h := daemontest.Start(t, nil)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, hd := range []tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: 1},
		{Name: "bin/sh", Typeflag: tar.TypeSymlink, Linkname: "/root/rootfs/bin/busybox"},
	} {
		if err := tw.WriteHeader(&hd); err != nil {
			t.Fatal(err)
		}
		tw.Write(make([]byte, hd.Size))
	}
	tw.Close()
	_, err := h.Client.ImportImage(t.Context(), "busybox", &buf)
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 400 || e.Code != "invalid_argument" ||
		!strings.Contains(e.Message, "/bin/sh -> /root/rootfs/bin/busybox") {
		t.Fatalf("import of an image with a host-absolute /bin/sh: %v, want 400 invalid_argument naming the link", err)
	}
	if _, err := h.Client.GetImage(t.Context(), "busybox"); !client.IsNotFound(err) {
		t.Errorf("the refused image is there: %v", err)
	}
}

// TestIndexPage opens the daemon's root as a browser would, without a key:
// a small HTML page with the version and links to the API description and
// the docs, where it used to be a JSON 404. Other unknown paths still get
// the JSON envelope.
func TestIndexPage(t *testing.T) {
	h := daemontest.Start(t, nil)
	get := func(path, accept string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", h.URL+path, nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("/", "text/html,application/xhtml+xml,*/*;q=0.8")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s, want 200 text/html", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{"<title>warren " + daemon.Version, `href="/openapi.yaml"`, `href="` + httpapi.DocsURL + `"`, h.URL + "/v1/sessions"} {
		if !strings.Contains(body, want) {
			t.Errorf("GET / lacks %q:\n%s", want, body)
		}
	}
	resp, body = get("/", "application/json")
	var doc map[string]string
	if err := json.Unmarshal([]byte(body), &doc); resp.StatusCode != 200 || err != nil || doc["openapi"] != "/openapi.yaml" || doc["version"] != daemon.Version {
		t.Errorf("GET / as JSON = %d %s", resp.StatusCode, body)
	}
	resp, body = get("/nope", "text/html")
	if resp.StatusCode != 404 || !strings.Contains(body, `"code":"not_found"`) {
		t.Errorf("GET /nope = %d %s, want the 404 envelope", resp.StatusCode, body)
	}
}
