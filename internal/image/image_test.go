package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"base", true},
		{"busybox", true},
		{"python-3.12", true},
		{"a", true},
		{"0day_x", true},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{"", false},
		{".hidden", false},
		{"-x", false},
		{"_x", false},
		{"Upper", false},
		{"a/b", false},
		{"..", false},
		{"a,b", false},
		{"a:b", true},
		{"python:3.12-slim", true},
		{"tool:V1_x", true},
		{"a:" + strings.Repeat("t", 128), true},
		{"a:" + strings.Repeat("t", 129), false},
		{"a:", false},
		{"a:.x", false},
		{"a:-x", false},
		{"a:b:c", false},
		{"a:b/c", false},
		{"A:b", false},
		{":b", false},
		{"a b", false},
		{"a\n", false},
	} {
		err := ValidName(tc.name)
		if tc.ok && err != nil {
			t.Errorf("ValidName(%q) = %v, want nil", tc.name, err)
		}
		if !tc.ok && !errdefs.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("ValidName(%q) = %v, want ErrInvalidArgument", tc.name, err)
		}
	}
}

func TestOpenRefusesOverlayUnsafeDir(t *testing.T) {
	for _, bad := range []string{"a,b", "a:b", `a\b`} {
		dir := filepath.Join(t.TempDir(), bad)
		if _, err := Open(dir); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument", dir, err)
		}
		if _, err := os.Lstat(dir); !os.IsNotExist(err) {
			t.Errorf("Open(%q) created the directory", dir)
		}
	}
}

func TestOpenLayoutAndCleanup(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "images")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st := statOf(t, dir); st.Mode&0o777 != 0o700 {
		t.Errorf("store dir mode = %#o, want 0700", st.Mode&0o777)
	}
	s.shellOptional = true
	if _, err := s.ImportTar(t.Context(), "one", bytes.NewReader(makeTar(t, entry{name: "f", body: "x"}))); err != nil {
		t.Fatal(err)
	}
	// What an interrupted import leaves behind.
	junk := filepath.Join(dir, "tmp", "import-123", "rootfs")
	if err := os.MkdirAll(junk, 0o755); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	checkTmpEmpty(t, s2)
	img, err := s2.Get("one")
	if err != nil {
		t.Fatalf("Get after reopen: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(img.RootFS, "f")); err != nil || string(b) != "x" {
		t.Errorf("rootfs/f after reopen = %q, %v; want \"x\"", b, err)
	}
	if !filepath.IsAbs(img.RootFS) {
		t.Errorf("RootFS = %q, want an absolute path", img.RootFS)
	}
}

