package image

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/warrenhq/warren/internal/errdefs"
)

// layerOf is a layer holding the tar of ents (compressed by ggcr when
// pushed).
func layerOf(t testing.TB, ents ...entry) v1.Layer {
	t.Helper()
	b := makeTar(t, ents...)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// ociImage builds an image of layers (bottom first) for platform with
// config c.
func ociImage(t testing.TB, platform string, c v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config = c
	if platform != "" {
		p, err := v1.ParsePlatform(platform)
		if err != nil {
			t.Fatal(err)
		}
		cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// hostPlatform is the platform ParsePlatform("") gives.
func hostPlatform(t testing.TB) string {
	t.Helper()
	p, err := ParsePlatform("")
	if err != nil {
		t.Fatal(err)
	}
	return p.String()
}

// layeredImage is an image of three layers with a whiteout, an opaque
// directory, a hard link to a lower layer's file and a symlink over a
// lower layer's directory.
func layeredImage(t testing.TB, platform string) v1.Image {
	t.Helper()
	base := layerOf(t,
		entry{name: "etc/", typ: tar.TypeDir},
		entry{name: "etc/a", body: "a"},
		entry{name: "etc/b", body: "b", uid: 7, gid: 8, mode: 0o640},
		entry{name: "opt/", typ: tar.TypeDir, mode: 0o750},
		entry{name: "opt/x/", typ: tar.TypeDir},
		entry{name: "opt/x/1", body: "1"},
		entry{name: "opt/x/2", body: "2"},
		entry{name: "lib/", typ: tar.TypeDir},
		entry{name: "lib/old", body: "old"},
		entry{name: "dev/null", typ: tar.TypeChar},
	)
	mid := layerOf(t,
		entry{name: "etc/c", body: "c"},
		entry{name: "usr/", typ: tar.TypeDir},
		entry{name: "usr/lib/", typ: tar.TypeDir},
		entry{name: "usr/lib/new", body: "new"},
	)
	top := layerOf(t,
		entry{name: "etc/.wh.a", body: ""},
		entry{name: "opt/x/.wh..wh..opq", body: ""},
		entry{name: "opt/x/3", body: "3"},
		entry{name: "etc/hl", typ: tar.TypeLink, link: "etc/b"},
		entry{name: "lib", typ: tar.TypeSymlink, link: "usr/lib"},
	)
	return ociImage(t, platform, v1.Config{
		Env:        []string{"PATH=/bin", "GREETING=hello world"},
		WorkingDir: "/opt/x",
		User:       "app",
		Entrypoint: []string{"/bin/sh", "-c"},
		Cmd:        []string{"echo hi"},
	}, base, mid, top)
}

// wantLayered is what layeredImage flattens to (see snapshot).
func wantLayered() map[string]string {
	return map[string]string{
		".":           "d 0755 0:0",
		"etc":         "d 0755 0:0",
		"etc/b":       "f 0640 7:8 b",
		"etc/c":       "f 0644 0:0 c",
		"etc/hl":      "f 0640 7:8 b",
		"lib":         "l 0777 0:0 -> usr/lib",
		"opt":         "d 0750 0:0",
		"opt/x":       "d 0755 0:0",
		"opt/x/3":     "f 0644 0:0 3",
		"usr":         "d 0755 0:0",
		"usr/lib":     "d 0755 0:0",
		"usr/lib/new": "f 0644 0:0 new",
	}
}

// newRegistry serves an in-process registry on loopback and returns its
// host:port.
func newRegistry(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func push(t testing.TB, ref string, img v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

// anonymous is a keychain without credentials: tests do not read the
// host's Docker config.
var anonymous = authn.NewMultiKeychain()

func TestPullLayeredImage(t *testing.T) {
	s := newStore(t)
	reg := newRegistry(t, nil)
	push(t, reg+"/test/layered:v1", layeredImage(t, hostPlatform(t)))

	var mu sync.Mutex
	var steps []Progress
	img, err := s.Pull(t.Context(), reg+"/test/layered:v1", PullOptions{Keychain: anonymous, Progress: func(p Progress) {
		mu.Lock()
		steps = append(steps, p)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	if img.Name != "layered:v1" {
		t.Errorf("Name = %q, want the default layered:v1", img.Name)
	}
	if diff := cmp.Diff(wantLayered(), snapshot(t, img.RootFS)); diff != "" {
		t.Errorf("rootfs (-want +got):\n%s", diff)
	}
	want := &Image{
		Env:        []string{"PATH=/bin", "GREETING=hello world", "HOME=/root"},
		WorkingDir: "/opt/x",
		User:       "app",
		Entrypoint: []string{"/bin/sh", "-c"},
		Cmd:        []string{"echo hi"},
		Source:     reg + "/test/layered:v1",
		Platform:   hostPlatform(t),
		Layers:     3,
	}
	got := &Image{Env: img.Env, WorkingDir: img.WorkingDir, User: img.User, Entrypoint: img.Entrypoint, Cmd: img.Cmd,
		Source: img.Source, Platform: img.Platform, Layers: img.Layers}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(img.RepoDigest, reg+"/test/layered@sha256:") || !strings.HasPrefix(img.ImageID, "sha256:") {
		t.Errorf("RepoDigest = %q, ImageID = %q", img.RepoDigest, img.ImageID)
	}
	// Every layer was waited for, downloaded and reported done, with its
	// size; the whole image was resolved and extracted.
	done := map[int]bool{}
	var statuses []string
	for _, p := range steps {
		if p.Layer == 0 {
			statuses = append(statuses, p.Status)
		}
		if p.Status == "downloaded" {
			if p.Current != p.Total || p.Total <= 0 || p.Layers != 3 {
				t.Errorf("downloaded %+v: want Current = Total > 0 of 3 layers", p)
			}
			done[p.Layer] = true
		}
	}
	if len(done) != 3 {
		t.Errorf("layers reported downloaded: %v, want 1..3 (steps %+v)", done, steps)
	}
	if diff := cmp.Diff([]string{"resolving", "extracting", "storing"}, statuses); diff != "" {
		t.Errorf("image steps (-want +got):\n%s", diff)
	}
	checkTmpEmpty(t, s)

	// A second pull, under another name, reuses the content.
	steps = nil
	again, err := s.Pull(t.Context(), reg+"/test/layered:v1", PullOptions{Name: "other", Keychain: anonymous, Progress: func(p Progress) { steps = append(steps, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != img.Digest || len(dirNames(t, s.blobsDir())) != 1 {
		t.Errorf("second pull: digest %s (want %s), blobs %q", again.Digest, img.Digest, dirNames(t, s.blobsDir()))
	}
	if len(steps) == 0 || steps[len(steps)-1].Status != "exists" {
		t.Errorf("second pull steps = %+v, want to end with exists", steps)
	}
}

func TestPullPlatform(t *testing.T) {
	s := newStore(t)
	reg := newRegistry(t, nil)
	amd := ociImage(t, "linux/amd64", v1.Config{}, layerOf(t, entry{name: "arch", body: "amd64"}))
	arm := ociImage(t, "linux/arm64/v8", v1.Config{}, layerOf(t, entry{name: "arch", body: "arm64"}))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}}},
	)
	r, err := name.ParseReference(reg + "/multi/arch")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ platform, want string }{
		{"linux/amd64", "amd64"},
		{"linux/arm64", "arm64"},
		{"linux/arm64/v8", "arm64"},
	} {
		img, err := s.Pull(t.Context(), reg+"/multi/arch", PullOptions{Name: "m", Platform: tc.platform, Keychain: anonymous})
		if err != nil {
			t.Fatalf("Pull(%s): %v", tc.platform, err)
		}
		b, err := os.ReadFile(filepath.Join(img.RootFS, "arch"))
		if err != nil || string(b) != tc.want {
			t.Errorf("Pull(%s): arch = %q, %v; want %q", tc.platform, b, err, tc.want)
		}
		if img.Name != "m" || !strings.HasPrefix(img.Platform, tc.platform) {
			t.Errorf("Pull(%s) = name %q platform %q", tc.platform, img.Name, img.Platform)
		}
	}
	_, err = s.Pull(t.Context(), reg+"/multi/arch", PullOptions{Platform: "linux/s390x", Keychain: anonymous})
	if !errdefs.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "linux/arm64/v8") {
		t.Errorf("Pull(linux/s390x) = %v, want not_found naming the platforms there are", err)
	}
	// A single-platform image for another platform is refused.
	push(t, reg+"/single/arm", arm)
	if _, err := s.Pull(t.Context(), reg+"/single/arm", PullOptions{Platform: "linux/amd64", Keychain: anonymous}); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Pull of an arm64 image for amd64 = %v, want invalid_argument", err)
	}
	checkTmpEmpty(t, s)
}

func TestPullErrors(t *testing.T) {
	s := newStore(t)
	reg := newRegistry(t, nil)
	img := ociImage(t, "", v1.Config{}, layerOf(t, entry{name: "f", body: "the real content"}))
	push(t, reg+"/ok/img", img)
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()

	// A registry that serves another blob for the layer.
	evil := newRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+ld.String()) {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				b := rec.Body.Bytes()
				b[len(b)/2] ^= 0xff
				w.WriteHeader(rec.Code)
				w.Write(b)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	push(t, evil+"/ok/img", img)
	closed := httptest.NewServer(http.NotFoundHandler())
	closedAddr := strings.TrimPrefix(closed.URL, "http://")
	closed.Close()

	for _, tc := range []struct {
		ref  string
		opts PullOptions
		want *errdefs.Class
	}{
		{"", PullOptions{}, errdefs.ErrInvalidArgument},
		{"UPPER/case", PullOptions{}, errdefs.ErrInvalidArgument},
		{reg + "/ok/img", PullOptions{Name: "Bad Name"}, errdefs.ErrInvalidArgument},
		{reg + "/ok/img", PullOptions{Name: BaseName}, errdefs.ErrInvalidArgument},
		{reg + "/ok/img", PullOptions{Platform: "linux"}, errdefs.ErrInvalidArgument},
		{reg + "/missing/img", PullOptions{}, errdefs.ErrNotFound},
		{reg + "/ok/img:nope", PullOptions{}, errdefs.ErrNotFound},
		{closedAddr + "/ok/img", PullOptions{}, errdefs.ErrUnavailable},
		{evil + "/ok/img", PullOptions{}, errdefs.ErrInvalidArgument},
	} {
		tc.opts.Keychain = anonymous
		_, err := s.Pull(t.Context(), tc.ref, tc.opts)
		if !errdefs.Is(err, tc.want) {
			t.Errorf("Pull(%q, %+v) = %v (%v), want %v", tc.ref, tc.opts, err, errdefs.ClassOf(err), tc.want)
		}
	}
	if got := dirNames(t, s.blobsDir()); len(got) != 0 {
		t.Errorf("blobs = %q after failed pulls", got)
	}
	checkTmpEmpty(t, s)

	// The import limit covers the download.
	s.MaxImportBytes = 8
	if _, err := s.Pull(t.Context(), reg+"/ok/img", PullOptions{Keychain: anonymous}); !errdefs.Is(err, errdefs.ErrTooLarge) {
		t.Errorf("Pull over the limit = %v, want too_large", err)
	}
	checkTmpEmpty(t, s)
}

func TestDefaultName(t *testing.T) {
	for ref, want := range map[string]string{
		"python":                       "python",
		"python:3.12-slim":             "python:3.12-slim",
		"python:latest":                "python",
		"library/python:3":             "python:3",
		"ghcr.io/org/tool:v1.2":        "tool:v1.2",
		"localhost:5000/a/b/c":         "c",
		"busybox@sha256:" + digest64(): "busybox",
	} {
		r, err := ParseReference(ref)
		if err != nil {
			t.Fatalf("ParseReference(%q): %v", ref, err)
		}
		if got := DefaultName(r); got != want {
			t.Errorf("DefaultName(%q) = %q, want %q", ref, got, want)
		}
		if err := ValidName(want); err != nil {
			t.Errorf("ValidName(%q) = %v", want, err)
		}
	}
	r, _ := ParseReference("python:3.12-slim")
	if got := r.Name(); got != "index.docker.io/library/python:3.12-slim" {
		t.Errorf("python:3.12-slim is %q, want the Docker Hub library image", got)
	}
}

func digest64() string { return strings.Repeat("ab", 32) }

func TestImportOCILayout(t *testing.T) {
	s := newStore(t)
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	// Two images: only the host's platform is picked.
	other := "linux/arm64"
	if hostPlatform(t) == other {
		other = "linux/amd64"
	}
	if err := lp.AppendImage(ociImage(t, other, v1.Config{}, layerOf(t, entry{name: "wrong", body: "x"}))); err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(layeredImage(t, hostPlatform(t))); err != nil {
		t.Fatal(err)
	}
	img, err := s.ImportOCILayout(t.Context(), "fromlayout", bytes.NewReader(gzipBytes(t, tarDir(t, dir))), "")
	if err != nil {
		t.Fatalf("ImportOCILayout: %v", err)
	}
	if diff := cmp.Diff(wantLayered(), snapshot(t, img.RootFS)); diff != "" {
		t.Errorf("rootfs (-want +got):\n%s", diff)
	}
	if img.Source != "oci-layout" || img.User != "app" || img.Layers != 3 {
		t.Errorf("image = %+v", img)
	}
	// The other one, by its platform.
	img, err = s.ImportOCILayout(t.Context(), "fromlayout", bytes.NewReader(tarDir(t, dir)), other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(img.RootFS, "wrong")); err != nil {
		t.Errorf("the %s image: %v", other, err)
	}

	// A layout smuggling a symlink (the daemon reads the layout's files
	// back) is refused, as is something that is no layout.
	withLink := makeTar(t, entry{name: "index.json", typ: tar.TypeSymlink, link: "/etc/passwd"})
	for _, bad := range [][]byte{withLink, makeTar(t, entry{name: "hello", body: "x"})} {
		if _, err := s.ImportOCILayout(t.Context(), "bad", bytes.NewReader(bad), ""); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ImportOCILayout(bad) = %v, want invalid_argument", err)
		}
	}
	checkTmpEmpty(t, s)
}

func TestImportDockerArchive(t *testing.T) {
	s := newStore(t)
	tag, err := name.NewTag("example.com/layered:1")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tarball.Write(tag, layeredImage(t, hostPlatform(t)), &buf); err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{buf.Bytes(), gzipBytes(t, buf.Bytes())} {
		img, err := s.ImportDockerArchive(t.Context(), "fromdocker", bytes.NewReader(data), "")
		if err != nil {
			t.Fatalf("ImportDockerArchive: %v", err)
		}
		if diff := cmp.Diff(wantLayered(), snapshot(t, img.RootFS)); diff != "" {
			t.Errorf("rootfs (-want +got):\n%s", diff)
		}
		if img.Source != "docker-archive" || img.WorkingDir != "/opt/x" {
			t.Errorf("image = %+v", img)
		}
	}
	if _, err := s.ImportDockerArchive(t.Context(), "bad", bytes.NewReader(makeTar(t, entry{name: "x", body: "y"})), ""); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("ImportDockerArchive(no manifest) = %v, want invalid_argument", err)
	}
	s.MaxImportBytes = 100
	if _, err := s.ImportDockerArchive(t.Context(), "big", bytes.NewReader(buf.Bytes()), ""); !errdefs.Is(err, errdefs.ErrTooLarge) {
		t.Errorf("ImportDockerArchive over the limit = %v, want too_large", err)
	}
	checkTmpEmpty(t, s)
}

func TestConfigOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   v1.Config
		want config
		ok   bool
	}{
		{"empty", v1.Config{}, config{Env: []string{"PATH=" + defaultPath, "HOME=/root"}}, true},
		{"relative workdir", v1.Config{Env: []string{"PATH=/x", "HOME=/h"}, WorkingDir: "app/../src"}, config{Env: []string{"PATH=/x", "HOME=/h"}, WorkingDir: "/src"}, true},
		{"env without =", v1.Config{Env: []string{"FOO"}}, config{}, false},
		{"env with NUL", v1.Config{Env: []string{"A=b\x00c"}}, config{}, false},
		{"user with newline", v1.Config{User: "a\nb"}, config{}, false},
		{"cmd with NUL", v1.Config{Cmd: []string{"a\x00"}}, config{}, false},
		{"huge env", v1.Config{Env: []string{"A=" + strings.Repeat("x", maxConfigBytes)}}, config{}, false},
	} {
		got, err := configOf(&v1.ConfigFile{Config: tc.in})
		if tc.ok != (err == nil) {
			t.Errorf("%s: configOf = %v, want ok %v", tc.name, err, tc.ok)
			continue
		}
		if !tc.ok {
			if !errdefs.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("%s: configOf = %v, want invalid_argument", tc.name, err)
			}
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: configOf (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestLeases(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	old, err := s.ImportTar(ctx, "py", bytes.NewReader(makeTar(t, entry{name: "v", body: "1"})))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Acquire("sb1", "py")
	if err != nil || got.Digest != old.Digest {
		t.Fatalf("Acquire(sb1, py) = %v, %v", got, err)
	}
	if _, err := s.Acquire("sb2", "nope"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Acquire(nope) = %v, want not_found", err)
	}
	// The name moves on and goes: the leased content stays.
	if _, err := s.ImportTar(ctx, "py", bytes.NewReader(makeTar(t, entry{name: "v", body: "2"}))); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("py"); err != nil {
		t.Fatal(err)
	}
	res, err := s.Prune()
	if err != nil || len(res.Deleted) != 1 || res.Bytes != 1 || slices.Contains(res.Deleted, old.Digest) {
		t.Fatalf("Prune = %+v, %v; want only the new content (1 byte) deleted", res, err)
	}
	// The holder gets its content back even though the name is gone,
	// also after a restart.
	s2, err := Open(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s2.Acquire("sb1", "py")
	if err != nil || again.Digest != old.Digest {
		t.Fatalf("Acquire after reopen = %v, %v; want the leased %s", again, err, old.Digest)
	}
	if err := s2.RetainLeases(func(h string) bool { return h != "sb1" }); err != nil {
		t.Fatal(err)
	}
	res, err = s2.Prune()
	if err != nil || !slices.Equal(res.Deleted, []string{old.Digest}) {
		t.Errorf("Prune after the lease ended = %+v, %v; want %s", res, err, old.Digest)
	}
	if err := s2.Release("sb1"); err != nil {
		t.Errorf("Release of an ended lease = %v", err)
	}
	// A torn leases.json is no leases.
	if err := os.WriteFile(s2.leasesFile(), []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(s.dir); err != nil {
		t.Errorf("Open with a torn leases.json: %v", err)
	}
}

// TestAcquireDigest: a lease by digest keeps content that no name points
// to any more, and content that is gone is not found by its digest.
func TestAcquireDigest(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	old, err := s.ImportTar(ctx, "py", bytes.NewReader(makeTar(t, entry{name: "v", body: "1"})))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ImportTar(ctx, "py", bytes.NewReader(makeTar(t, entry{name: "v", body: "22"}))); err != nil {
		t.Fatal(err)
	}
	// The name moved on; the old content is still stored, and found by
	// its digest alone.
	got, err := s.AcquireDigest("snapshot:n1", old.Digest)
	if err != nil || got.Digest != old.Digest || got.Name != "" || got.RootFS != old.RootFS {
		t.Fatalf("AcquireDigest(snapshot:n1, old) = %+v, %v; want %s, no name", got, err, old.Digest)
	}
	if d, ok := s.Lease("snapshot:n1"); !ok || d != old.Digest {
		t.Errorf("Lease(snapshot:n1) = %q, %v; want %s", d, ok, old.Digest)
	}
	if _, err := s.AcquireDigest("snapshot:n1", old.Digest); err != nil {
		t.Errorf("AcquireDigest again = %v, want it idempotent", err)
	}
	other, err := s.Get("py")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireDigest("snapshot:n1", other.Digest); !errdefs.Is(err, errdefs.ErrConflict) {
		t.Errorf("AcquireDigest of other content for the same holder = %v, want conflict", err)
	}
	for _, d := range []string{"", "sha256:x", "sha256:" + strings.Repeat("A", 64), "md5:" + strings.Repeat("0", 64)} {
		if _, err := s.AcquireDigest("h", d); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("AcquireDigest(%q) = %v, want invalid_argument", d, err)
		}
	}
	if err := s.Remove("py"); err != nil {
		t.Fatal(err)
	}
	res, err := s.Prune()
	if err != nil || !slices.Equal(res.Deleted, []string{other.Digest}) {
		t.Fatalf("Prune = %+v, %v; want only %s deleted", res, err, other.Digest)
	}
	// Content that is gone is not found, and the error names its digest.
	_, err = s.AcquireDigest("snapshot:n2", other.Digest)
	if !errdefs.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), other.Digest) {
		t.Errorf("AcquireDigest of pruned content = %v, want not_found naming %s", err, other.Digest)
	}
	if _, ok := s.Lease("snapshot:n2"); ok {
		t.Error("a failed AcquireDigest left a lease")
	}
	// The lease survives a restart, and its release frees the content.
	s2, err := Open(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := s2.Lease("snapshot:n1"); !ok || d != old.Digest {
		t.Errorf("Lease after reopen = %q, %v; want %s", d, ok, old.Digest)
	}
	if err := s2.Release("snapshot:n1"); err != nil {
		t.Fatal(err)
	}
	res, err = s2.Prune()
	if err != nil || !slices.Equal(res.Deleted, []string{old.Digest}) {
		t.Errorf("Prune after Release = %+v, %v; want %s", res, err, old.Digest)
	}
}
