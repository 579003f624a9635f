package testutil

import (
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// busyboxPath is the host's static busybox (Debian package busybox-static).
const busyboxPath = "/bin/busybox"

// BusyboxRootfs builds a minimal rootfs from the host's static busybox in a
// fresh t.TempDir() and returns its path. It skips the test if
// /bin/busybox is missing or not statically linked.
//
// The tree: bin/busybox, one relative symlink bin/<applet> -> busybox per
// applet, sbin -> bin, usr/bin -> ../bin, usr/sbin -> ../bin, etc/passwd
// and etc/group (root, and tty as gid 5), and the empty directories tmp
// (1777), proc, dev, sys, run, root (0700) and workspace. Every link is
// relative, so the tree works wherever it is mounted.
func BusyboxRootfs(t testing.TB) string {
	t.Helper()
	applets := busyboxApplets(t)
	dir := t.TempDir()
	mkdir := func(rel string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // not subject to the umask
			t.Fatal(err)
		}
	}
	symlink := func(target, rel string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(dir, rel)); err != nil {
			t.Fatal(err)
		}
	}
	writeFile := func(rel, content string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}

	mkdir(".", 0o755)
	for _, d := range []string{"bin", "usr", "etc", "proc", "dev", "sys", "run", "workspace"} {
		mkdir(d, 0o755)
	}
	mkdir("tmp", 0o777|os.ModeSticky)
	mkdir("root", 0o700)
	symlink("bin", "sbin")
	symlink("../bin", "usr/bin")
	symlink("../bin", "usr/sbin")

	copyFile(t, busyboxPath, filepath.Join(dir, "bin", "busybox"), 0o755)
	for _, a := range applets {
		if a == "busybox" {
			continue
		}
		symlink("busybox", filepath.Join("bin", a))
	}

	writeFile("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n", 0o644)
	writeFile("etc/group", "root:x:0:\ntty:x:5:\n", 0o644)
	return dir
}

// busyboxApplets checks the host's busybox and returns its applet names.
func busyboxApplets(t testing.TB) []string {
	t.Helper()
	f, err := elf.Open(busyboxPath)
	if err != nil {
		t.Skipf("no usable %s (install busybox-static): %v", busyboxPath, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Skipf("%s is not statically linked (install busybox-static)", busyboxPath)
		}
	}
	out, err := exec.Command(busyboxPath, "--list").Output()
	if err != nil {
		t.Fatalf("%s --list: %v", busyboxPath, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if strings.ContainsRune(a, '/') || a == "." || a == ".." {
			t.Fatalf("%s --list: unexpected applet name %q", busyboxPath, a)
		}
		applets = append(applets, a)
	}
	if len(applets) == 0 {
		t.Fatalf("%s --list: no applets", busyboxPath)
	}
	return applets
}

func copyFile(t testing.TB, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, mode); err != nil {
		t.Fatal(err)
	}
}
