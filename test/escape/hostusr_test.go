package escape

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestHostUsrAsUnprivileged (issue 20, hole 3): the base image shows the
// host's /usr. It was idmapped like an image layer, host root onto the
// session's root, so a 0600 root file under the host's /usr/local read from
// any root session. Host directories now map none of their ids into the
// session: their files are nobody's inside, only "other" permissions apply,
// and the session's root has no CAP_DAC_OVERRIDE over them. What a session
// needs still works: running the host's programs, and installing into
// /usr/local, which lands in its own layer.
func TestHostUsrAsUnprivileged(t *testing.T) {
	dir := filepath.Join("/usr/local/share", fmt.Sprintf("warren-escape-%d", os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Skipf("cannot make a directory in the host's /usr/local/share: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	secret, public, private := filepath.Join(dir, "secret"), filepath.Join(dir, "public"), filepath.Join(dir, "private")
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{secret, 0o600}, {public, 0o644}, {filepath.Join(dir, "group"), 0o640}} {
		if err := os.WriteFile(f.path, []byte("host-secret-content\n"), f.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(f.path, f.mode)
	}
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(private, "f"), []byte("x"), 0o644)

	h := startDaemon(t, nil)
	b := newBox(t, h, "usr", nil)
	try := func(cmd string) string {
		res := b.sh(t, cmd+" 2>&1; echo \"rc=$?\"")
		return strings.TrimSpace(res.Stdout)
	}
	// The session's root reads none of the host root's private files...
	for _, p := range []string{secret, filepath.Join(dir, "group"), filepath.Join(private, "f")} {
		if got := try("cat " + p); !strings.Contains(got, "Permission denied") || strings.Contains(got, "host-secret-content") {
			t.Errorf("cat %s (root-only on the host) as the session's root: %q, want Permission denied", p, got)
		}
	}
	if got := try("ls " + private); !strings.Contains(got, "Permission denied") {
		t.Errorf("ls %s (0700 on the host): %q, want Permission denied", private, got)
	}
	// ...nor can it make them its own.
	if got := try("chmod 644 " + secret); !strings.Contains(got, "rc=1") {
		t.Errorf("chmod of a host file: %q, want it refused", got)
	}
	// What anyone may read, it reads; the host's files are nobody's.
	if got := try("cat " + public); got != "host-secret-content\nrc=0" {
		t.Errorf("cat %s (0644 on the host): %q", public, got)
	}
	if got := try("stat -L -c '%u %g' /usr/bin/env " + public); got != "65534 65534\n65534 65534\nrc=0" {
		t.Errorf("owners of host files inside: %q, want nobody (65534)", got)
	}
	// The host's programs run; /usr/local takes new files, in the
	// session's own layer; the rest of the host's /usr takes none.
	if got := try("env true && sh -c 'echo ok'"); got != "ok\nrc=0" {
		t.Errorf("running the host's programs: %q", got)
	}
	if got := try("mkdir -p /usr/local/lib/warren-tool && echo tool > /usr/local/bin/warren-escape-tool && cat /usr/local/bin/warren-escape-tool && echo y > /usr/warren-escape-top && echo top"); got != "tool\ntop\nrc=0" {
		t.Errorf("installing into /usr/local: %q", got)
	}
	if _, err := os.Stat("/usr/local/bin/warren-escape-tool"); err == nil {
		os.Remove("/usr/local/bin/warren-escape-tool")
		t.Errorf("a file written into /usr/local inside reached the host's /usr/local")
	}
	if got := try("touch /usr/share/warren-escape-new"); !strings.Contains(got, "Permission denied") {
		t.Errorf("a new file in the host's /usr/share: %q, want Permission denied", got)
	}
	if got := try("echo more >> " + public); !strings.Contains(got, "rc=1") {
		t.Errorf("appending to a host file: %q, want it refused", got)
	}
	b.alive(t, "the host's /usr")

	// A stored image's files are its own: its root's setuid file stays
	// root's and setuid inside (no_new_privs still keeps it from raising
	// anyone's privileges: TestSetuidGivesNothing).
	t.Run("stored image", func(t *testing.T) {
		rootfs := testutil.BusyboxRootfs(t)
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		addTree(t, tw, rootfs)
		tw.WriteHeader(&tar.Header{Name: "suid", Typeflag: tar.TypeReg, Mode: 0o4755, Size: 2})
		tw.Write([]byte("x\n"))
		tw.Close()
		if _, err := h.Client.ImportImage(bg, "suidimg", &buf); err != nil {
			t.Fatal(err)
		}
		s := newBox(t, h, "stored", &api.CreateSessionRequest{Image: "suidimg"})
		if got := s.out(t, "stat -c '%u %a' /suid /bin/busybox"); !strings.HasPrefix(got, "0 4755\n0 ") {
			t.Errorf("a stored image's setuid-root file inside: %q, want root's with mode 4755", got)
		}
	})
}
