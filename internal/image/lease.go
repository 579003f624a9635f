package image

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Leases keep content that a running sandbox has mounted, or that a
// snapshot's changes apply to. A name can move to other content (a new
// pull, an import over it) or go away while sessions still run from the old
// content, or snapshots still need it; a lease keeps that content from GC
// until its holder releases it. A holder holds at most one lease.
//
// Leases live in leases.json, rewritten atomically but not fsynced: they
// only have to outlive the daemon's process, not the host. After a crash
// of the host no sandbox is left, and a lost or torn file is read as no
// leases at all.

func (s *Store) leasesFile() string { return filepath.Join(s.dir, "leases.json") }

// leasesFileContent is the format of leases.json.
type leasesFileContent struct {
	Version int               `json:"version"`
	Leases  map[string]string `json:"leases"`
}

// loadLeases reads leases.json; anything unreadable is no leases.
func (s *Store) loadLeases() {
	b, err := os.ReadFile(s.leasesFile())
	if err != nil {
		return
	}
	var c leasesFileContent
	if json.Unmarshal(b, &c) != nil || c.Version != 1 {
		return
	}
	for h, d := range c.Leases {
		if validHolder(h) == nil && digestRE.MatchString(d) {
			s.leases[h] = d
		}
	}
}

// saveLeasesLocked writes leases.json atomically.
//
// Preconditions: s.mu must be locked.
func (s *Store) saveLeasesLocked() error {
	b, err := json.Marshal(leasesFileContent{Version: 1, Leases: s.leases})
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(s.dir, "leases.json.tmp-*")
	if err != nil {
		return fmt.Errorf("write image leases: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.leasesFile())
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write image leases: %w", err)
	}
	return nil
}

func validHolder(h string) error {
	if h == "" || len(h) > 255 || strings.ContainsAny(h, "\x00\n") {
		return errdefs.New(errdefs.ErrInvalidArgument, "invalid lease holder %q", h)
	}
	return nil
}

// Acquire returns the image called name and leases its content to holder
// (a sandbox's name), so that GC keeps the content while the holder runs,
// whatever happens to the name meanwhile. If holder holds a lease already,
// Acquire returns the content of that lease under name: a restarted daemon
// gets the content its sandbox runs on, even if name has moved since.
func (s *Store) Acquire(holder, name string) (*Image, error) {
	if err := validHolder(holder); err != nil {
		return nil, err
	}
	if err := ValidName(name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.leases[holder]; ok {
		img, err := s.load(name, d)
		if err == nil {
			return img, nil
		}
		if !errdefs.Is(err, errdefs.ErrNotFound) {
			return nil, err
		}
		delete(s.leases, holder) // content gone: lease it anew
	}
	digest, ok := s.names[name]
	if !ok {
		return nil, s.missingLocked(name)
	}
	img, err := s.load(name, digest)
	if err != nil {
		return nil, err
	}
	s.leases[holder] = digest
	if err := s.saveLeasesLocked(); err != nil {
		delete(s.leases, holder)
		return nil, err
	}
	return img, nil
}

// AcquireDigest returns the content digest, whatever name points to it if
// any, and leases it to holder (a sandbox's name, or a snapshot's holder),
// so that GC keeps it while the holder needs it. The Image's Name is "":
// content by digest has none. It is idempotent for a holder that leases
// digest already. Content that is not stored is errdefs.ErrNotFound: only
// a pull or import of the very same content brings it back. A holder that
// leases other content is errdefs.ErrConflict.
func (s *Store) AcquireDigest(holder, digest string) (*Image, error) {
	if err := validHolder(holder); err != nil {
		return nil, err
	}
	if !digestRE.MatchString(digest) {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "invalid image digest %q: want sha256: and 64 lowercase hex digits", digest)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	img, err := s.load(digest, digest)
	if errdefs.Is(err, errdefs.ErrNotFound) {
		return nil, errdefs.New(errdefs.ErrNotFound, "image content %s is not in the image store", digest)
	}
	if err != nil {
		return nil, err
	}
	img.Name = ""
	switch d, ok := s.leases[holder]; {
	case ok && d == digest:
		return img, nil
	case ok:
		return nil, errdefs.New(errdefs.ErrConflict, "%s holds a lease on image content %s already, not %s", holder, d, digest)
	}
	s.leases[holder] = digest
	if err := s.saveLeasesLocked(); err != nil {
		delete(s.leases, holder)
		return nil, err
	}
	return img, nil
}

// Lease returns the digest of the content holder leases, if it holds a
// lease.
func (s *Store) Lease(holder string) (digest string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	digest, ok = s.leases[holder]
	return digest, ok
}

// Release ends holder's lease, if it has one.
func (s *Store) Release(holder string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.leases[holder]
	if !ok {
		return nil
	}
	delete(s.leases, holder)
	if err := s.saveLeasesLocked(); err != nil {
		s.leases[holder] = d
		return err
	}
	return nil
}

// RetainLeases ends every lease whose holder keep rejects: the daemon
// calls it at start with the sandboxes it adopted and the snapshots it
// has.
func (s *Store) RetainLeases(keep func(holder string) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for h := range s.leases {
		if !keep(h) {
			delete(s.leases, h)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return s.saveLeasesLocked()
}

// PruneResult is what Prune removed.
type PruneResult struct {
	// Deleted are the digests of the removed content.
	Deleted []string
	// Bytes is the size of the removed content's regular files.
	Bytes int64
}

// Prune deletes the content that no name points to and no lease (of a
// sandbox or a snapshot) holds.
func (s *Store) Prune() (*PruneResult, error) {
	deleted, n, err := s.gc(nil)
	if err != nil {
		return nil, err
	}
	return &PruneResult{Deleted: deleted, Bytes: n}, nil
}
