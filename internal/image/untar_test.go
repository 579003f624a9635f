package image

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/errdefs"
)

// escapeName is a name hostile seeds try to create outside the store.
const escapeName = "warren-escape-canary"

// hostileTars are archives that must be refused. The store they run in has
// MaxImportBytes 1 MiB and MaxImportEntries 64.
func hostileTars(t testing.TB) []struct {
	name string
	data []byte
	want *errdefs.Class
} {
	t.Helper()
	big := strings.Repeat("p", 600<<10)
	var many []entry
	for range 70 {
		many = append(many, entry{name: "d/", typ: tar.TypeDir})
	}
	return []struct {
		name string
		data []byte
		want *errdefs.Class
	}{
		{"dotdot", makeTar(t, entry{name: "../" + escapeName, body: "x"}), errdefs.ErrInvalidArgument},
		{"dotdot deep", makeTar(t, entry{name: "a/../../" + escapeName, body: "x"}), errdefs.ErrInvalidArgument},
		{"dotdot abs", makeTar(t, entry{name: "/../" + escapeName, body: "x"}), errdefs.ErrInvalidArgument},
		{"dotdot dir", makeTar(t, entry{name: "../" + escapeName + "/", typ: tar.TypeDir}), errdefs.ErrInvalidArgument},
		{"symlink to root then through it", makeTar(t,
			entry{name: "link", typ: tar.TypeSymlink, link: "/"},
			entry{name: "link/tmp/" + escapeName, body: "x"}), errdefs.ErrInvalidArgument},
		{"symlink up then through it", makeTar(t,
			entry{name: "link", typ: tar.TypeSymlink, link: "../../.."},
			entry{name: "link/" + escapeName, body: "x"}), errdefs.ErrInvalidArgument},
		{"symlink up then mkdir through it", makeTar(t,
			entry{name: "link", typ: tar.TypeSymlink, link: ".."},
			entry{name: "link/" + escapeName + "/", typ: tar.TypeDir}), errdefs.ErrInvalidArgument},
		{"symlink chain out", makeTar(t,
			entry{name: "a", typ: tar.TypeSymlink, link: "b/.."},
			entry{name: "b/", typ: tar.TypeDir},
			entry{name: "c", typ: tar.TypeSymlink, link: "a/.."},
			entry{name: "c/" + escapeName, body: "x"}), errdefs.ErrInvalidArgument},
		{"hard link out", makeTar(t, entry{name: "hl", typ: tar.TypeLink, link: "../../etc/passwd"}), errdefs.ErrInvalidArgument},
		{"hard link absolute", makeTar(t, entry{name: "hl", typ: tar.TypeLink, link: "/etc/passwd"}), errdefs.ErrInvalidArgument},
		{"hard link missing", makeTar(t, entry{name: "hl", typ: tar.TypeLink, link: "nope"}), errdefs.ErrInvalidArgument},
		{"hard link to dir", makeTar(t, entry{name: "d/", typ: tar.TypeDir}, entry{name: "hl", typ: tar.TypeLink, link: "d"}), errdefs.ErrInvalidArgument},
		{"hard link through symlink", makeTar(t,
			entry{name: "etc", typ: tar.TypeSymlink, link: "/etc"},
			entry{name: "hl", typ: tar.TypeLink, link: "etc/passwd"}), errdefs.ErrInvalidArgument},
		{"whiteout", makeTar(t, entry{name: "etc/.wh.passwd"}), errdefs.ErrInvalidArgument},
		{"opaque whiteout", makeTar(t, entry{name: "opt/.wh..wh..opq"}), errdefs.ErrInvalidArgument},
		{"whiteout dir", makeTar(t, entry{name: "opt/.wh.x/f"}), errdefs.ErrInvalidArgument},
		{"file replaces dir", makeTar(t, entry{name: "d/", typ: tar.TypeDir}, entry{name: "d/f", body: "x"}, entry{name: "d", body: "x"}), errdefs.ErrInvalidArgument},
		{"root as file", makeTar(t, entry{name: ".", body: "x"}), errdefs.ErrInvalidArgument},
		{"name too long", makeTar(t, entry{name: strings.Repeat("a/", 2100) + "f", body: "x"}), errdefs.ErrInvalidArgument},
		{"component too long", makeTar(t, entry{name: strings.Repeat("a", 300), body: "x"}), errdefs.ErrInvalidArgument},
		{"garbage", bytes.Repeat([]byte("garbage!"), 128), errdefs.ErrInvalidArgument},
		{"truncated body", makeTar(t, entry{name: "f", body: "x"}, entry{name: "g", body: "0123456789"})[:1024+512+5], errdefs.ErrInvalidArgument},
		{"bad gzip", []byte{0x1f, 0x8b, 0, 0, 0}, errdefs.ErrInvalidArgument},
		{"unknown type", makeTar(t, entry{name: "x", typ: 'Z'}), errdefs.ErrInvalidArgument},
		{"huge declared size", makeTar(t, entry{name: "f", size: 1 << 40}), errdefs.ErrTooLarge},
		{"over the byte cap", makeTar(t, entry{name: "a", body: big}, entry{name: "b", body: big}), errdefs.ErrTooLarge},
		{"hard links multiply a file", makeTar(t, entry{name: "a", body: big}, entry{name: "b", typ: tar.TypeLink, link: "a"}), errdefs.ErrTooLarge},
		{"too many entries", makeTar(t, many...), errdefs.ErrTooLarge},
		{"gzip bomb of PAX padding", gzipBytes(t, makeTar(t,
			entry{name: "a", pax: map[string]string{"comment": big}},
			entry{name: "b", pax: map[string]string{"comment": big}},
			entry{name: "c", pax: map[string]string{"comment": big}},
			entry{name: "d", pax: map[string]string{"comment": big}})), errdefs.ErrTooLarge},
	}
}

