package testutil

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// Tmpfs mounts a tmpfs of sizeMB MiB on a fresh directory an unprivileged
// user can pass through (see TraversableDir), and unmounts it at cleanup:
// a small filesystem for tests that fill the disk. It needs root.
func Tmpfs(t testing.TB, sizeMB int) string {
	t.Helper()
	return tmpfs(t, sizeMB, 0)
}

// NoexecTmpfs is Tmpfs mounted noexec, as hardened hosts mount /var.
func NoexecTmpfs(t testing.TB, sizeMB int) string {
	t.Helper()
	return tmpfs(t, sizeMB, unix.MS_NOEXEC)
}

func tmpfs(t testing.TB, sizeMB int, flags uintptr) string {
	t.Helper()
	RequiresRoot(t)
	dir := TraversableDir(t)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NODEV|unix.MS_NOSUID|flags, fmt.Sprintf("size=%dm,mode=0711", sizeMB)); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount the tmpfs on %s: %v", dir, err)
		}
	})
	return dir
}
