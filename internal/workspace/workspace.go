// Package workspace keeps the directories of workspaces: persistent,
// size-limited directories that outlive sessions, mounted into them at
// /workspace. It is host-side storage only; records, ownership by tenants
// and who mounts what belong to the session manager.
//
// A workspace lives in a layer of its own layer store, <data>/workspaces
// (internal/quota: a project quota or an ext4 image per workspace, the same
// mechanism as sessions' writable layers), so a full workspace fails writes
// with ENOSPC or EDQUOT inside the sandbox and nowhere else. Its content is
// the layer's data/ directory (so ext4's lost+found stays out of sight),
// owned in the canonical id space: the files of a sandbox's root are owned
// by host root, those of its user 1000 by host id 1000. Each sandbox gets
// data/ as an idmapped bind mount, so every session, whatever its block of
// host ids, sees the same files with the same owners.
//
// Files in a workspace are the sandboxes' to plant: the daemon never reads
// or writes inside data/ through a path; it only measures it and removes it
// whole. Canonical owners are real host users (sandboxed root's files are
// host root's, set-id bits included), so <data>/workspaces is mode 0700: no
// host user but root may reach them, and per-workspace filesystems are
// mounted nosuid and nodev.
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/quota"
)

// firstProjectID keeps workspaces' project ids apart from sessions' layers
// (which start at 100000) where both use project quotas of one filesystem.
const firstProjectID = 50_000_000

// Store holds the workspaces of one data directory.
type Store struct {
	dir    string        // <data>/workspaces/layers (immutable)
	layers *quota.Layers // nil: plain directories without limits (immutable)
}

// Open prepares <dataDir>/workspaces. With limits, workspaces get a hard
// size limit each (see internal/quota); without, they are plain
// directories and sizes cannot be enforced.
func Open(dataDir string, limits bool) (*Store, error) {
	root := filepath.Join(dataDir, "workspaces")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create workspaces directory: %w", err)
	}
	if err := os.Chmod(root, 0o700); err != nil {
		return nil, err
	}
	s := &Store{dir: filepath.Join(root, "layers")}
	if limits {
		l, err := quota.Open(root, quota.Options{FirstProjectID: firstProjectID})
		if err != nil {
			return nil, fmt.Errorf("open the workspaces' layer store: %w", err)
		}
		s.layers = l
		return s, nil
	}
	if err := os.Mkdir(s.dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	return s, nil
}

// Limited reports whether workspaces have size limits.
func (s *Store) Limited() bool { return s.layers != nil }

// Dir is where the workspaces' layers are.
func (s *Store) Dir() string { return s.dir }

// Path is the content directory of workspace id, the source of its mounts.
func (s *Store) Path(id string) string { return filepath.Join(s.dir, id, "data") }

// Create makes workspace id, empty, owned by the canonical root, holding
// at most limitBytes (0: no limit, only without a layer store).
func (s *Store) Create(id string, limitBytes int64) (err error) {
	if err := validID(id); err != nil {
		return err
	}
	layer := filepath.Join(s.dir, id)
	if s.layers != nil {
		if _, err := s.layers.Create(id, limitBytes); err != nil {
			return err
		}
	} else {
		if limitBytes > 0 {
			return errdefs.New(errdefs.ErrInvalidArgument, "this daemon has no disk quota support: workspaces cannot have a size limit")
		}
		if err := os.Mkdir(layer, 0o700); err != nil {
			return err
		}
	}
	defer func() {
		if err != nil {
			s.Remove(id)
		}
	}()
	data := filepath.Join(layer, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		return err
	}
	if err := os.Chown(data, 0, 0); err != nil {
		return err
	}
	return os.Chmod(data, 0o755) // whatever the umask
}

// Remove deletes workspace id and everything in it. No sandbox may have it
// mounted.
func (s *Store) Remove(id string) error {
	if err := validID(id); err != nil {
		return err
	}
	if s.layers != nil {
		err := s.layers.Remove(id)
		if errdefs.Is(err, errdefs.ErrNotFound) {
			return nil
		}
		return err
	}
	return os.RemoveAll(filepath.Join(s.dir, id))
}

// Usage returns the bytes workspace id uses.
func (s *Store) Usage(id string) (int64, error) {
	if err := validID(id); err != nil {
		return 0, err
	}
	if s.layers != nil {
		return s.layers.Usage(id)
	}
	var n int64
	err := filepath.WalkDir(filepath.Join(s.dir, id), func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone meanwhile
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n, err
}

// IDs lists the workspaces that exist on disk.
func (s *Store) IDs() ([]string, error) {
	if s.layers != nil {
		return s.layers.Names()
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && validID(e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Close unmounts every workspace's filesystem; the workspaces stay on disk
// and the next Open mounts them again. No sandbox may have one mounted.
func (s *Store) Close() error {
	if s.layers == nil {
		return nil
	}
	err := s.layers.Close()
	// Filesystems mounted by an earlier daemon (one that left its
	// sessions running) are not the layer store's to unmount.
	ids, _ := s.layers.Names()
	for _, id := range ids {
		d := filepath.Join(s.dir, id)
		if mountPoint(d) {
			if uerr := unix.Unmount(d, 0); uerr != nil {
				err = errors.Join(err, fmt.Errorf("unmount workspace %s: %w", id, uerr))
			}
		}
	}
	return err
}

// Release lets go of the store but leaves the workspaces mounted, for
// sandboxes that outlive the daemon.
func (s *Store) Release() error {
	if s.layers == nil {
		return nil
	}
	return s.layers.Release()
}

func mountPoint(dir string) bool {
	var a, b unix.Stat_t
	if unix.Lstat(dir, &a) != nil || unix.Lstat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

func validID(id string) error {
	if id == "" || len(id) > 64 || id[0] == '.' || filepath.Base(id) != id {
		return errdefs.New(errdefs.ErrInvalidArgument, "bad workspace id %q", id)
	}
	return nil
}