func TestImportTarHostile(t *testing.T) {
	for _, tc := range hostileTars(t) {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			canary := makeCanary(t, base)
			before := snapshot(t, canary)
			s, err := Open(filepath.Join(base, "store"))
			if err != nil {
				t.Fatal(err)
			}
			s.MaxImportBytes, s.MaxImportEntries = 1<<20, 64
			img, err := s.ImportTar(t.Context(), "hostile", bytes.NewReader(tc.data))
			if !errdefs.Is(err, tc.want) {
				t.Fatalf("ImportTar = %v, %v; want %v", img, err, tc.want)
			}
			t.Logf("ImportTar: %v", err)
			checkOutsideUntouched(t, s, base, canary, before)
			if got := dirNames(t, s.blobsDir()); len(got) != 0 {
				t.Errorf("blobs = %q after a refused import, want none", got)
			}
			if _, err := s.Get("hostile"); !errdefs.Is(err, errdefs.ErrNotFound) {
				t.Errorf("Get(hostile) = %v, want ErrNotFound", err)
			}
		})
	}
}

// makeCanary creates base/canary with some content and returns its path.
func makeCanary(t testing.TB, base string) string {
	t.Helper()
	canary := filepath.Join(base, "canary")
	must(t, os.MkdirAll(filepath.Join(canary, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(canary, "passwd"), []byte("canary"), 0o644))
	must(t, os.WriteFile(filepath.Join(canary, "sub", "f"), []byte("canary"), 0o644))
	return canary
}

// checkOutsideUntouched checks that an import changed nothing outside the
// store: base holds only the store and the canary, the canary is as it
// was, nothing landed at the escape name in likely places, and tmp/ is
// empty.
func checkOutsideUntouched(t testing.TB, s *Store, base, canary string, before map[string]string) {
	t.Helper()
	if diff := cmp.Diff([]string{"canary", "store"}, dirNames(t, base)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", base, diff)
	}
	if got, want := dirNames(t, s.dir), []string{"blobs", "names.json", "tmp"}; !slices.Equal(got, want) && !slices.Equal(got, []string{"blobs", "tmp"}) {
		t.Errorf("store holds %q, want %q", got, want)
	}
	if diff := cmp.Diff(before, snapshot(t, canary)); diff != "" {
		t.Errorf("canary changed (-want +got):\n%s", diff)
	}
	for _, p := range []string{"/" + escapeName, "/tmp/" + escapeName, filepath.Join(s.dir, escapeName), filepath.Join(s.blobsDir(), escapeName)} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists (err %v)", p, err)
			os.RemoveAll(p)
		}
	}
	checkTmpEmpty(t, s)
}

