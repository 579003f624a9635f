package escape

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostShadowUnreachable tries every path trick to read the host's
// /etc/shadow from inside (a shell and its programs) and through the file
// API. The sandbox has its own synthesized /etc/shadow: reaching that is
// fine, any line of the host's is a break-out.
func TestHostShadowUnreachable(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "thief", nil)
	j := newShadowJudge(t, b)
	// Planted paths: a deep directory, symlinks to the shadow and to /.
	b.out(t, `mkdir -p /workspace/a/b/c/d && cd /workspace &&
ln -s /etc/shadow abs && ln -s ../../../../../../../../etc/shadow rel && ln -s / root &&
ln -s /proc/1/root agentroot && ln -s ../../../../../../../.. a/b/c/d/up`)

	t.Run("inside", func(t *testing.T) {
		b.needPython(t)
		cases := []struct {
			name, path string
			want       string // "own" (the sandbox's shadow) or an errno name
		}{
			{"by path", "/etc/shadow", "own"},
			{"dotdot chain from /workspace", "/workspace/../../../../../../etc/shadow", "own"},
			{"relative dotdot chain", "../../../../../../../../etc/shadow", "own"},
			{"dotdot chain from a deep dir", "/workspace/a/b/c/d/../../../../../../../../../../etc/shadow", "own"},
			{"planted absolute symlink", "/workspace/abs", "own"},
			{"planted relative symlink", "/workspace/rel", "own"},
			{"planted symlink to /", "/workspace/root/etc/shadow", "own"},
			{"symlink chain up", "/workspace/a/b/c/d/up/etc/shadow", "own"},
			{"agent's root /proc/1/root", "/proc/1/root/etc/shadow", "EACCES"},
			{"agent's root through a planted symlink", "/workspace/agentroot/etc/shadow", "EACCES"},
			{"agent's cwd /proc/1/cwd", "/proc/1/cwd/etc/shadow", "EACCES"},
			{"/proc/self/cwd/../..", "/proc/self/cwd/../../etc/shadow", "own"},
			{"/proc/self/root/../..", "/proc/self/root/../../../etc/shadow", "own"},
			{"/proc/thread-self/root", "/proc/thread-self/root/etc/shadow", "own"},
		}
		var prog strings.Builder
		prog.WriteString("import base64\nos.chdir('/workspace')\n")
		for i, c := range cases {
			fmt.Fprintf(&prog, `
try:
    with open(%q, 'rb') as f: out("c%d", "OK", base64.b64encode(f.read()).decode())
except OSError as x:
    out("c%d", ename(x.errno))
`, c.path, i, i)
		}
		got := b.pyKV(t, prog.String())
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := got[fmt.Sprintf("c%d", i)]
				status, b64, _ := strings.Cut(r, " ")
				content, _ := base64.StdEncoding.DecodeString(b64)
				if l := j.leaks(string(content)); l != "" {
					t.Fatalf("reading %s inside returned the HOST's /etc/shadow (line %q)", c.path, l)
				}
				switch {
				case c.want == "own" && (status != "OK" || string(content) != j.sandbox):
					t.Errorf("reading %s inside: %s %q, want the sandbox's own shadow %q", c.path, status, content, j.sandbox)
				case c.want != "own" && status != c.want:
					t.Errorf("reading %s inside: %s %q, want %s", c.path, status, content, c.want)
				}
			})
		}
	})

	t.Run("host paths do not exist inside", func(t *testing.T) {
		wd, _ := os.Getwd()
		exe, _ := os.Executable()
		for _, p := range []string{h.DataDir, filepath.Join(h.DataDir, "sessions"), wd, exe, "/var/lib/warren"} {
			res := b.sh(t, "test -e '"+p+"' || test -L '"+p+"'; echo $?")
			if res.Stdout != "1\n" {
				t.Errorf("host path %s exists inside the sandbox (test -e: %q)", p, res.Stdout)
			}
			if e, err := h.Client.StatFile(bg, b.id, p); codeOf(err) != "not_found" {
				t.Errorf("host path %s through the file API: %+v, %v; want not_found", p, e, err)
			}
		}
	})

	t.Run("file API", func(t *testing.T) {
		cases := []struct {
			name, path string
			want       string // "own", or the error code wanted
			alt        string // another acceptable answer
		}{
			{"by path", "/etc/shadow", "own", ""},
			{"relative dotdot chain", "../../../../../../etc/shadow", "own", ""},
			{"absolute dotdot chain", "/workspace/../../../../etc/shadow", "own", ""},
			{"planted ln -s /etc/shadow", "abs", "own", ""},
			{"planted relative symlink", "rel", "own", ""},
			{"planted ln -s / root", "root/etc/shadow", "own", ""},
			{"symlink chain up", "a/b/c/d/up/etc/shadow", "own", ""},
			// The file API runs in the agent, PID 1: its own root is the sandbox's.
			{"/proc/1/root", "/proc/1/root/etc/shadow", "own", "permission_denied"},
			{"planted symlink to /proc/1/root", "agentroot/etc/shadow", "own", "permission_denied"},
			{"/proc/self/root", "/proc/self/root/../../etc/shadow", "own", "permission_denied"},
			{"/proc/self/cwd", "/proc/self/cwd/etc/shadow", "own", "permission_denied"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				got, err := readAPI(h, b.id, c.path)
				if l := j.leaks(got); l != "" {
					t.Fatalf("ReadFile(%s) returned the HOST's /etc/shadow (line %q)", c.path, l)
				}
				if err != nil && strings.Contains(err.Error(), j.hostFirst) {
					t.Fatalf("ReadFile(%s) error carries the host's shadow: %v", c.path, err)
				}
				if c.want == "own" && err == nil && got == j.sandbox {
					return
				}
				if code := codeOf(err); err != nil && (code == c.want || code == c.alt) {
					return
				}
				want := c.want
				if c.alt != "" {
					want += " or " + c.alt
				}
				t.Errorf("ReadFile(%s) = %q, %v; want %s", c.path, short(got), err, want)
			})
		}
	})

	t.Run("file API through the agent's descriptors", func(t *testing.T) {
		// The file API runs as PID 1, so /proc/self is the agent's: its
		// stdout and stderr are its log file in the host's state
		// directory, opened before the pivot. No operation may open,
		// list, describe or archive any of it (the descriptors' targets
		// name host paths; maps is the agent's memory map).
		for _, p := range []string{"/proc/self/fd", "/proc/1/fd", "/proc/thread-self/fd", "/proc/self/map_files", "/proc/1/task", "/proc/self/fdinfo"} {
			if ents, err := h.Client.ListFiles(bg, b.id, p); codeOf(err) != "permission_denied" {
				t.Errorf("ListFiles(%s) = %d entries, %v; want permission_denied", p, len(ents), err)
			}
		}
		for _, p := range []string{"/proc/self/fd/1", "/proc/1/fd/2", "/proc/self/maps", "/proc/1/exe", "/proc/1/root", "/proc/self/cwd", "/proc/1/environ"} {
			if e, err := h.Client.StatFile(bg, b.id, p); codeOf(err) != "permission_denied" {
				t.Errorf("StatFile(%s) = %+v, %v; want permission_denied", p, e, err)
			}
		}
		for _, p := range []string{"/proc/self/", "/proc/1", "/proc/1/fd", "/proc/self/maps"} {
			rc, err := h.Client.DownloadArchive(bg, b.id, p)
			if err == nil {
				body, _ := io.ReadAll(rc)
				rc.Close()
				t.Errorf("DownloadArchive(%s) = %d bytes; want an error", p, len(body))
			}
		}
		for _, p := range []string{"/proc/self/fd/1", "/proc/1/fd/2", "/proc/thread-self/fd/1"} {
			if got, err := readAPI(h, b.id, p); err == nil {
				t.Errorf("ReadFile(%s) read a host file (the agent's log in the daemon's state directory): %d bytes %q", p, len(got), short(got))
			}
		}
		// An upload into /proc/self/fd must not write through the links.
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: "1", Mode: 0o644, Size: 5, Typeflag: tar.TypeReg})
		tw.Write([]byte("PWNED"))
		tw.Close()
		_, err := h.Client.UploadArchive(bg, b.id, "/proc/self/fd", &buf)
		if codeOf(err) != "permission_denied" {
			t.Errorf("UploadArchive into /proc/self/fd: %v, want permission_denied", err)
		}
		logs, _ := filepath.Glob(filepath.Join(h.DataDir, "sessions", "*", "agent.log"))
		for _, l := range logs {
			if c, _ := os.ReadFile(l); bytes.Contains(c, []byte("PWNED")) {
				t.Errorf("the upload wrote into the host file %s", l)
			}
		}
	})

	t.Run("file API listing of a planted root", func(t *testing.T) {
		hostOnly := hostOnlyNames(t, b, "/etc")
		for _, p := range []string{"root/etc", "/workspace/root/etc", "a/b/c/d/up/etc", "/proc/1/root/etc", "/proc/self/root/etc"} {
			ents, err := h.Client.ListFiles(bg, b.id, p)
			if err != nil {
				if oneOf(codeOf(err), "permission_denied", "not_found") {
					continue
				}
				t.Errorf("ListFiles(%s): %v", p, err)
				continue
			}
			for _, e := range ents {
				if hostOnly[e.Name] {
					t.Errorf("ListFiles(%s) shows the HOST's /etc: entry %q exists only on the host", p, e.Name)
				}
			}
		}
	})

	t.Run("file API archive of /etc", func(t *testing.T) {
		rc, err := h.Client.DownloadArchive(bg, b.id, "root/etc")
		if err != nil {
			t.Fatalf("DownloadArchive(root/etc): %v", err)
		}
		defer rc.Close()
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("read archive: %v", err)
			}
			body, _ := io.ReadAll(tr)
			if l := j.leaks(string(body)); l != "" {
				t.Errorf("archive entry %s carries the HOST's /etc/shadow (line %q)", hdr.Name, l)
			}
		}
	})

	t.Run("tar slip", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			entries []tar.Header
		}{
			{"dotdot entry", []tar.Header{{Name: "../../../../../tmp/slipped", Typeflag: tar.TypeReg, Mode: 0o644, Size: 4}}},
			{"symlink then through it", []tar.Header{
				{Name: "evil", Typeflag: tar.TypeSymlink, Linkname: "/tmp"},
				{Name: "evil/slipped", Typeflag: tar.TypeReg, Mode: 0o644, Size: 4},
			}},
			{"relative symlink then through it", []tar.Header{
				{Name: "evil2", Typeflag: tar.TypeSymlink, Linkname: "../../../../../tmp"},
				{Name: "evil2/slipped", Typeflag: tar.TypeReg, Mode: 0o644, Size: 4},
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var buf bytes.Buffer
				tw := tar.NewWriter(&buf)
				for _, hd := range tc.entries {
					tw.WriteHeader(&hd)
					if hd.Size > 0 {
						tw.Write([]byte("slip"))
					}
				}
				tw.Close()
				_, err := h.Client.UploadArchive(bg, b.id, "/workspace/extract", &buf)
				if codeOf(err) != "invalid_argument" {
					t.Errorf("UploadArchive with %s: %v, want invalid_argument", tc.name, err)
				}
				if res := b.sh(t, "test -e /tmp/slipped; echo $?"); res.Stdout != "1\n" {
					t.Errorf("the tar entry left its target directory: /tmp/slipped exists")
				}
			})
		}
	})
	b.alive(t, "the path attacks")
}

// hostOnlyNames returns the names in the host's dir that the sandbox's dir
// of the same path does not have.
func hostOnlyNames(t testing.TB, b *box, dir string) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Skipf("host %s: %v", dir, err)
	}
	inside := map[string]bool{}
	for _, n := range strings.Fields(b.out(t, "ls -A "+dir)) {
		inside[n] = true
	}
	only := map[string]bool{}
	for _, e := range ents {
		if !inside[e.Name()] {
			only[e.Name()] = true
		}
	}
	if len(only) == 0 {
		t.Skipf("the host's %s has nothing the sandbox's lacks", dir)
	}
	return only
}
