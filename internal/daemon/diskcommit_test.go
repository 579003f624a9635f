package daemon_test

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"github.com/warrenhq/warren/internal/testutil"
)

// lostWrites matches the kernel's lines for a write-back that failed: what
// a layer's loop device logs when the data filesystem under it is full.
var lostWrites = regexp.MustCompile(`potential data loss|Buffer I/O error|lost async page write`)

// kernelLog starts reading /dev/kmsg at its current end; the returned
// function returns the lines logged since that match lostWrites.
func kernelLog(t *testing.T) func() []string {
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

// TestDiskOvercommit: with disk.overcommit on, two sessions whose disk
// limits add up to more than the data filesystem. One writes until it
// cannot: dd fails with ENOSPC inside the session while the host
// filesystem still has room; the neighbour's unsynced file then syncs
// without error and reads back intact after the host's page cache is
// dropped; and the kernel logs no lost write-back.
func TestDiskOvercommit(t *testing.T) {
	dataDir := testutil.Tmpfs(t, 64)
	h := daemontest.Start(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.Session.MinFreeDiskMB = -1 // the guard alone
		c.Disk.Overcommit = true
		c.Disk.ReserveWatermarkMB = 8
	})
	c := h.Client
	kmsg := kernelLog(t)
	for _, id := range []string{"a", "b"} {
		if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: id, Limits: &api.Limits{DiskMB: 60}}); err != nil {
			t.Fatalf("create %s with 60 MiB of a 64 MiB filesystem, overcommitted: %v", id, err)
		}
	}
	sum := sh(t, c, "b", "head -c 4M /dev/urandom > /root/kept && sha256sum /root/kept")

	r, err := c.Exec(bg, "a", &api.ExecRequest{Command: "dd if=/dev/urandom of=/root/big bs=1M count=60 2>&1; echo rc=$?; sync; echo sync=$?"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the writer: %s; %d bytes free on the host", r.Stdout, freeBytes(t, dataDir))
	if !strings.Contains(r.Stdout, "No space left on device") || strings.Contains(r.Stdout, "rc=0") {
		t.Errorf("60 MiB into a session that shares 64 MiB with a neighbour: %q; want ENOSPC", r.Stdout)
	}
	if !strings.Contains(r.Stdout, "sync=0") {
		t.Errorf("sync in the writer after its ENOSPC: %q; want success (what it was told it wrote is backed)", r.Stdout)
	}
	if free := freeBytes(t, dataDir); free <= 0 {
		t.Errorf("the data filesystem filled (%d bytes free): a layer's write-back overran it", free)
	}
	sh(t, c, "b", "sync /root/kept && sync")
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, c, "b", "sha256sum /root/kept"); got != sum {
		t.Errorf("the neighbour's file after sync and a dropped page cache: %q, want %q", got, sum)
	}
	if bad := kmsg(); len(bad) > 0 {
		t.Errorf("the kernel logged lost writes:\n%s", strings.Join(bad, "\n"))
	}
}

// TestDiskReserve: with disk.overcommit off (the default) a create whose
// disk limit the free space cannot back, beside the live sessions', is
// refused with unavailable (503) and leaves nothing behind; once a session
// is deleted (its layer goes in the background) it fits.
func TestDiskReserve(t *testing.T) {
	dataDir := testutil.Tmpfs(t, 128)
	h := daemontest.Start(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.Session.MinFreeDiskMB = -1 // the reservation alone
		c.Disk.ReserveWatermarkMB = 8
	})
	c := h.Client
	limits := &api.Limits{DiskMB: 64}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "a", Limits: limits}); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "b", Limits: limits})
	if client.Code(err) != "unavailable" || !strings.Contains(err.Error(), "cannot back") {
		t.Fatalf("a second 64 MiB session on a 128 MiB filesystem = %v, want unavailable: the disk cannot back it", err)
	}
	if _, err := c.GetSession(bg, "b"); client.Code(err) != "not_found" {
		t.Errorf("the refused session: %v, want not_found", err)
	}
	_, err = c.CreateWorkspace(bg, &api.CreateWorkspaceRequest{Name: "w", SizeMB: 64})
	if client.Code(err) != "unavailable" {
		t.Errorf("a 64 MiB workspace beside a 64 MiB session on 128 MiB = %v, want unavailable", err)
	}
	if err := c.DeleteSession(bg, "a"); err != nil {
		t.Fatal(err)
	}
	// A deleted session's layer goes in the background, within
	// milliseconds of the delete's answer; until then it still counts.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "b", Limits: limits})
		if err == nil {
			break
		}
		if client.Code(err) != "unavailable" || time.Now().After(deadline) {
			t.Fatalf("create once the first session is deleted = %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
