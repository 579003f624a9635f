package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/testutil"
)

// newStore opens a store in a fresh temporary directory.
func newStore(t testing.TB) *Store {
	t.Helper()
	testutil.RequiresRoot(t) // imports keep ownership: Lchown
	s, err := Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	// The archives of these tests hold the entries under test and no
	// shell; TestImportShellCheck turns the check back on.
	s.shellOptional = true
	return s
}

// snapshot describes every entry below root, without following symlinks:
// path -> "kind mode uid:gid content-or-target". Regular files show their
// content if short, else its SHA-256.
func snapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%#o %d:%d", st.Mode&0o7777, st.Uid, st.Gid)
		switch {
		case fi.IsDir():
			desc = "d " + desc
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			content := string(b)
			if len(b) > 64 {
				sum := sha256.Sum256(b)
				content = "sha256:" + hex.EncodeToString(sum[:])
			}
			desc = "f " + desc + " " + content
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc = "l " + desc + " -> " + target
		default:
			desc = "? " + fi.Mode().String()
		}
		out[filepath.ToSlash(rel)] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", root, err)
	}
	return out
}

// entry is one tar entry for makeTar.
type entry struct {
	name     string
	typ      byte // 0 means tar.TypeReg
	mode     int64
	uid, gid int
	body     string
	link     string
	size     int64 // declared size if not len(body); the body is not written
	pax      map[string]string
}

// makeTar builds a tar stream of ents. An entry whose declared size differs
// from its body ends the stream right after its header.
func makeTar(t testing.TB, ents ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
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
		hdr := &tar.Header{
			Name: e.name, Typeflag: typ, Mode: mode, Uid: e.uid, Gid: e.gid,
			Linkname: e.link, ModTime: time.Unix(1700000000, 0), PAXRecords: e.pax,
			Format: tar.FormatPAX,
		}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
			if e.size != 0 {
				hdr.Size = e.size
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("tar header %q: %v", e.name, err)
		}
		if typ == tar.TypeReg && e.size != 0 {
			return buf.Bytes() // a lying header: no body, no trailer
		}
		if e.body != "" {
			if _, err := io.WriteString(tw, e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tarDir makes a tar of the tree at dir with archive/tar, as an image
// builder would: the root as "./", then every entry, symlinks as symlinks.
func tarDir(t testing.TB, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
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
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		hdr.Name = "./" + filepath.ToSlash(rel)
		if rel == "." {
			hdr.Name = "./"
		} else if fi.IsDir() {
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
			if _, err := io.Copy(tw, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("tar %s: %v", dir, err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// dirNames lists dir, sorted; nil if it does not exist.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// checkNothingLeft fails unless the store's tmp/ is empty.
func checkTmpEmpty(t testing.TB, s *Store) {
	t.Helper()
	if got := dirNames(t, s.tmpDir()); len(got) != 0 {
		t.Errorf("tmp/ holds %q after the import, want it empty", got)
	}
}

func statOf(t testing.TB, p string) *syscall.Stat_t {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t)
}
