package image

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestEnsureHostImage builds an image like E2B's base template and checks
// its user (in place of the skeleton's user of the same uid), home, sudo
// rules, environment and working directory, and that an unchanged host
// gets the same content back.
func TestEnsureHostImage(t *testing.T) {
	s := newStore(t)
	img, err := s.EnsureHostImage("e2b-base", HostImage{User: "user", Sudo: true})
	if err != nil {
		t.Fatal(err)
	}
	if img.User != "user" || img.WorkingDir != "/home/user" || !strings.Contains(strings.Join(img.Env, " "), "HOME=/home/user") || len(img.HostDirs) == 0 {
		t.Fatalf("image: user %q, cwd %q, env %v, host dirs %v", img.User, img.WorkingDir, img.Env, img.HostDirs)
	}
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(img.RootFS, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	passwd := read("etc/passwd")
	if !strings.Contains(passwd, "user:x:1000:1000:user:/home/user:/bin/bash\n") || strings.Contains(passwd, "sandbox:") {
		t.Errorf("passwd:\n%s", passwd)
	}
	if g := read("etc/group"); !strings.Contains(g, "user:x:1000:\n") || !strings.Contains(g, "sudo:x:27:user\n") || strings.Contains(g, "sandbox:") {
		t.Errorf("group:\n%s", g)
	}
	if sh := read("etc/shadow"); !strings.Contains(sh, "user:*:") || strings.Contains(sh, "sandbox:") {
		t.Errorf("shadow:\n%s", sh)
	}
	if su := read("etc/sudoers"); !strings.Contains(su, "%sudo ALL=(ALL:ALL) NOPASSWD: ALL") {
		t.Errorf("sudoers:\n%s", su)
	}
	fi, err := os.Stat(filepath.Join(img.RootFS, "home", "user"))
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != 1000 {
		t.Errorf("home: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(img.RootFS, "home", "sandbox")); !os.IsNotExist(err) {
		t.Errorf("the skeleton's /home/sandbox is still there: %v", err)
	}
	again, err := s.EnsureHostImage("e2b-base", HostImage{User: "user", Sudo: true})
	if err != nil || again.Digest != img.Digest {
		t.Fatalf("a second build: %v, digest %s then %s", err, img.Digest, again.Digest)
	}
	for _, bad := range []HostImage{{User: "root"}, {User: "Bad User"}} {
		if _, err := s.EnsureHostImage("x", bad); err == nil {
			t.Errorf("EnsureHostImage(%+v) succeeded", bad)
		}
	}
}
