package quota

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// smallDataDir is dataDir on a tmpfs of sizeMB MiB: a data filesystem the
// test can fill.
func smallDataDir(t *testing.T, sizeMB int) string {
	t.Helper()
	dir := dataDir(t)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NODEV|unix.MS_NOSUID, fmt.Sprintf("size=%dm,mode=0700", sizeMB)); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount the tmpfs on %s: %v", dir, err)
		}
	})
	return dir
}

// lostWrites matches the kernel's lines for a write-back that failed: what
// a loop device on a full filesystem logs when a layer's data is lost.
var lostWrites = regexp.MustCompile(`potential data loss|Buffer I/O error|lost async page write|loop\d+.*error`)

// kmsgSince starts reading the kernel log at its current end; the returned
// function returns the lines logged since that match lostWrites.
func kmsgSince(t *testing.T) func() []string {
	t.Helper()
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/kmsg: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.Seek(fd, 0, unix.SEEK_END); err != nil {
		t.Fatalf("seek /dev/kmsg: %v", err)
	}
	return func() []string {
		var bad []string
		buf := make([]byte, 8192)
		for {
			n, err := unix.Read(fd, buf)
			if errors.Is(err, unix.EPIPE) {
				continue // records overwritten meanwhile: read on
			}
			if err != nil {
				return bad
			}
			if line := string(buf[:n]); lostWrites.MatchString(line) {
				bad = append(bad, strings.TrimSpace(line))
			}
		}
	}
}