func TestStoreLifecycle(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	tarA := makeTar(t, entry{name: "a", body: "content a"})
	tarB := makeTar(t, entry{name: "b", body: "content b"})

	imgA, err := s.ImportTar(ctx, "alpha", bytes.NewReader(tarA))
	if err != nil {
		t.Fatal(err)
	}
	imgB, err := s.ImportTar(ctx, "beta", bytes.NewReader(tarB))
	if err != nil {
		t.Fatal(err)
	}
	imgC, err := s.ImportTar(ctx, "gamma", bytes.NewReader(tarA)) // same content as alpha
	if err != nil {
		t.Fatal(err)
	}
	if imgA.Digest == imgB.Digest {
		t.Errorf("alpha and beta share digest %s", imgA.Digest)
	}
	if imgC.Digest != imgA.Digest || imgC.RootFS != imgA.RootFS || !imgC.CreatedAt.Equal(imgA.CreatedAt) {
		t.Errorf("gamma = %+v, want the content of alpha %+v reused", imgC, imgA)
	}
	if got := dirNames(t, s.blobsDir()); len(got) != 2 {
		t.Errorf("blobs = %q, want 2", got)
	}
	if imgA.Size != int64(len("content a")) {
		t.Errorf("alpha size = %d, want %d", imgA.Size, len("content a"))
	}

	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, img := range list {
		names = append(names, img.Name+"="+img.Digest)
	}
	want := []string{"alpha=" + imgA.Digest, "beta=" + imgB.Digest, "gamma=" + imgA.Digest}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("List() (-want +got):\n%s", diff)
	}

	// Re-importing a name moves it; the old content stays until GC.
	if _, err := s.ImportTar(ctx, "beta", bytes.NewReader(makeTar(t, entry{name: "b2", body: "new"}))); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(imgB.RootFS); err != nil {
		t.Errorf("old beta content gone before GC: %v", err)
	}

	for _, tc := range []struct {
		name string
		want *errdefs.Class
	}{
		{"nope", errdefs.ErrNotFound},
		{"Bad/Name", errdefs.ErrInvalidArgument},
		{BaseName, errdefs.ErrInvalidArgument},
	} {
		if err := s.Remove(tc.name); !errdefs.Is(err, tc.want) {
			t.Errorf("Remove(%q) = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := s.Get("nope"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get(nope) = %v, want ErrNotFound", err)
	}
	if _, err := s.Get("../x"); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Get(../x) = %v, want ErrInvalidArgument", err)
	}

	// GC: the old beta content is unnamed.
	n, err := s.GC(func(d string) bool { return d == imgB.Digest })
	if err != nil || n != 0 {
		t.Errorf("GC(beta in use) = %d, %v; want 0, nil", n, err)
	}
	n, err = s.GC(nil)
	if err != nil || n != 1 {
		t.Errorf("GC(nil) = %d, %v; want 1, nil", n, err)
	}
	if _, err := os.Stat(imgB.RootFS); !os.IsNotExist(err) {
		t.Errorf("old beta content still there after GC: %v", err)
	}

	// alpha's content stays while gamma names it.
	if err := s.Remove("alpha"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("alpha"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Get(alpha) after Remove = %v, want ErrNotFound", err)
	}
	if n, err := s.GC(nil); err != nil || n != 0 {
		t.Errorf("GC with gamma naming alpha's content = %d, %v; want 0, nil", n, err)
	}
	if err := s.Remove("gamma"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.GC(func(string) bool { return false }); err != nil || n != 1 {
		t.Errorf("GC after removing gamma = %d, %v; want 1, nil", n, err)
	}
	checkTmpEmpty(t, s)

	// The names survive a reopen.
	s2, err := Open(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	list, err = s2.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "beta" {
		t.Errorf("List after reopen = %v, want only beta", list)
	}
}

func TestImportReservedName(t *testing.T) {
	s := newStore(t)
	if _, err := s.ImportTar(t.Context(), BaseName, bytes.NewReader(makeTar(t, entry{name: "f"}))); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("ImportTar(base) = %v, want ErrInvalidArgument", err)
	}
	if _, err := s.ImportDir(t.Context(), "Bad", t.TempDir()); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("ImportDir(Bad) = %v, want ErrInvalidArgument", err)
	}
	if _, err := s.ImportDir(t.Context(), "missing", filepath.Join(t.TempDir(), "nope")); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("ImportDir of a missing dir = %v, want ErrInvalidArgument", err)
	}
	checkTmpEmpty(t, s)
}

// TestDigestEncoding pins the encoding documented in digest.go.
func TestDigestEncoding(t *testing.T) {
	testutil.RequiresRoot(t)
	src := t.TempDir()
	must(t, os.Chmod(src, 0o755))
	must(t, os.WriteFile(filepath.Join(src, "a"), []byte("hi"), 0o644))
	must(t, os.Chmod(filepath.Join(src, "a"), 0o644))
	must(t, os.Mkdir(filepath.Join(src, "d"), 0o750))
	must(t, os.Chmod(filepath.Join(src, "d"), 0o750))
	must(t, os.Chown(filepath.Join(src, "d"), 1, 2))
	must(t, os.Symlink("../a", filepath.Join(src, "d", "l")))

	s := newStore(t)
	img, err := s.ImportDir(t.Context(), "pinned", src)
	if err != nil {
		t.Fatal(err)
	}
	cfg := `{"env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}`
	stream := "warren-image-v1\n" +
		"d 0755 0 0 1:. 0:\n" +
		"f 0644 0 0 1:a 2:hi\n" +
		"d 0750 1 2 1:d 0:\n" +
		"l 0777 0 0 3:d/l 4:../a\n" +
		fmt.Sprintf("config %d:%s\n", len(cfg), cfg)
	sum := sha256.Sum256([]byte(stream))
	if want := "sha256:" + hex.EncodeToString(sum[:]); img.Digest != want {
		t.Errorf("digest = %s, want %s (of %q)", img.Digest, want, stream)
	}
	if img.Size != 2 {
		t.Errorf("size = %d, want 2", img.Size)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestImportDirBusyboxRoundTrip(t *testing.T) {
	src := testutil.BusyboxRootfs(t)
	s := newStore(t)
	ctx := t.Context()
	fromDir, err := s.ImportDir(ctx, "busybox", src)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(snapshot(t, src), snapshot(t, fromDir.RootFS)); diff != "" {
		t.Errorf("ImportDir rootfs differs from the source (-want +got):\n%s", diff)
	}
	if target, err := os.Readlink(filepath.Join(fromDir.RootFS, "bin", "sh")); err != nil || target != "busybox" {
		t.Errorf("bin/sh -> %q, %v; want busybox", target, err)
	}
	tb := tarDir(t, src)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"busybox-tar", tb},
		{"busybox-tgz", gzipBytes(t, tb)},
	} {
		img, err := s.ImportTar(ctx, tc.name, bytes.NewReader(tc.data))
		if err != nil {
			t.Fatalf("ImportTar(%s): %v", tc.name, err)
		}
		if img.Digest != fromDir.Digest || img.Size != fromDir.Size {
			t.Errorf("ImportTar(%s) = %s size %d, want %s size %d as ImportDir", tc.name, img.Digest, img.Size, fromDir.Digest, fromDir.Size)
		}
	}
	if got := dirNames(t, s.blobsDir()); len(got) != 1 {
		t.Errorf("blobs = %q, want the one shared blob", got)
	}
	checkTmpEmpty(t, s)
}

