package escape

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestImageImportAttacks imports rootfs tarballs built to write outside the
// image store on the host (extraction runs in the daemon, as host root) or
// to smuggle the host's files and devices into a session. Each archive is
// a working busybox rootfs plus one attack.
func TestImageImportAttacks(t *testing.T) {
	rootfs := testutil.BusyboxRootfs(t) // skips without a static busybox
	h := startDaemon(t, nil)
	hostShadow(t)
	var shadowSt syscall.Stat_t
	if err := syscall.Stat("/etc/shadow", &shadowSt); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(os.TempDir(), fmt.Sprintf("warren-escape-%d", os.Getpid()))
	rel := strings.Repeat("../", 24) + strings.TrimPrefix(marker, "/")
	t.Cleanup(func() { os.RemoveAll(marker) })

	cases := []struct {
		name    string
		entries []tar.Header
		inside  string // a shell check in a session of the image, if it imports; must print "safe"
	}{
		{"dotdot entry", []tar.Header{{Name: rel, Typeflag: tar.TypeReg, Mode: 0o644, Size: 5}}, ""},
		{"absolute entry", []tar.Header{{Name: marker, Typeflag: tar.TypeReg, Mode: 0o644, Size: 5}}, ""},
		{"symlink to the host dir, then a file through it", []tar.Header{
			{Name: "out", Typeflag: tar.TypeSymlink, Linkname: filepath.Dir(marker)},
			{Name: "out/" + filepath.Base(marker), Typeflag: tar.TypeReg, Mode: 0o644, Size: 5},
		}, ""},
		{"relative symlink up, then a file through it", []tar.Header{
			{Name: "up", Typeflag: tar.TypeSymlink, Linkname: strings.Repeat("../", 24) + strings.TrimPrefix(filepath.Dir(marker), "/")},
			{Name: "up/" + filepath.Base(marker), Typeflag: tar.TypeReg, Mode: 0o644, Size: 5},
		}, ""},
		{"symlink then a directory through it", []tar.Header{
			{Name: "out2", Typeflag: tar.TypeSymlink, Linkname: filepath.Dir(marker)},
			{Name: "out2/" + filepath.Base(marker) + "/", Typeflag: tar.TypeDir, Mode: 0o755},
		}, ""},
		{"hard link to the host's /etc/shadow", []tar.Header{{Name: "hl", Typeflag: tar.TypeLink, Linkname: "/etc/shadow"}},
			`cat /hl 2>/dev/null | grep -q . || echo safe`},
		{"hard link up to the host's /etc/shadow", []tar.Header{{Name: "hl2", Typeflag: tar.TypeLink, Linkname: strings.Repeat("../", 24) + "etc/shadow"}},
			`cat /hl2 2>/dev/null | grep -q . || echo safe`},
		{"symlink to /etc/shadow (resolves inside)", []tar.Header{{Name: "sl", Typeflag: tar.TypeSymlink, Linkname: "/etc/shadow"}},
			`cat /sl 2>/dev/null | grep -q 'root:\*:[0-9]' && echo HOST || echo safe`},
		{"device nodes", []tar.Header{
			{Name: "dev/mem", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 1},
			{Name: "dev/sda", Typeflag: tar.TypeBlock, Mode: 0o666, Devmajor: 8, Devminor: 0},
			{Name: "mem2", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 1},
		}, `head -c1 /mem2 >/dev/null 2>&1 || echo safe`},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			addTree(t, tw, rootfs)
			for _, hd := range c.entries {
				if err := tw.WriteHeader(&hd); err != nil {
					t.Fatal(err)
				}
				if hd.Size > 0 {
					tw.Write([]byte("pwned")[:hd.Size])
				}
			}
			tw.Close()
			name := fmt.Sprintf("attack%d", i)
			img, err := h.Client.ImportImage(bg, name, &buf)
			if _, serr := os.Lstat(marker); serr == nil {
				t.Errorf("importing the archive wrote %s on the HOST", marker)
				os.RemoveAll(marker)
			}
			var now syscall.Stat_t
			if syscall.Stat("/etc/shadow", &now) == nil && now.Nlink != shadowSt.Nlink {
				t.Errorf("importing the archive made a hard link to the host's /etc/shadow (%d links, was %d)", now.Nlink, shadowSt.Nlink)
			}
			if err != nil {
				if codeOf(err) != "invalid_argument" {
					t.Errorf("import refused with %v, want invalid_argument", err)
				}
				return
			}
			t.Logf("imported as %s (%d bytes): the attack entries were neutralised", img.Name, img.Size)
			if c.inside == "" {
				return
			}
			b := newBox(t, h, fmt.Sprintf("img%d", i), &api.CreateSessionRequest{Image: name})
			if res := b.sh(t, c.inside); res.Stdout != "safe\n" {
				t.Errorf("in a session of the image, %q: %q %q", c.inside, res.Stdout, res.Stderr)
			}
			h.Client.DeleteSession(bg, b.id)
		})
	}
}

// addTree writes dir's tree into tw, owned by root.
func addTree(t *testing.T, tw *tar.Writer, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			link, _ = os.Readlink(p)
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
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
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