// writeNoSync writes data to path without syncing it, as most programs do:
// it sits dirty in the layer's page cache.
func writeNoSync(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

func hostFree(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// TestGuardOvercommit: with overcommit on, two layers whose limits add up
// to twice the data filesystem, each as big as it. One writes until it cannot: it gets ENOSPC
// while the filesystem still has room; the other's unsynced data then
// syncs without error and reads back intact from the image after the page
// cache is dropped; the kernel logs no lost write-back; and when the
// writer deletes its file, it can write again.
func TestGuardOvercommit(t *testing.T) {
	dir := smallDataDir(t, 40)
	l := open(t, dir, Options{Mode: ModeImagePerLayer, Overcommit: true, WatermarkBytes: 4 * MiB})
	overcommitted(t, dir, l, 40*MiB)
}

// TestGuardOvercommitShared is TestGuardOvercommit with the layers in one
// shared image (sized to the free space), guarded as a whole. It needs a
// kernel whose ext4 mounts project quotas (the VM stage's).
func TestGuardOvercommitShared(t *testing.T) {
	dir := smallDataDir(t, 80)
	l := open(t, dir, Options{Mode: ModeSharedImage, Overcommit: true, WatermarkBytes: 4 * MiB})
	overcommitted(t, dir, l, 72*MiB)
}

// overcommitted runs TestGuardOvercommit's steps on l, whose data
// directory dir holds about limit bytes.
func overcommitted(t *testing.T, dir string, l *Layers, limit int64) {
	t.Helper()
	kmsg := kmsgSince(t)
	a, err := l.Create("a", limit)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Create("b", limit)
	if err != nil {
		t.Fatalf("Create beyond the free space with overcommit on = %v", err)
	}
	want := make([]byte, 4*MiB)
	rand.Read(want)
	writeNoSync(t, filepath.Join(b, "kept"), want)

	n, err := writeFile(filepath.Join(a, "big"), limit)
	t.Logf("the writer wrote %d MiB: %v; %.1f MiB free on the host", n/MiB, err, float64(hostFree(t, dir))/MiB)
	if !isFull(err) {
		t.Errorf("writing %d MiB into a layer on a filesystem of about that size the neighbour shares = %d bytes, %v; want ENOSPC", limit/MiB, n, err)
	}
	if free := hostFree(t, dir); free <= 0 {
		t.Errorf("the host filesystem filled (%d bytes free): the guard let a layer's write-back overrun it", free)
	}

	f, err := os.Open(filepath.Join(b, "kept"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Errorf("sync in the neighbour = %v", err)
	}
	f.Close()
	unix.Sync()
	// Read it back from the image, not from the page cache.
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(b, "kept")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the neighbour's data after sync: %d bytes, %v; want its 4 MiB intact", len(got), err)
	}
	if bad := kmsg(); len(bad) > 0 {
		t.Errorf("the kernel logged lost writes:\n%s", strings.Join(bad, "\n"))
	}

	// Space returns: the writer's share grows again.
	if err := os.Remove(filepath.Join(a, "big")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		os.Remove(filepath.Join(a, "again"))
		_, err := writeFile(filepath.Join(a, "again"), 8*MiB)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("8 MiB in the writer's layer after it deleted its file = %v; %.1f MiB free on the host", err, float64(hostFree(t, dir))/MiB)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if bad := kmsg(); len(bad) > 0 {
		t.Errorf("the kernel logged lost writes:\n%s", strings.Join(bad, "\n"))
	}
}

// TestGuardHostWriter: a writer outside the layers (the daemon, the
// operator) takes the free space down to the watermark; a layer's writes
// then fail with ENOSPC, and succeed again once that space is freed.
func TestGuardHostWriter(t *testing.T) {
	dir := smallDataDir(t, 48)
	const wm = 4 * MiB
	l := open(t, dir, Options{Mode: ModeImagePerLayer, WatermarkBytes: wm})
	a, err := l.Create("a", 16*MiB)
	if err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	fill := make([]byte, hostFree(t, dir)-wm-MiB)
	for i := range fill {
		fill[i] = 1
	}
	if err := os.WriteFile(filler, fill, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := writeFile(filepath.Join(a, "x"), 2*MiB)
		if errors.Is(err, unix.ENOSPC) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("2 MiB in a layer with 1 MiB above the watermark = %v; want ENOSPC", err)
		}
		os.Remove(filepath.Join(a, "x"))
		time.Sleep(50 * time.Millisecond)
	}
	os.Remove(filepath.Join(a, "x"))
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		os.Remove(filepath.Join(a, "y"))
		_, err := writeFile(filepath.Join(a, "y"), 12*MiB)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("12 MiB in a 16 MiB layer once the host has room again = %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReserve: with overcommit off (the default) a layer is created only
// if the free space backs every live layer's limit plus its own and the
// watermark; beyond, Create is unavailable, and removing a layer, or the
// layer's data being on the host already, makes room.
func TestReserve(t *testing.T) {
	dir := smallDataDir(t, 64)
	l := open(t, dir, Options{Mode: ModeImagePerLayer, WatermarkBytes: 4 * MiB})
	a, err := l.Create("a", 32*MiB)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Create("b", 32*MiB)
	if !errdefs.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("a second 32 MiB layer on a 64 MiB filesystem = %v, want unavailable", err)
	}
	t.Logf("refused: %v", err)
	if _, err := os.Stat(filepath.Join(dir, "layer-images", "b.img")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused create left its image: %v", err)
	}
	// What a layer has written is on the host already: the data it can
	// still write counts, not its whole limit.
	if _, err := writeFile(filepath.Join(a, "x"), 24*MiB); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create("c", 16*MiB); err != nil {
		t.Errorf("a 16 MiB layer once the first's 24 MiB are written = %v", err)
	}
	if err := l.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Create("b", 32*MiB); err != nil {
		t.Errorf("Create after the first layer was removed = %v", err)
	}
}

// TestGuardAdopt: a layer left mounted by a daemon whose guard had shrunk
// it (a stop that keeps sessions) gets its whole limit back from the next
// daemon's guard once there is room: the shrinking is not taken for the
// layer's own reserve.
func TestGuardAdopt(t *testing.T) {
	dir := smallDataDir(t, 64)
	probe := filepath.Join(dir, "probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(probe, "user.probe", []byte("1"), 0); errors.Is(err, unix.EOPNOTSUPP) {
		// Then the adopted layer keeps the earlier guard's extra until
		// its session ends: smaller than its limit, never larger.
		t.Skipf("the base is kept in a user xattr on the image, and this kernel's tmpfs has none (Linux 6.6+): %v", err)
	}
	os.Remove(probe)
	o := Options{Mode: ModeImagePerLayer, WatermarkBytes: 4 * MiB}
	l, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.Create("a", 16*MiB)
	if err != nil {
		t.Fatal(err)
	}
	avail := func() int64 {
		var st unix.Statfs_t
		if err := unix.Statfs(a, &st); err != nil {
			t.Fatal(err)
		}
		return int64(st.Bavail) * st.Bsize
	}
	full := avail()
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, bytes.Repeat([]byte{1}, int(hostFree(t, dir)-6*MiB)), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the guard to shrink the layer", func() bool { return avail() <= 2*MiB })
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	l = open(t, dir, o)
	t.Cleanup(func() { l.Remove("a") })
	waitFor(t, "the adopted layer to offer its whole limit again", func() bool { return avail() == full })
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
