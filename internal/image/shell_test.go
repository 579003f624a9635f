package image

import (
	"archive/tar"
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/warrenhq/warren/internal/errdefs"
)

// TestImportShellCheck imports rootfs trees with and without a working
// /bin/sh, as a directory and as a tarball: a broken one is refused with
// ErrInvalidArgument naming the link, and nothing is stored.
func TestImportShellCheck(t *testing.T) {
	sh := entry{name: "bin/busybox", mode: 0o755, body: "#!/bin/busybox\n"}
	dir := func(n string) entry { return entry{name: n, typ: tar.TypeDir, mode: 0o755} }
	link := func(n, target string) entry { return entry{name: n, typ: tar.TypeSymlink, link: target} }
	tests := []struct {
		name string
		ents []entry
		want []string // in the error; none: accepted
	}{
		{name: "relative link", ents: []entry{dir("bin"), sh, link("bin/sh", "busybox")}},
		{name: "absolute link inside the image", ents: []entry{dir("bin"), sh, link("bin/sh", "/bin/busybox")}},
		{name: "link out through .. stays inside", ents: []entry{dir("bin"), sh, link("bin/sh", "../../../../bin/busybox")}},
		{name: "merged /usr", ents: []entry{dir("usr"), dir("usr/bin"), link("bin", "usr/bin"),
			{name: "usr/bin/dash", mode: 0o755, body: "x"}, link("usr/bin/sh", "dash")}},
		{name: "a file", ents: []entry{dir("bin"), {name: "bin/sh", mode: 0o755, body: "x"}}},
		{
			name: "host-absolute link (busybox --install -s)",
			ents: []entry{dir("bin"), sh, link("bin/sh", "/tmp/rootfs/bin/busybox")},
			want: []string{"/bin/sh is a broken link: /bin/sh -> /tmp/rootfs/bin/busybox is not in the image", "make the link relative"},
		},
		{
			// The host has /usr/bin/env; the image does not.
			name: "absolute link to a host file",
			ents: []entry{dir("bin"), sh, link("bin/sh", "/usr/bin/env")},
			want: []string{"/bin/sh -> /usr/bin/env is not in the image"},
		},
		{
			name: "dangling through a second link",
			ents: []entry{dir("bin"), link("bin/sh", "busybox"), link("bin/busybox", "/opt/busybox")},
			want: []string{"/bin/busybox -> /opt/busybox is not in the image"},
		},
		{
			name: "dangling relative link",
			ents: []entry{dir("bin"), link("bin/sh", "dash")},
			want: []string{"/bin/sh -> dash (/bin/dash) is not in the image"},
		},
		{name: "missing", ents: []entry{dir("bin"), sh}, want: []string{"the image has no /bin/sh", "ln -s busybox"}},
		{name: "no /bin at all", ents: []entry{{name: "f", body: "x"}}, want: []string{"the image has no /bin/sh"}},
		{name: "a link loop", ents: []entry{dir("bin"), link("bin/sh", "sh2"), link("bin/sh2", "sh")}, want: []string{"a loop"}},
		{name: "a directory", ents: []entry{dir("bin"), dir("bin/sh")}, want: []string{"/bin/sh is not an executable file"}},
		{name: "not executable", ents: []entry{dir("bin"), {name: "bin/sh", mode: 0o644, body: "x"}}, want: []string{"/bin/sh is not an executable file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			s.shellOptional = false
			data := makeTar(t, tc.ents...)
			check := func(how string, err error) {
				t.Helper()
				if len(tc.want) == 0 {
					if err != nil {
						t.Errorf("%s: %v, want it accepted", how, err)
					}
					return
				}
				if !errdefs.Is(err, errdefs.ErrInvalidArgument) {
					t.Fatalf("%s = %v, want ErrInvalidArgument", how, err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %q lacks %q", how, err, w)
					}
				}
			}
			_, err := s.ImportTar(t.Context(), "fromtar", bytes.NewReader(data))
			check("ImportTar", err)
			// The same tree as a directory.
			src := t.TempDir()
			if err := s.untar(t.Context(), bytes.NewReader(data), src, modeRootfs); err != nil {
				t.Fatal(err)
			}
			_, err = s.ImportDir(t.Context(), "fromdir", src)
			check("ImportDir", err)
			checkTmpEmpty(t, s)
			if len(tc.want) > 0 {
				if list, err := s.List(); err != nil || len(list) != 0 {
					t.Errorf("a refused import left images: %v, %v", list, err)
				}
			}
		})
	}
}

// TestImportOCIShell checks OCI images: one without a shell is made to
// run one program (distroless) and is accepted; a broken /bin/sh link is
// refused as in a rootfs.
func TestImportOCIShell(t *testing.T) {
	s := newStore(t)
	s.shellOptional = false
	tag, err := name.NewTag("example.com/x:1")
	if err != nil {
		t.Fatal(err)
	}
	archive := func(ents ...entry) *bytes.Reader {
		var buf bytes.Buffer
		if err := tarball.Write(tag, ociImage(t, hostPlatform(t), v1.Config{}, layerOf(t, ents...)), &buf); err != nil {
			t.Fatal(err)
		}
		return bytes.NewReader(buf.Bytes())
	}
	if _, err := s.ImportDockerArchive(t.Context(), "distroless", archive(entry{name: "app", mode: 0o755, body: "x"}), ""); err != nil {
		t.Errorf("an OCI image without a shell: %v, want it accepted", err)
	}
	_, err = s.ImportDockerArchive(t.Context(), "broken",
		archive(entry{name: "bin", typ: tar.TypeDir, mode: 0o755}, entry{name: "bin/sh", typ: tar.TypeSymlink, link: "/nowhere/busybox"}), "")
	if !errdefs.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "/bin/sh -> /nowhere/busybox") {
		t.Errorf("an OCI image with a broken /bin/sh: %v, want ErrInvalidArgument naming the link", err)
	}
}
