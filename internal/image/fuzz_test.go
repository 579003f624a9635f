package image

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/testutil"
)

// FuzzImportTar feeds arbitrary archives to ImportTar. Whatever the
// outcome: no panic, nothing outside the store changes, tmp/ is empty, a
// refused archive is classified as the archive's fault and leaves no
// content, and an accepted one holds only directories, files and symlinks.
func FuzzImportTar(f *testing.F) {
	testutil.RequiresRoot(f)
	f.Add(makeTar(f,
		entry{name: "./", typ: tar.TypeDir},
		entry{name: "bin/", typ: tar.TypeDir},
		entry{name: "bin/busybox", body: "\x7fELF", mode: 0o755},
		entry{name: "bin/sh", typ: tar.TypeSymlink, link: "busybox"},
		entry{name: "etc/passwd", body: "root:x:0:0::/root:/bin/sh\n"},
		entry{name: "etc/hl", typ: tar.TypeLink, link: "etc/passwd"},
		entry{name: "tmp/", typ: tar.TypeDir, mode: 0o1777}))
	for _, tc := range hostileTars(f) {
		data := tc.data
		if len(data) > 64<<10 {
			// Big inputs slow the fuzzer down; these compress well.
			data = gzipBytes(f, data)
		}
		f.Add(data)
	}
	f.Add(makeTar(f, entry{name: "/abs/" + escapeName, body: "x"}))
	f.Add(makeTar(f,
		entry{name: "link", typ: tar.TypeSymlink, link: "/"},
		entry{name: "link/file", body: "x"}))
	f.Add(makeTar(f, entry{name: "hl", typ: tar.TypeLink, link: "../../etc/passwd"}))
	f.Add(makeTar(f, entry{name: "dev/null", typ: tar.TypeChar}, entry{name: "fifo", typ: tar.TypeFifo}))
	f.Add(makeTar(f, entry{name: "huge", size: 1 << 62}))
	f.Add(gzipBytes(f, append(makeTar(f, entry{name: "zeros", body: strings.Repeat("\x00", 4<<20)}), make([]byte, 1<<20)...)))

	// One store per fuzzing process, reset after every input: setting up
	// a store per input would make the fuzzer crawl.
	base := f.TempDir()
	canary := makeCanary(f, base)
	before := snapshot(f, canary)
	s, err := Open(filepath.Join(base, "store"))
	if err != nil {
		f.Fatal(err)
	}
	s.MaxImportBytes, s.MaxImportEntries = 1<<20, 64

	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := s.ImportTar(t.Context(), "fuzz", bytes.NewReader(data))
		checkOutsideUntouched(t, s, base, canary, before)
		if err != nil {
			if c := errdefs.ClassOf(err); c != errdefs.ErrInvalidArgument && c != errdefs.ErrTooLarge {
				t.Errorf("ImportTar = %v: class %v, want invalid_argument or too_large", err, c)
			}
			if got := dirNames(t, s.blobsDir()); len(got) != 0 {
				t.Errorf("blobs = %q after a refused import", got)
			}
			if _, err := s.Get("fuzz"); !errdefs.Is(err, errdefs.ErrNotFound) {
				t.Errorf("Get after a refused import = %v, want ErrNotFound", err)
			}
			return
		}
		werr := filepath.WalkDir(img.RootFS, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if typ := d.Type(); typ&^(fs.ModeDir|fs.ModeSymlink) != 0 {
				t.Errorf("%s has type %v", p, typ)
			}
			return nil
		})
		if werr != nil {
			t.Error(werr)
		}
		if img.Size > s.MaxImportBytes {
			t.Errorf("Size = %d, over the cap %d", img.Size, s.MaxImportBytes)
		}
		if err := s.Remove("fuzz"); err != nil {
			t.Fatal(err)
		}
		if n, err := s.GC(nil); err != nil || n != 1 {
			t.Fatalf("GC() = %d, %v; want 1, nil", n, err)
		}
	})
}
