package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// TestFileOpsRefuseMagicLinks: with only the magic-link rule (this test
// process is not the sandbox's PID 1, so the own-process guard does not
// apply), no file operation reaches a directory through a descriptor's
// /proc link, directly or through a planted symlink to it.
func TestFileOpsRefuseMagicLinks(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644)
	os.Mkdir(filepath.Join(outside, "sub"), 0o755)
	fd, err := unix.Open(outside, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink("/proc/self/fd/"+strconv.Itoa(fd), link); err != nil {
		t.Fatal(err)
	}
	a := &Agent{}
	for _, base := range []string{"/proc/self/fd/" + strconv.Itoa(fd), "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(fd), link} {
		denied := func(op string, err error) {
			t.Helper()
			if errdefs.ClassOf(fileError(base, err)) != errdefs.ErrPermissionDenied {
				t.Errorf("%s via %s: %v, want permission_denied", op, base, err)
			}
		}
		_, err := stat(base + "/secret")
		denied("stat", err)
		_, err = list(base)
		denied("list", err)
		_, err = list(base + "/sub")
		denied("list sub", err)
		_, err = a.mkdirAll(base + "/new")
		denied("mkdir", err)
		denied("remove", remove(base+"/sub", true))
		denied("remove file", remove(base+"/secret", false))
		_, err = openIn(unix.AT_FDCWD, base+"/secret", unix.O_RDONLY, 0)
		denied("open", err)
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 2 {
		t.Errorf("the outside directory changed: %v", ents)
	}
	// Ordinary symlinks still resolve.
	own := t.TempDir()
	os.WriteFile(filepath.Join(own, "f"), []byte("x"), 0o644)
	os.Symlink(own, filepath.Join(own, "l"))
	if e, err := stat(filepath.Join(own, "l") + "/f"); err != nil || e.Type != "file" {
		t.Errorf("stat through a symlink: %+v, %v", e, err)
	}
	if e, err := stat(filepath.Join(own, "l")); err != nil || e.Type != "symlink" || e.Target != own {
		t.Errorf("stat of a symlink: %+v, %v", e, err)
	}
	if fd, err := a.mkdirAll(filepath.Join(own, "l", "x", "y")); err != nil {
		t.Errorf("mkdir through a symlink: %v", err)
	} else {
		unix.Close(fd)
	}
	if err := remove(filepath.Join(own, "l"), true); err != nil {
		t.Errorf("remove a symlink: %v", err)
	}
	if _, err := os.Stat(filepath.Join(own, "x", "y")); err != nil {
		t.Errorf("removing the symlink removed its target's contents: %v", err)
	}
	if err := remove(filepath.Join(own, "x"), false); errdefs.ClassOf(err) != errdefs.ErrConflict {
		t.Errorf("remove a non-empty directory: %v, want conflict", err)
	}
	if err := remove(own+"/", true); err != nil {
		t.Errorf("remove -r %s/: %v", own, err)
	}
	if _, err := os.Lstat(own); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", own, err)
	}
}

// TestListFIFO: listing or describing a FIFO answers at once.
func TestListFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := list(p); errdefs.ClassOf(err) != errdefs.ErrInvalidArgument {
		t.Errorf("list of a FIFO: %v, want invalid_argument", err)
	}
	if e, err := stat(p); err != nil || e.Type != "other" {
		t.Errorf("stat of a FIFO: %+v, %v", e, err)
	}
}