// TestImportKeepsModeAndOwner checks both import paths on setuid, setgid,
// sticky bits, odd owners and symlink owners.
func TestImportKeepsModeAndOwner(t *testing.T) {
	testutil.RequiresRoot(t)
	src := t.TempDir()
	must(t, os.Chmod(src, 0o755))
	type spec struct {
		path     string
		dir      bool
		link     string
		mode     os.FileMode
		uid, gid int
	}
	specs := []spec{
		{path: "bin", dir: true, mode: 0o755},
		{path: "bin/su", mode: 0o4755 | os.ModeSetuid},
		{path: "data", dir: true, mode: 0o2775 | os.ModeSetgid, gid: 50},
		{path: "data/secret", mode: 0o640, uid: 1234, gid: 5678},
		{path: "shared", dir: true, mode: 0o777 | os.ModeSticky},
		{path: "lnk", link: "data/secret", uid: 42, gid: 43},
	}
	for _, sp := range specs {
		p := filepath.Join(src, sp.path)
		switch {
		case sp.dir:
			must(t, os.Mkdir(p, 0o700))
		case sp.link != "":
			must(t, os.Symlink(sp.link, p))
		default:
			must(t, os.WriteFile(p, []byte(sp.path), 0o600))
		}
		must(t, os.Lchown(p, sp.uid, sp.gid))
		if sp.link == "" {
			must(t, os.Chmod(p, sp.mode))
		}
	}
	s := newStore(t)
	fromDir, err := s.ImportDir(t.Context(), "modes-dir", src)
	if err != nil {
		t.Fatal(err)
	}
	fromTar, err := s.ImportTar(t.Context(), "modes-tar", bytes.NewReader(tarDir(t, src)))
	if err != nil {
		t.Fatal(err)
	}
	if fromDir.Digest != fromTar.Digest {
		t.Errorf("ImportDir digest %s != ImportTar digest %s", fromDir.Digest, fromTar.Digest)
	}
	wantBits := map[string]uint32{"bin": 0o755, "bin/su": 0o4755, "data": 0o2775, "data/secret": 0o640, "shared": 0o1777, "lnk": 0o777}
	for _, img := range []*Image{fromDir, fromTar} {
		for _, sp := range specs {
			st := statOf(t, filepath.Join(img.RootFS, sp.path))
			if st.Mode&0o7777 != wantBits[sp.path] || int(st.Uid) != sp.uid || int(st.Gid) != sp.gid {
				t.Errorf("%s: %s = %#o %d:%d, want %#o %d:%d", img.Name, sp.path, st.Mode&0o7777, st.Uid, st.Gid, wantBits[sp.path], sp.uid, sp.gid)
			}
		}
	}
}

