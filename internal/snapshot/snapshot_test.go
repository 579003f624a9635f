package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/testutil"
)

const base = 1_000_000_000

// node describes one file of a tree for comparisons.
type node struct {
	Type, Target, Data string
	UID, GID           int
	Mode               os.FileMode
	Opaque             bool
}

func describe(t *testing.T, dir string) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		st := fi.Sys().(*syscall.Stat_t)
		n := node{UID: int(st.Uid), GID: int(st.Gid), Mode: fi.Mode().Perm() | fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky)}
		switch {
		case fi.IsDir():
			n.Type = "dir"
			v := make([]byte, 8)
			if k, err := unix.Lgetxattr(p, OpaqueXattr, v); err == nil && k > 0 {
				n.Opaque = true
			}
		case fi.Mode()&os.ModeSymlink != 0:
			n.Type = "link"
			n.Target, _ = os.Readlink(p)
		case fi.Mode()&os.ModeCharDevice != 0:
			n.Type = "whiteout"
		case fi.Mode()&os.ModeNamedPipe != 0:
			n.Type = "fifo"
		default:
			n.Type = "file"
			b, _ := os.ReadFile(p)
			n.Data = string(b)
		}
		out[rel] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// upper builds a sandbox's writable layer owned by host ids from base.
func upper(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "upper")
	must(t, os.Mkdir(d, 0o755))
	must(t, os.MkdirAll(filepath.Join(d, "etc/opaque"), 0o755))
	must(t, os.WriteFile(filepath.Join(d, "etc/hosts"), []byte("127.0.0.1 x\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(d, "etc/opaque/f"), []byte("in opaque"), 0o600))
	must(t, unix.Setxattr(filepath.Join(d, "etc/opaque"), OpaqueXattr, []byte("y"), 0))
	must(t, unix.Setxattr(filepath.Join(d, "etc/hosts"), "user.overlay.origin", []byte("junk"), 0))
	must(t, unix.Setxattr(filepath.Join(d, "etc/hosts"), "user.note", []byte("kept"), 0))
	must(t, unix.Mknod(filepath.Join(d, "etc/deleted"), unix.S_IFCHR, 0))
	must(t, unix.Mknod(filepath.Join(d, "etc/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	must(t, unix.Mkfifo(filepath.Join(d, "fifo"), 0o640))
	must(t, os.Symlink("/etc/shadow", filepath.Join(d, "abs")))
	must(t, os.MkdirAll(filepath.Join(d, "home/user"), 0o750))
	must(t, os.WriteFile(filepath.Join(d, "home/user/a"), []byte("aaa"), 0o640))
	must(t, os.Link(filepath.Join(d, "home/user/a"), filepath.Join(d, "home/user/b")))
	f, err := os.Create(filepath.Join(d, "sparse"))
	must(t, err)
	f.WriteAt([]byte("end"), 10<<20)
	f.Close()
	must(t, os.Chmod(filepath.Join(d, "sparse"), 0o4755))
	filepath.Walk(d, func(p string, fi os.FileInfo, err error) error {
		id := base
		if strings.Contains(p, "home") {
			id = base + 1000
		}
		must(t, os.Lchown(p, id, id))
		return nil
	})
	must(t, os.Chmod(filepath.Join(d, "sparse"), 0o4755)) // chown cleared it
	return d
}

func TestCopyRebases(t *testing.T) {
	testutil.RequiresRoot(t)
	src := upper(t)
	dst := filepath.Join(t.TempDir(), "layer")
	st, err := Copy(context.Background(), dst, src, base)
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped != 1 || st.Links != 1 {
		t.Errorf("stats %+v: want the device skipped and one hard link", st)
	}
	got := describe(t, dst)
	want := describe(t, src)
	delete(want, "etc/null")
	for k, n := range want {
		n.UID, n.GID = n.UID-base, n.GID-base
		if n.Type == "file" {
			// A setuid file of the session would be the host root's
			// once re-based: the bits go.
			n.Mode &^= os.ModeSetuid | os.ModeSetgid
		}
		want[k] = n
	}
	if n := got["sparse"]; n.Mode != 0o755 {
		t.Errorf("the session's setuid-root file is %v in the layer, want 0755", n.Mode)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("copy differs (-want +got):\n%s", diff)
	}
	var a, b unix.Stat_t
	unix.Lstat(filepath.Join(dst, "home/user/a"), &a)
	unix.Lstat(filepath.Join(dst, "home/user/b"), &b)
	if a.Ino != b.Ino {
		t.Errorf("hard link not kept")
	}
	var sp unix.Stat_t
	unix.Stat(filepath.Join(dst, "sparse"), &sp)
	if sp.Blocks*512 > 1<<20 {
		t.Errorf("sparse file takes %d bytes", sp.Blocks*512)
	}
	v := make([]byte, 16)
	if _, err := unix.Lgetxattr(filepath.Join(dst, "etc/hosts"), "user.overlay.origin", v); err == nil {
		t.Errorf("overlayfs bookkeeping xattr copied")
	}
	if n, err := unix.Lgetxattr(filepath.Join(dst, "etc/hosts"), "user.note", v); err != nil || string(v[:n]) != "kept" {
		t.Errorf("user xattr: %q %v", v[:n], err)
	}
}

func TestCopyForeignOwnerIsNobody(t *testing.T) {
	testutil.RequiresRoot(t)
	src := filepath.Join(t.TempDir(), "u")
	must(t, os.Mkdir(src, 0o755))
	must(t, os.WriteFile(filepath.Join(src, "f"), nil, 0o644))
	must(t, os.Chown(filepath.Join(src, "f"), 0, 5)) // host root: outside the block
	dst := filepath.Join(t.TempDir(), "l")
	if _, err := Copy(context.Background(), dst, src, base); err != nil {
		t.Fatal(err)
	}
	if n := describe(t, dst)["f"]; n.UID != nobody || n.GID != nobody {
		t.Errorf("owner %d:%d, want nobody", n.UID, n.GID)
	}
}

func TestExportImportRoundTrip(t *testing.T) {
	testutil.RequiresRoot(t)
	src := upper(t)
	layer := filepath.Join(t.TempDir(), "snap")
	must(t, os.Mkdir(layer, 0o700))
	if _, err := Copy(context.Background(), filepath.Join(layer, "root"), src, base); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	m := Manifest{Image: "base", ImageDigest: "sha256:x"}
	if err := Export(context.Background(), &buf, m, []Layer{{Dir: layer}}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "imported")
	got, _, err := Import(context.Background(), bytes.NewReader(buf.Bytes()), dst, ImportLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Image != "base" || got.ImageDigest != "sha256:x" {
		t.Errorf("manifest %+v", got)
	}
	want := describe(t, filepath.Join(layer, "root"))
	if diff := cmp.Diff(want, describe(t, filepath.Join(dst, "root"))); diff != "" {
		t.Errorf("round trip differs (-want +got):\n%s", diff)
	}
}

// TestExportMerges: a snapshot of a session started from a snapshot is two
// layers; the archive holds their merge, relative to the image.
func TestExportMerges(t *testing.T) {
	testutil.RequiresRoot(t)
	dir := t.TempDir()
	lower, upperL := filepath.Join(dir, "l"), filepath.Join(dir, "u")
	mk := func(p string, data string) {
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(data), 0o644))
	}
	mk(filepath.Join(lower, "root/a/keep"), "lower")
	mk(filepath.Join(lower, "root/a/gone"), "lower")
	mk(filepath.Join(lower, "root/b/x"), "lower")
	mk(filepath.Join(lower, "root/c"), "file in lower")
	mk(filepath.Join(lower, "ov/0/bin/tool"), "tool")
	must(t, unix.Mknod(filepath.Join(lower, "root/img-deleted"), unix.S_IFCHR, 0))
	mk(filepath.Join(upperL, "root/a/new"), "upper")
	must(t, unix.Mknod(filepath.Join(upperL, "root/a/gone"), unix.S_IFCHR, 0))
	must(t, os.MkdirAll(filepath.Join(upperL, "root/b"), 0o755))
	must(t, unix.Setxattr(filepath.Join(upperL, "root/b"), OpaqueXattr, []byte("y"), 0))
	mk(filepath.Join(upperL, "root/c/y"), "dir over a lower file")
	var buf bytes.Buffer
	layers := []Layer{{Dir: upperL}, {Dir: lower, Overlays: []string{"/usr"}}}
	if err := Export(context.Background(), &buf, Manifest{Image: "base"}, layers); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "merged")
	m, _, err := Import(context.Background(), &buf, dst, ImportLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/usr"}, m.Overlays); diff != "" {
		t.Errorf("overlays: %s", diff)
	}
	got := describe(t, dst)
	var names []string
	for k, n := range got {
		names = append(names, k+":"+n.Type)
	}
	sort.Strings(names)
	want := []string{".:dir", "ov:dir", "ov/0:dir", "ov/0/bin:dir", "ov/0/bin/tool:file", "root:dir",
		"root/a:dir", "root/a/gone:whiteout", "root/a/keep:file", "root/a/new:file",
		"root/b:dir", "root/c:dir", "root/c/y:file", "root/img-deleted:whiteout"}
	sort.Strings(want)
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("merged tree (-want +got):\n%s", diff)
	}
	for p, opaque := range map[string]bool{"root/a": false, "root/b": true, "root/c": true} {
		if got[p].Opaque != opaque {
			t.Errorf("%s opaque = %v, want %v", p, got[p].Opaque, opaque)
		}
	}
}

// archive builds a zstd tar with a manifest and the given entries.
func archive(t *testing.T, entries ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	man := `{"version":1,"image":"base"}`
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: ManifestName, Size: int64(len(man)), Mode: 0o644})
	tw.Write([]byte(man))
	for _, h := range entries {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestImportRefusesEscapes(t *testing.T) {
	testutil.RequiresRoot(t)
	outside := filepath.Join(t.TempDir(), "outside")
	must(t, os.Mkdir(outside, 0o755))
	dir := func(n string) *tar.Header { return &tar.Header{Typeflag: tar.TypeDir, Name: n, Mode: 0o755} }
	file := func(n string) *tar.Header { return &tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: 3} }
	tests := []struct {
		name    string
		entries []*tar.Header
	}{
		{"dotdot", []*tar.Header{dir("root/"), file("root/../../x")}},
		{"absolute", []*tar.Header{file("/root/x")}},
		{"outside the trees", []*tar.Header{file("etc/passwd")}},
		{"through a symlink", []*tar.Header{dir("root/"), {Typeflag: tar.TypeSymlink, Name: "root/l", Linkname: outside}, file("root/l/x")}},
		{"through a relative symlink", []*tar.Header{dir("root/"), {Typeflag: tar.TypeSymlink, Name: "root/l", Linkname: "../../../../../../.."}, file("root/l/tmp/x")}},
		{"device node", []*tar.Header{dir("root/"), {Typeflag: tar.TypeChar, Name: "root/mem", Devmajor: 1, Devminor: 1, Mode: 0o666}}},
		{"block device", []*tar.Header{dir("root/"), {Typeflag: tar.TypeBlock, Name: "root/sda", Devmajor: 8}}},
		{"hard link outside", []*tar.Header{dir("root/"), {Typeflag: tar.TypeLink, Name: "root/h", Linkname: "/etc/shadow"}}},
		{"hard link up", []*tar.Header{dir("root/"), {Typeflag: tar.TypeLink, Name: "root/h", Linkname: "root/../../etc/shadow"}}},
		{"hard link to a dir", []*tar.Header{dir("root/"), dir("root/d/"), {Typeflag: tar.TypeLink, Name: "root/h", Linkname: "root/d"}}},
		{"file over a dir", []*tar.Header{dir("root/"), dir("root/d/"), file("root/d")}},
		{"overlay out of range", []*tar.Header{file("ov/0/x")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "l")
			_, _, err := Import(context.Background(), bytes.NewReader(archive(t, tc.entries...)), dst, ImportLimits{})
			if !errdefs.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("Import = %v, want invalid_argument", err)
			}
			if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a failed import left %s", dst)
			}
			if ents, _ := os.ReadDir(outside); len(ents) > 0 {
				t.Errorf("the import wrote outside: %v", ents)
			}
		})
	}
}

