package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

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
	s.shellOptional = true // the unpacker is under test, not the image's shell

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

// memLayer is a layer held in memory, uncompressed, with a made-up digest:
// mutate.Extract reads only its content.
type memLayer struct {
	data []byte
	n    byte
}

func (l *memLayer) Digest() (v1.Hash, error) {
	return v1.Hash{Algorithm: "sha256", Hex: strings.Repeat(fmt.Sprintf("%02x", l.n), 32)}, nil
}
func (l *memLayer) DiffID() (v1.Hash, error)            { return l.Digest() }
func (l *memLayer) Size() (int64, error)                { return int64(len(l.data)), nil }
func (l *memLayer) MediaType() (types.MediaType, error) { return types.DockerLayer, nil }
func (l *memLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.data)), nil
}

// imageOfLayers is an image whose layers (bottom first) hold the tars
// data.
func imageOfLayers(t testing.TB, data ...[]byte) v1.Image {
	t.Helper()
	var layers []v1.Layer
	for i, d := range data {
		l, err := partial.CompressedToLayer(&memLayer{data: d, n: byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		layers = append(layers, l)
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// hostileLayers are pairs of layers (upper, lower) built to write outside
// the store, bring what an image must not have, or confuse the
// flattening; each either fails or yields a clean tree.
func hostileLayers(t testing.TB) [][2][]byte {
	t.Helper()
	empty := makeTar(t)
	var out [][2][]byte
	for _, tc := range hostileTars(t) {
		out = append(out, [2][]byte{tc.data, empty}, [2][]byte{empty, tc.data})
	}
	pair := func(upper, lower []entry) {
		out = append(out, [2][]byte{makeTar(t, upper...), makeTar(t, lower...)})
	}
	// A symlink in the upper layer, a write through it in the lower one.
	pair([]entry{{name: "link", typ: tar.TypeSymlink, link: "/"}},
		[]entry{{name: "link/tmp/" + escapeName, body: "x"}})
	pair([]entry{{name: "up", typ: tar.TypeSymlink, link: "../../../.."}},
		[]entry{{name: "up/" + escapeName, body: "x"}, {name: "up/", typ: tar.TypeDir}})
	// The other way round: the lower layer's symlink comes after the
	// upper layer's files below it.
	pair([]entry{{name: "link/tmp/" + escapeName, body: "x"}},
		[]entry{{name: "link", typ: tar.TypeSymlink, link: "/"}})
	// Hard links: to the host, to a lower layer, to nothing, to a path
	// whited out above.
	pair([]entry{{name: "hl", typ: tar.TypeLink, link: "/etc/shadow"}}, nil)
	pair([]entry{{name: "hl", typ: tar.TypeLink, link: "../../../etc/shadow"}}, nil)
	pair([]entry{{name: "hl", typ: tar.TypeLink, link: "lower"}}, []entry{{name: "lower", body: "x"}})
	pair([]entry{{name: "hl", typ: tar.TypeLink, link: "nowhere"}}, []entry{{name: "lower", body: "x"}})
	pair([]entry{{name: ".wh.lower"}, {name: "hl", typ: tar.TypeLink, link: "lower"}}, []entry{{name: "lower", body: "x"}})
	pair([]entry{{name: "hl", typ: tar.TypeLink, link: "d"}}, []entry{{name: "d/", typ: tar.TypeDir}})
	// Device nodes and FIFOs in either layer.
	pair([]entry{{name: "dev/mem", typ: tar.TypeChar}}, []entry{{name: "dev/sda", typ: tar.TypeBlock}, {name: "fifo", typ: tar.TypeFifo}})
	// Whiteouts that try to leave the tree or hit the root.
	pair([]entry{{name: ".wh..."}, {name: "a/.wh.../../" + escapeName}}, []entry{{name: "a/", typ: tar.TypeDir}})
	pair([]entry{{name: ".wh..wh..opq"}}, []entry{{name: "etc/passwd", body: "x"}})
	pair([]entry{{name: "../.wh..wh..opq"}}, nil)
	// Types changing between the layers.
	pair([]entry{{name: "d", body: "file over dir"}}, []entry{{name: "d/", typ: tar.TypeDir}, {name: "d/f", body: "x"}})
	pair([]entry{{name: "f/", typ: tar.TypeDir}, {name: "f/g", body: "x"}}, []entry{{name: "f", body: "file under dir"}})
	pair([]entry{{name: "s", typ: tar.TypeSymlink, link: "/etc"}}, []entry{{name: "s/", typ: tar.TypeDir}, {name: "s/passwd", body: "x"}})
	// Huge headers.
	pair([]entry{{name: "huge", size: 1 << 62}}, nil)
	pair([]entry{{name: "p", pax: map[string]string{"path": strings.Repeat("a/", 3000) + "f"}}}, nil)
	return out
}

// FuzzUnpackLayers feeds two arbitrary layers (upper, lower) through
// mutate.Extract into the layered unpacker. Whatever the outcome: no
// panic, nothing outside the store changes, a refusal is classified as the
// image's fault and leaves no content, and an accepted image holds only
// directories, files and symlinks within the caps.
func FuzzUnpackLayers(f *testing.F) {
	testutil.RequiresRoot(f)
	f.Add(makeTar(f,
		entry{name: "etc/.wh.a"},
		entry{name: "opt/x/.wh..wh..opq"},
		entry{name: "opt/x/3", body: "3"},
		entry{name: "etc/hl", typ: tar.TypeLink, link: "etc/b"}),
		makeTar(f,
			entry{name: "etc/", typ: tar.TypeDir},
			entry{name: "etc/a", body: "a"},
			entry{name: "etc/b", body: "b"},
			entry{name: "opt/x/1", body: "1"}))
	for _, p := range hostileLayers(f) {
		up, low := p[0], p[1]
		if len(up)+len(low) > 64<<10 {
			continue // big seeds slow the fuzzer down; ImportTar's fuzzer has them
		}
		f.Add(up, low)
	}

	base := f.TempDir()
	canary := makeCanary(f, base)
	before := snapshot(f, canary)
	s, err := Open(filepath.Join(base, "store"))
	if err != nil {
		f.Fatal(err)
	}
	s.MaxImportBytes, s.MaxImportEntries = 1<<20, 64
	s.shellOptional = true // the unpacker is under test, not the image's shell

	f.Fuzz(func(t *testing.T, upper, lower []byte) {
		img, err := s.storeOCI(t.Context(), "fuzz", imageOfLayers(t, lower, upper), config{}, provenance{Layers: 2}, nil)
		checkOutsideUntouched(t, s, base, canary, before)
		if err != nil {
			if c := errdefs.ClassOf(err); c != errdefs.ErrInvalidArgument && c != errdefs.ErrTooLarge {
				t.Errorf("storeOCI = %v: class %v, want invalid_argument or too_large", err, c)
			}
			if got := dirNames(t, s.blobsDir()); len(got) != 0 {
				t.Errorf("blobs = %q after a refused image", got)
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
			if strings.HasPrefix(d.Name(), ".wh.") {
				t.Errorf("%s: a whiteout was stored", p)
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

// TestUnpackLayersOutcomes checks what the layered unpacker makes of
// layers that disagree, and which it refuses.
func TestUnpackLayersOutcomes(t *testing.T) {
	s := newStore(t)
	s.MaxImportBytes, s.MaxImportEntries = 1<<20, 64
	s.shellOptional = true // the unpacker is under test, not the image's shell
	for _, tc := range []struct {
		name         string
		upper, lower []entry
		want         map[string]string // nil: refused
	}{
		{"write through upper symlink is hidden",
			[]entry{{name: "link", typ: tar.TypeSymlink, link: "/"}},
			[]entry{{name: "link/tmp/x", body: "x"}},
			map[string]string{".": "d 0755 0:0", "link": "l 0777 0:0 -> /"}},
		{"lower symlink under upper files loses",
			[]entry{{name: "link/tmp/x", body: "x"}},
			[]entry{{name: "link", typ: tar.TypeSymlink, link: "/"}},
			map[string]string{".": "d 0755 0:0", "link": "d 0755 0:0", "link/tmp": "d 0755 0:0", "link/tmp/x": "f 0644 0:0 x"}},
		{"hard link to a lower file",
			[]entry{{name: "hl", typ: tar.TypeLink, link: "lower"}},
			[]entry{{name: "lower", body: "x"}},
			map[string]string{".": "d 0755 0:0", "hl": "f 0644 0:0 x", "lower": "f 0644 0:0 x"}},
		{"hard link to nothing", []entry{{name: "hl", typ: tar.TypeLink, link: "nowhere"}}, nil, nil},
		{"hard link to a whited out file",
			[]entry{{name: ".wh.lower"}, {name: "hl", typ: tar.TypeLink, link: "lower"}},
			[]entry{{name: "lower", body: "x"}}, nil},
		{"hard link to the host", []entry{{name: "hl", typ: tar.TypeLink, link: "/etc/shadow"}}, nil, nil},
		{"file over dir",
			[]entry{{name: "d", body: "f"}},
			[]entry{{name: "d/", typ: tar.TypeDir}, {name: "d/f", body: "x"}},
			map[string]string{".": "d 0755 0:0", "d": "f 0644 0:0 f"}},
		{"dir over file",
			[]entry{{name: "f/", typ: tar.TypeDir, mode: 0o700}, {name: "f/g", body: "x"}},
			[]entry{{name: "f", body: "file"}},
			map[string]string{".": "d 0755 0:0", "f": "d 0700 0:0", "f/g": "f 0644 0:0 x"}},
		{"devices dropped",
			[]entry{{name: "dev/mem", typ: tar.TypeChar}},
			[]entry{{name: "dev/", typ: tar.TypeDir}, {name: "fifo", typ: tar.TypeFifo}},
			map[string]string{".": "d 0755 0:0", "dev": "d 0755 0:0"}},
		{"root opaque", []entry{{name: ".wh..wh..opq"}, {name: "new", body: "n"}}, []entry{{name: "old", body: "o"}},
			map[string]string{".": "d 0755 0:0", "new": "f 0644 0:0 n"}},
		{"dotdot", []entry{{name: "../" + escapeName, body: "x"}}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, err := s.storeOCI(t.Context(), "t", imageOfLayers(t, makeTar(t, tc.lower...), makeTar(t, tc.upper...)), config{}, provenance{}, nil)
			if tc.want == nil {
				if !errdefs.Is(err, errdefs.ErrInvalidArgument) {
					t.Fatalf("storeOCI = %v, %v; want invalid_argument", img, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, snapshot(t, img.RootFS)); diff != "" {
				t.Errorf("rootfs (-want +got):\n%s", diff)
			}
		})
	}
	checkTmpEmpty(t, s)
}