// TestImportDirStaysInside checks that ImportDir copies symlinks as
// symlinks, never what they point to, and skips special files.
func TestImportDirStaysInside(t *testing.T) {
	testutil.RequiresRoot(t)
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("TOPSECRET-outside"), 0o644))
	src := t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(src, "abs-dir")))
	must(t, os.Symlink("../../../../../../../"+outside+"/secret", filepath.Join(src, "rel-file")))
	must(t, os.Symlink("/etc/shadow", filepath.Join(src, "shadow")))
	must(t, os.Mkdir(filepath.Join(src, "d"), 0o755))
	must(t, unix.Mkfifo(filepath.Join(src, "d", "fifo"), 0o644))
	must(t, unix.Mknod(filepath.Join(src, "d", "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))

	s := newStore(t)
	img, err := s.ImportDir(t.Context(), "links", src)
	if err != nil {
		t.Fatal(err)
	}
	got := snapshot(t, img.RootFS)
	for p, desc := range got {
		if strings.Contains(desc, "TOPSECRET") || strings.HasPrefix(desc, "?") {
			t.Errorf("%s = %s: followed a symlink or copied a special file", p, desc)
		}
	}
	for _, p := range []string{"abs-dir", "rel-file", "shadow"} {
		if !strings.HasPrefix(got[p], "l ") {
			t.Errorf("%s = %q, want a symlink", p, got[p])
		}
	}
	for _, p := range []string{"d/fifo", "d/null"} {
		if desc, ok := got[p]; ok {
			t.Errorf("%s = %q, want it skipped", p, desc)
		}
	}
}

func TestImportLimits(t *testing.T) {
	src := t.TempDir()
	for i := range 4 {
		must(t, os.WriteFile(filepath.Join(src, fmt.Sprint("f", i)), bytes.Repeat([]byte("x"), 400), 0o644))
	}
	for _, tc := range []struct {
		name       string
		maxBytes   int64
		maxEntries int
		want       *errdefs.Class
	}{
		{"fits", 1600, 5, nil},
		{"bytes", 1599, 100, errdefs.ErrTooLarge},
		{"entries", 1 << 20, 3, errdefs.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			s.MaxImportBytes, s.MaxImportEntries = tc.maxBytes, tc.maxEntries
			_, err := s.ImportDir(t.Context(), "dir", src)
			if tc.want == nil && err != nil || tc.want != nil && !errdefs.Is(err, tc.want) {
				t.Errorf("ImportDir = %v, want %v", err, tc.want)
			}
			_, err = s.ImportTar(t.Context(), "tar", bytes.NewReader(tarDir(t, src)))
			// The tar has one entry more: the root, "./".
			if tc.want == nil && err != nil || tc.want != nil && !errdefs.Is(err, tc.want) {
				t.Errorf("ImportTar = %v, want %v", err, tc.want)
			}
			checkTmpEmpty(t, s)
		})
	}
}

func TestImportCanceled(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.ImportTar(ctx, "x", bytes.NewReader(makeTar(t, entry{name: "f", body: "x"}))); err == nil {
		t.Error("ImportTar with a canceled context succeeded")
	}
	if _, err := s.ImportDir(ctx, "y", testutil.BusyboxRootfs(t)); err == nil {
		t.Error("ImportDir with a canceled context succeeded")
	}
	checkTmpEmpty(t, s)
	if list, err := s.List(); err != nil || len(list) != 0 {
		t.Errorf("List() = %v, %v; want nothing", list, err)
	}
}

func TestConcurrentImports(t *testing.T) {
	s := newStore(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		wg.Go(func() {
			name := fmt.Sprint("img", i)
			// Two distinct contents, each imported under four names.
			data := makeTar(t, entry{name: "f", body: fmt.Sprint("content", i%2)})
			if _, err := s.ImportTar(t.Context(), name, bytes.NewReader(data)); err != nil {
				errs <- err
			}
			if _, err := s.List(); err != nil {
				errs <- err
			}
		})
	}
	wg.Go(func() {
		if _, err := s.GC(nil); err != nil {
			errs <- err
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 8 {
		t.Errorf("List() has %d images, want 8", len(list))
	}
	for _, img := range list {
		if _, err := os.Stat(filepath.Join(img.RootFS, "f")); err != nil {
			t.Errorf("%s: %v", img.Name, err)
		}
	}
	if got := dirNames(t, s.blobsDir()); len(got) != 2 {
		t.Errorf("blobs = %q, want 2", got)
	}
}
