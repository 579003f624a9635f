package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/testutil"
)

// fillDisk writes a file in dir until its filesystem is full.
func fillDisk(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, unix.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	// What a page-sized write still finds.
	for {
		if _, err := f.Write(buf[:512]); err != nil {
			return
		}
	}
}

// TestDeleteOnFullDisk: a store reopened on a full disk opens, and a
// delete there is durable: it spends the reserve the store keeps. Without
// a reserve the same delete fails unavailable instead of being lost.
func TestDeleteOnFullDisk(t *testing.T) {
	dir := testutil.Tmpfs(t, 8)
	path := filepath.Join(dir, "warren.db")
	s := mustOpen(t, path)
	for _, id := range []string{"a", "b"} {
		if err := s.CreateSession(t.Context(), &session.Session{Tenant: "t", ID: id, Name: "n-" + id}); err != nil {
			t.Fatal(err)
		}
	}
	mustClose(t, s)

	fillDisk(t, dir)
	s = mustOpen(t, path) // spends one chunk: the -shm file needs a page
	if err := s.DeleteSession(t.Context(), "t", "a"); err != nil {
		t.Fatalf("delete on a full disk = %v", err)
	}
	// No reserve left: the delete is refused, not acknowledged and lost.
	err := s.DeleteSession(t.Context(), "t", "b")
	if err != nil && !errdefs.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("delete on a full disk without a reserve = %v, want nil or unavailable", err)
	}
	deletedB := err == nil
	mustClose(t, s)

	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, path)
	defer mustClose(t, s)
	if _, err := s.GetSession(t.Context(), "t", "a"); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a session deleted on a full disk, reopened: %v, want not found", err)
	}
	if _, err := s.GetSession(t.Context(), "t", "b"); (err == nil) == deletedB {
		t.Errorf("b after a delete that returned deleted=%v: GetSession = %v", deletedB, err)
	}
	for i := range reserveChunks {
		if fi, err := os.Stat(s.res.chunk(i)); err != nil || fi.Size() != reserveBytes {
			t.Errorf("reserve chunk %d after a reopen with room: %v", i, err)
		}
	}
}
