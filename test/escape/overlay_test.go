package escape

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRootFilesystemTricks: overlayfs's private xattrs set from inside,
// and the host's device nodes bound into /dev.
func TestRootFilesystemTricks(t *testing.T) {
	h := startDaemon(t, nil)
	b := newBox(t, h, "ovl", nil)
	b.needPython(t)

	t.Run("overlay xattrs", func(t *testing.T) {
		// With userxattr, overlayfs keeps its metadata in user.overlay.*
		// of the upper layer. Set from inside, such names must be refused or
		// stored escaped (user.overlay.overlay.*), never obeyed: a redirect
		// to /etc must not turn an empty directory into /etc.
		got := b.pyKV(t, `
os.makedirs("/workspace/d", exist_ok=True)
open("/workspace/f", "w").close()
for name, val in [("redirect", b"/etc"), ("opaque", b"y"), ("origin", b"\0" * 16), ("metacopy", b"")]:
    out("d_" + name, tryos(os.setxattr, "/workspace/d", "user.overlay." + name, val))
    out("f_" + name, tryos(os.setxattr, "/workspace/f", "user.overlay." + name, val))
out("trusted", tryos(os.setxattr, "/workspace/d", "trusted.overlay.redirect", b"/etc"))
out("d_list", ",".join(os.listdir("/workspace/d")) or "empty")
`)
		if got["trusted"] != "EPERM" {
			t.Errorf("setxattr trusted.overlay.redirect: %q, want EPERM", got["trusted"])
		}
		if got["d_list"] != "empty" {
			t.Errorf("an empty directory with user.overlay.redirect=/etc lists %q: overlayfs obeyed an xattr set from inside", got["d_list"])
		}
		uppers, _ := filepath.Glob(filepath.Join(h.DataDir, "layers", "*", "upper", "workspace"))
		if len(uppers) != 1 {
			t.Skipf("cannot find the session's upper layer on the host (%v)", uppers)
		}
		for _, p := range []string{"d", "f"} {
			sz, err := unix.Llistxattr(filepath.Join(uppers[0], p), nil)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, sz)
			sz, _ = unix.Llistxattr(filepath.Join(uppers[0], p), buf)
			names := strings.Split(strings.TrimRight(string(buf[:sz]), "\x00"), "\x00")
			t.Logf("xattrs of /workspace/%s in the upper layer on the host: %q", p, names)
			for _, name := range names {
				for _, key := range []string{"redirect", "opaque", "origin", "metacopy"} {
					if name == "user.overlay."+key && got[p+"_"+key] == "OK" {
						t.Errorf("setting user.overlay.%s on /workspace/%s inside stored the raw overlay xattr %q in the upper layer", key, p, name)
					}
				}
			}
		}
		t.Logf("setxattr results: %v", got)
	})

	t.Run("host device nodes in /dev", func(t *testing.T) {
		// null, zero, full, random, urandom and tty are the host's device
		// inodes, bound in: they must not be changeable from inside.
		got := b.pyKV(t, `
for d in ["null", "zero", "full", "random", "urandom", "tty"]:
    p = "/dev/" + d
    st = os.stat(p)
    out(d + "_chmod", tryos(os.chmod, p, 0o600))
    out(d + "_chown", tryos(os.chown, p, 0, 0))
    out(d + "_utime", tryos(lambda: os.utime(p, (0, 0))))
    out(d + "_unlink", tryos(os.unlink, p))
    out(d + "_rename", tryos(os.rename, p, "/dev/moved"))
    out(d + "_xattr", tryos(os.setxattr, p, "user.x", b"1"))
`)
		want := map[string][]string{
			"chmod": {"EPERM"}, "chown": {"EPERM"}, "utime": {"EPERM"},
			"unlink": {"EBUSY"}, "rename": {"EBUSY"}, "xattr": {"EPERM"},
		}
		for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
			for op, w := range want {
				if g := got[d+"_"+op]; !oneOf(g, w...) {
					t.Errorf("%s of the host's /dev/%s from inside: %q, want %s", op, d, g, strings.Join(w, " or "))
				}
			}
		}
		if res := b.sh(t, "stat -c '%a %t:%T' /dev/null"); res.Stdout != "666 1:3\n" {
			t.Errorf("/dev/null after the attempts: %q", res.Stdout)
		}
	})
}
