package image

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestEnsureBaseFullDisk: on a full disk EnsureBase keeps the base image a
// store already holds, rewriting nothing, and a store without one answers
// for "base" with unavailable; neither is fatal to the caller.
func TestEnsureBaseFullDisk(t *testing.T) {
	dir := testutil.Tmpfs(t, 16)
	s, err := Open(filepath.Join(dir, "with"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.EnsureBase()
	if err != nil {
		t.Fatal(err)
	}
	without, err := Open(filepath.Join(dir, "without"))
	if err != nil {
		t.Fatal(err)
	}
	names, err := os.Stat(s.namesFile())
	if err != nil {
		t.Fatal(err)
	}

	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}

	img, err := s.EnsureBase()
	if !errdefs.Is(err, errdefs.ErrUnavailable) || img == nil || img.Digest != first.Digest {
		t.Errorf("EnsureBase on a full disk with a stored base = %v, %v; want the stored %s and unavailable", img, err, first.Digest)
	}
	if after, err := os.Stat(s.namesFile()); err != nil || !after.ModTime().Equal(names.ModTime()) {
		t.Errorf("names.json was rewritten on a full disk: %v", err)
	}
	if got, err := s.Get(BaseName); err != nil || got.Digest != first.Digest {
		t.Errorf("Get(base) = %v, %v; want the stored base", got, err)
	}
	if img, err := without.EnsureBase(); img != nil || !errdefs.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("EnsureBase on a full disk without a stored base = %v, %v; want nil, unavailable", img, err)
	}
	if _, err := without.Get(BaseName); !errdefs.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Get(base) without a stored base on a full disk = %v, want unavailable", err)
	}
	if _, err := without.Acquire("holder", BaseName); !errdefs.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Acquire(base) without a stored base on a full disk = %v, want unavailable", err)
	}
	checkTmpEmpty(t, s)
	checkTmpEmpty(t, without)

	// Room again: the next EnsureBase prepares it.
	f.Close()
	if err := os.Remove(f.Name()); err != nil {
		t.Fatal(err)
	}
	if img, err := without.EnsureBase(); err != nil || img.Digest != first.Digest {
		t.Errorf("EnsureBase with room again = %v, %v", img, err)
	}
	if _, err := without.Get(BaseName); err != nil {
		t.Errorf("Get(base) after a successful EnsureBase = %v", err)
	}
}