// TestImportTarSanitizes checks archives that import, with their unsafe
// parts made harmless.
func TestImportTarSanitizes(t *testing.T) {
	data := makeTar(t,
		entry{name: "/abs", body: "stripped"},
		entry{name: "./dev/", typ: tar.TypeDir},
		entry{name: "dev/null", typ: tar.TypeChar},
		entry{name: "dev/sda", typ: tar.TypeBlock},
		entry{name: "fifo", typ: tar.TypeFifo},
		entry{name: "etc/esc", typ: tar.TypeSymlink, link: "../../../../etc/shadow"},
		entry{name: "etc/abs", typ: tar.TypeSymlink, link: "/etc/shadow"},
		entry{name: "file", body: "first"},
		entry{name: "file", body: "second"},
		entry{name: "hard", typ: tar.TypeLink, link: "/file"},
		entry{name: "dir/", typ: tar.TypeDir, mode: 0o555},
		entry{name: "dir/inner", body: "in a read-only dir"},
		entry{name: "real/", typ: tar.TypeDir},
		entry{name: "alias", typ: tar.TypeSymlink, link: "real"},
		entry{name: "alias/through", body: "via a symlink inside"},
		entry{name: "etc/abs", body: "replaces the symlink, does not write through it"},
		entry{name: "implicit/parent/f", body: "x"},
	)
	s := newStore(t)
	img, err := s.ImportTar(t.Context(), "sane", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		".":                 "d 0755 0:0",
		"abs":               "f 0644 0:0 stripped",
		"dev":               "d 0755 0:0",
		"etc":               "d 0755 0:0",
		"etc/esc":           "l 0777 0:0 -> ../../../../etc/shadow",
		"etc/abs":           "f 0644 0:0 replaces the symlink, does not write through it",
		"file":              "f 0644 0:0 second",
		"hard":              "f 0644 0:0 second",
		"dir":               "d 0555 0:0",
		"dir/inner":         "f 0644 0:0 in a read-only dir",
		"real":              "d 0755 0:0",
		"real/through":      "f 0644 0:0 via a symlink inside",
		"alias":             "l 0777 0:0 -> real",
		"implicit":          "d 0755 0:0",
		"implicit/parent":   "d 0755 0:0",
		"implicit/parent/f": "f 0644 0:0 x",
	}
	got := snapshot(t, img.RootFS)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rootfs (-want +got):\n%s", diff)
	}
	a, b := statOf(t, filepath.Join(img.RootFS, "file")), statOf(t, filepath.Join(img.RootFS, "hard"))
	if a.Ino != b.Ino {
		t.Errorf("hard is not a hard link of file")
	}
	checkTmpEmpty(t, s)
}

func TestImportTarSlowReaderCanceled(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	r := &cancelAfter{data: makeTar(t, entry{name: "a", body: strings.Repeat("x", 1<<16)}), cancel: cancel, after: 4096}
	if _, err := s.ImportTar(ctx, "x", r); err == nil {
		t.Error("ImportTar succeeded although its context was canceled mid-stream")
	}
	checkTmpEmpty(t, s)
}

// cancelAfter serves data in small reads and cancels after some bytes.
type cancelAfter struct {
	data   []byte
	off    int
	after  int
	cancel func()
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	if c.off >= c.after {
		c.cancel()
	}
	if c.off >= len(c.data) {
		return 0, os.ErrClosed
	}
	n := copy(p[:min(len(p), 512)], c.data[c.off:])
	c.off += n
	return n, nil
}