func TestImportLimits(t *testing.T) {
	testutil.RequiresRoot(t)
	a := archive(t, &tar.Header{Typeflag: tar.TypeDir, Name: "root/"}, &tar.Header{Typeflag: tar.TypeReg, Name: "root/big", Size: 1 << 20})
	_, _, err := Import(context.Background(), bytes.NewReader(a), filepath.Join(t.TempDir(), "l"), ImportLimits{MaxBytes: 1 << 10})
	if !errdefs.Is(err, errdefs.ErrTooLarge) {
		t.Errorf("too much data: %v", err)
	}
	_, _, err = Import(context.Background(), bytes.NewReader(a), filepath.Join(t.TempDir(), "l"), ImportLimits{MaxEntries: 1})
	if !errdefs.Is(err, errdefs.ErrTooLarge) {
		t.Errorf("too many entries: %v", err)
	}
	_, _, err = Import(context.Background(), strings.NewReader("not zstd at all"), filepath.Join(t.TempDir(), "l"), ImportLimits{})
	if !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("garbage: %v", err)
	}
}

func FuzzImport(f *testing.F) {
	testutil.RequiresRoot(f)
	f.Add([]byte("x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		// The fuzzer varies the tar inside a valid zstd frame.
		var buf bytes.Buffer
		zw, _ := zstd.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		man := `{"version":1,"image":"base"}`
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: ManifestName, Size: int64(len(man))})
		tw.Write([]byte(man))
		tw.Flush()
		zw.Write(b)
		zw.Close()
		dir := t.TempDir()
		Import(context.Background(), &buf, filepath.Join(dir, "l"), ImportLimits{MaxBytes: 1 << 20, MaxEntries: 1000})
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.Name() != "l" {
				t.Fatalf("the import wrote %s beside its layer", e.Name())
			}
		}
	})
}

