package daemon_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/testutil"
)

// tarEntry is one entry of a test layer.
type tarEntry struct {
	name     string
	typ      byte // 0: a regular file
	mode     int64
	uid, gid int
	body     string
}

// layerOf makes a layer of the tree at dir (owners kept) followed by ents.
func layerOf(t *testing.T, dir string, ents ...tarEntry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if dir != "" {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			var link string
			if fi.Mode()&fs.ModeSymlink != 0 {
				if link, err = os.Readlink(p); err != nil {
					return err
				}
			}
			hdr, err := tar.FileInfoHeader(fi, link)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			hdr.Name = filepath.ToSlash(rel)
			if fi.IsDir() {
				hdr.Name += "/"
			}
			hdr.Uname, hdr.Gname = "", ""
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if fi.Mode().IsRegular() {
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				defer f.Close()
				_, err = io.Copy(tw, f)
				return err
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range ents {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
			if typ == tar.TypeDir {
				mode = 0o755
			}
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Mode: mode, Uid: e.uid, Gid: e.gid, Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0)}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// busyboxImage is a three-layer image for the host's platform: busybox,
// then a user "app", a home and files, then a whiteout, an opaque
// directory and a new file. It runs as app in /app.
func busyboxImage(t *testing.T, marker string) v1.Image {
	t.Helper()
	rootfs := testutil.BusyboxRootfs(t) // skips without a static busybox
	base := layerOf(t, rootfs)
	users := layerOf(t, "",
		tarEntry{name: "etc/passwd", body: "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\n"},
		tarEntry{name: "etc/group", body: "root:x:0:\ntty:x:5:\napp:x:1000:\n"},
		tarEntry{name: "etc/gone", body: "whited out above"},
		tarEntry{name: "home/", typ: tar.TypeDir},
		tarEntry{name: "home/app/", typ: tar.TypeDir, uid: 1000, gid: 1000},
		tarEntry{name: "opt/x/", typ: tar.TypeDir},
		tarEntry{name: "opt/x/1", body: "hidden by the opaque dir"},
		tarEntry{name: "opt/x/2", body: "hidden by the opaque dir"},
	)
	top := layerOf(t, "",
		tarEntry{name: "etc/.wh.gone"},
		tarEntry{name: "opt/x/.wh..wh..opq"},
		tarEntry{name: "opt/x/3", body: marker},
		tarEntry{name: "app/", typ: tar.TypeDir, uid: 1000, gid: 1000},
	)
	img, err := mutate.AppendLayers(empty.Image, base, users, top)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = v1.Config{
		Env:        []string{"PATH=/bin:/usr/bin", "GREETING=hello"},
		WorkingDir: "/app",
		User:       "app",
		Cmd:        []string{"/bin/echo", "from", "the", "image"},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// testRegistry serves an in-process OCI registry on loopback.
func testRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func pushImage(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

// TestImagePullRunRemove pulls a multi-layer image with whiteouts from an
// in-process registry, runs sessions and a stateless run from it with the
// image's defaults, and removes it: refused while a session uses it, its
// content kept while a session runs from it after the name moved on.
func TestImagePullRunRemove(t *testing.T) {
	reg := testRegistry(t)
	pushImage(t, reg+"/test/bb:v1", busyboxImage(t, "v1"))
	pushImage(t, reg+"/test/bb:v2", busyboxImage(t, "v2"))
	h := daemontest.Start(t, nil)
	ctx := t.Context()
	c := h.Client

	downloaded := map[int]bool{}
	img, err := c.PullImage(ctx, &api.PullImageRequest{Ref: reg + "/test/bb:v1", Name: "bb"}, func(p api.PullProgress) error {
		if p.Status == "downloaded" {
			downloaded[p.Layer] = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	if len(downloaded) != 3 {
		t.Errorf("layers reported downloaded: %v, want 3", downloaded)
	}
	got, err := c.GetImage(ctx, "bb")
	if err != nil {
		t.Fatal(err)
	}
	want := api.Image{
		Name: "bb", Digest: img.Digest, Size: got.Size, CreatedAt: got.CreatedAt,
		Source: reg + "/test/bb:v1", RepoDigest: got.RepoDigest, ImageID: got.ImageID,
		Platform: "linux/" + runtime.GOARCH, Layers: 3,
		Env: []string{"PATH=/bin:/usr/bin", "GREETING=hello", "HOME=/root"}, WorkingDir: "/app", User: "app",
		Cmd: []string{"/bin/echo", "from", "the", "image"},
	}
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Errorf("GetImage (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(got.RepoDigest, reg+"/test/bb@sha256:") {
		t.Errorf("RepoDigest = %q", got.RepoDigest)
	}

	// A session of the image: its user, working directory and env, the
	// whiteout and the opaque directory applied.
	s, err := c.CreateSession(ctx, &api.CreateSessionRequest{Image: "bb", Env: map[string]string{"EXTRA": "x"}})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	if s.User != "app" || s.Cwd != "/app" {
		t.Errorf("session user %q cwd %q, want app in /app", s.User, s.Cwd)
	}
	script := `id -u; pwd; echo "$GREETING $EXTRA $HOME"; ls /opt/x; test -e /etc/gone || echo gone; cat /opt/x/3`
	res, err := c.Exec(ctx, s.ID, &api.ExecRequest{Command: script})
	if err != nil {
		t.Fatal(err)
	}
	if want := "1000\n/app\nhello x /home/app\n3\ngone\nv1"; res.ExitCode != 0 || res.Stdout != want {
		t.Errorf("exec = %d %q (stderr %q), want %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}
	// The request's own user, cwd and env win.
	root, err := c.CreateSession(ctx, &api.CreateSessionRequest{Image: "bb", User: "root", Cwd: "/tmp", Env: map[string]string{"GREETING": "bye"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err = c.Exec(ctx, root.ID, &api.ExecRequest{Command: `id -u; pwd; echo $GREETING`})
	if err != nil || res.Stdout != "0\n/tmp\nbye\n" {
		t.Errorf("exec as root = %+v, %v; want 0, /tmp, bye", res, err)
	}
	if err := c.DeleteSession(ctx, root.ID); err != nil {
		t.Fatal(err)
	}

	// A stateless run from the image.
	res, err = c.Run(ctx, &api.RunRequest{Image: "bb", ExecRequest: api.ExecRequest{Argv: []string{"sh", "-c", "id -un; pwd"}}})
	if err != nil || res.ExitCode != 0 || res.Stdout != "app\n/app\n" {
		t.Errorf("Run = %+v, %v; want app in /app", res, err)
	}

	// Removal is refused while the session uses the image, and names it.
	err = c.DeleteImage(ctx, "bb")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != "conflict" || !strings.Contains(ce.Message, "/"+s.ID) {
		t.Fatalf("DeleteImage while in use = %v, want a conflict naming %s", err, s.ID)
	}

	// The name moves to v2; the session still runs from v1, whose
	// content no prune removes while it does.
	if _, err := c.PullImage(ctx, &api.PullImageRequest{Ref: reg + "/test/bb:v2", Name: "bb"}, nil); err != nil {
		t.Fatal(err)
	}
	pr, err := c.PruneImages(ctx)
	if err != nil || len(pr.Deleted) != 0 {
		t.Errorf("PruneImages while v1 runs = %+v, %v; want nothing deleted", pr, err)
	}
	res, err = c.Exec(ctx, s.ID, &api.ExecRequest{Command: "cat /opt/x/3; ls /bin/busybox"})
	if err != nil || res.Stdout != "v1/bin/busybox\n" {
		t.Errorf("exec after the name moved = %+v, %v", res, err)
	}
	fresh, err := c.CreateSession(ctx, &api.CreateSessionRequest{Image: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	res, err = c.Exec(ctx, fresh.ID, &api.ExecRequest{Command: "cat /opt/x/3"})
	if err != nil || res.Stdout != "v2" {
		t.Errorf("a new session of bb reads %+v, %v; want v2", res, err)
	}

	// Once the sessions are gone: removal, then prune of both contents.
	for _, id := range []string{s.ID, fresh.ID} {
		if err := c.DeleteSession(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.DeleteImage(ctx, "bb"); err != nil {
		t.Fatalf("DeleteImage after the sessions: %v", err)
	}
	if _, err := c.GetImage(ctx, "bb"); !client.IsNotFound(err) {
		t.Errorf("GetImage after DeleteImage = %v, want not_found", err)
	}
	pr, err = c.PruneImages(ctx)
	if err != nil || len(pr.Deleted) != 2 || pr.ReclaimedBytes <= 0 {
		t.Errorf("PruneImages = %+v, %v; want v1 and v2 deleted", pr, err)
	}
	blobs, err := os.ReadDir(filepath.Join(h.DataDir, "images", "blobs"))
	if err != nil || len(blobs) != 1 { // the base image
		t.Errorf("blobs left: %v, %v; want only the base image's", blobs, err)
	}
	tmp, err := os.ReadDir(filepath.Join(h.DataDir, "images", "tmp"))
	if err != nil || len(tmp) != 0 {
		t.Errorf("images/tmp holds %v, %v; want it empty", tmp, err)
	}
}

// TestImageAPIErrors covers the image routes' refusals.
func TestImageAPIErrors(t *testing.T) {
	h := daemontest.Start(t, nil)
	ctx := t.Context()
	user, err := h.Client.CreateKey(ctx, &api.CreateKeyRequest{Tenant: "other"})
	if err != nil {
		t.Fatal(err)
	}
	nonAdmin := client.New(h.URL, client.WithToken(user.Secret))
	for _, tc := range []struct {
		name string
		call func() error
		code string
	}{
		{"pull needs admin", func() error {
			_, err := nonAdmin.PullImage(ctx, &api.PullImageRequest{Ref: "busybox"}, nil)
			return err
		}, "permission_denied"},
		{"prune needs admin", func() error { _, err := nonAdmin.PruneImages(ctx); return err }, "permission_denied"},
		{"rm needs admin", func() error { return nonAdmin.DeleteImage(ctx, "base") }, "permission_denied"},
		{"import needs admin", func() error {
			_, err := nonAdmin.ImportImage(ctx, "x", strings.NewReader(""))
			return err
		}, "permission_denied"},
		{"anyone inspects", func() error { _, err := nonAdmin.GetImage(ctx, "base"); return err }, ""},
		{"base stays", func() error { return h.Client.DeleteImage(ctx, "base") }, "invalid_argument"},
		{"unknown image", func() error { _, err := h.Client.GetImage(ctx, "nope:1"); return err }, "not_found"},
		{"bad name", func() error { _, err := h.Client.GetImage(ctx, "Bad"); return err }, "invalid_argument"},
		{"bad ref", func() error {
			_, err := h.Client.PullImage(ctx, &api.PullImageRequest{Ref: "UPPER"}, nil)
			return err
		}, "invalid_argument"},
		{"unreachable registry", func() error {
			_, err := h.Client.PullImage(ctx, &api.PullImageRequest{Ref: "127.0.0.1:1/x/y"}, func(api.PullProgress) error { return nil })
			return err
		}, "unavailable"},
		{"bad format", func() error {
			_, err := h.Client.ImportImageFrom(ctx, "x", "zip", "", strings.NewReader(""))
			return err
		}, "invalid_argument"},
	} {
		err := tc.call()
		if got := client.Code(err); got != tc.code && !(tc.code == "" && err == nil) {
			t.Errorf("%s: %v (code %q), want %q", tc.name, err, got, tc.code)
		}
	}
}