// TestImportClearsSetuid: an archive's setuid-root file lands without the
// bit, and an old layer's setuid file leaves an export without it.
func TestImportClearsSetuid(t *testing.T) {
	testutil.RequiresRoot(t)
	layer := filepath.Join(t.TempDir(), "snap")
	must(t, os.MkdirAll(filepath.Join(layer, "root"), 0o755))
	f := filepath.Join(layer, "root", "suid")
	must(t, os.WriteFile(f, []byte("x"), 0o755))
	must(t, os.Chmod(f, 0o6755))
	var buf bytes.Buffer
	if err := Export(context.Background(), &buf, Manifest{Image: "base"}, []Layer{{Dir: layer}}); err != nil {
		t.Fatal(err)
	}
	zr, err := zstd.NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		if hdr.Name == "root/suid" && hdr.Mode&0o6000 != 0 {
			t.Errorf("the export carries %s with mode %o", hdr.Name, hdr.Mode)
		}
	}
	zr.Close()
	// An archive made elsewhere, with the bits set.
	var raw bytes.Buffer
	zw, _ := zstd.NewWriter(&raw)
	tw := tar.NewWriter(zw)
	man := []byte(`{"version":1,"image":"base"}`)
	tw.WriteHeader(&tar.Header{Name: ManifestName, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(man))})
	tw.Write(man)
	tw.WriteHeader(&tar.Header{Name: "root/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "root/suid", Typeflag: tar.TypeReg, Mode: 0o6755, Size: 1})
	tw.Write([]byte("x"))
	tw.Close()
	zw.Close()
	dst := filepath.Join(t.TempDir(), "imported")
	if _, _, err := Import(context.Background(), bytes.NewReader(raw.Bytes()), dst, ImportLimits{}); err != nil {
		t.Fatal(err)
	}
	if n := describe(t, filepath.Join(dst, "root"))["suid"]; n.Mode != 0o755 {
		t.Errorf("imported setuid file has mode %v, want 0755", n.Mode)
	}
}

// TestExportCap: a snapshot holding a 10 TiB sparse file is refused with
// too_large before a byte is written, instead of streaming zeros until the
// client leaves.
func TestExportCap(t *testing.T) {
	testutil.RequiresRoot(t)
	layer := filepath.Join(t.TempDir(), "snap")
	must(t, os.MkdirAll(filepath.Join(layer, "root"), 0o755))
	f, err := os.Create(filepath.Join(layer, "root", "huge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(10 << 40); err != nil {
		f.Close()
		t.Skipf("this filesystem cannot hold a 10 TiB sparse file: %v", err)
	}
	f.Close()
	var buf bytes.Buffer
	start := time.Now()
	err = Export(context.Background(), &buf, Manifest{Image: "base"}, []Layer{{Dir: layer}})
	if !errdefs.Is(err, errdefs.ErrTooLarge) {
		t.Fatalf("export of a 10 TiB sparse file: %v, want too_large", err)
	}
	if buf.Len() != 0 || time.Since(start) > 5*time.Second {
		t.Errorf("the refusal came after %d bytes and %v", buf.Len(), time.Since(start))
	}
}
