package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// BaseName is the name of the built-in image made from the host. It cannot
// be imported over or removed.
const BaseName = "base"

// Default import limits. A Store starts with these; see the Store fields.
const (
	// DefaultMaxImportBytes caps the regular-file data of one import (8 GiB).
	DefaultMaxImportBytes int64 = 8 << 30
	// DefaultMaxImportEntries caps the number of entries (tar headers or
	// directory entries) of one import.
	DefaultMaxImportEntries = 1 << 20
)

// Fixed limits on names inside an imported tree.
const (
	maxPathLen = 4096 // bytes of an entry's path or a link target (PATH_MAX)
	maxNameLen = 255  // bytes of one path component (NAME_MAX)
	maxDepth   = 256  // directory levels below the rootfs
)

// Image is one stored image. The value is a copy: changing it changes
// nothing in the store.
type Image struct {
	// Name is the name the image was looked up by, e.g. "base", "busybox".
	Name string
	// Digest is "sha256:<hex>" of the canonical content (see digest.go).
	Digest string
	// Size is the number of bytes of regular files in the rootfs; a file
	// with several hard links counts once per link.
	Size int64
	// CreatedAt is when the content was first stored.
	CreatedAt time.Time
	// RootFS is the absolute host path of the read-only rootfs directory,
	// the overlay's lower layer. Nothing may write into it.
	RootFS string
	// HostDirs are host directories the sandbox shows at the same path,
	// each as its own per-session writable overlay. Only the base image has
	// them: /usr, and on hosts without merged /usr also /bin, /sbin, /lib,
	// /lib32, /lib64 and /libx32 where they are real directories.
	HostDirs []string
	// Env is the default environment, "K=V".
	Env []string
	// WorkingDir is the default cwd inside the sandbox; "" means the
	// caller's default.
	WorkingDir string
	// Shell is the session shell; "" means auto-detect (bash, else sh).
	Shell string
	// User is the user the image's processes run as when a session names
	// none ("" is root): a name of the image's /etc/passwd, "uid" or
	// "uid:gid", as the image's config said.
	User string
	// Entrypoint and Cmd are the image's default command, as its config
	// said; warren runs them only when asked to (see docs/IMAGES.md).
	Entrypoint []string
	Cmd        []string
	// Source says where the content came from when it was first stored:
	// "host" (the base image), "rootfs" (a tar or directory), "oci-layout",
	// "docker-archive" or, for a pull, the fully qualified reference.
	Source string
	// RepoDigest is the registry's name of the pulled manifest,
	// "<repository>@sha256:<hex>"; "" for anything not pulled.
	RepoDigest string
	// ImageID is the digest of the OCI image config the content was
	// flattened from; "" for a plain rootfs.
	ImageID string
	// Platform is "os/arch[/variant]" of an OCI image; "" if unknown.
	Platform string
	// Layers is the number of layers flattened into the rootfs (1 for a
	// plain rootfs).
	Layers int
}

// config is the part of an image's metadata that is not the tree. It is
// part of the digest (see digest.go), so two images with the same tree but
// a different config never share a blob.
type config struct {
	HostDirs   []string `json:"host_dirs,omitempty"`
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	Shell      string   `json:"shell,omitempty"`
	User       string   `json:"user,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// provenance is where a blob's content came from. It is recorded when the
// content is first stored and is not part of the digest: the same tree and
// config from another source is the same content.
type provenance struct {
	Source     string `json:"source,omitempty"`
	RepoDigest string `json:"repo_digest,omitempty"`
	ImageID    string `json:"image_id,omitempty"`
	Platform   string `json:"platform,omitempty"`
	Layers     int    `json:"layers,omitempty"`
}

// metadata is the content of a blob's image.json.
type metadata struct {
	Digest    string    `json:"digest"`
	Size      int64     `json:"size"`
	CreatedAt time.Time `json:"created_at"`
	config
	provenance
}

// importConfig is the config of every imported image: a plain rootfs has
// no metadata of its own, so it gets the usual PATH and nothing else.
var importConfig = config{Env: []string{"PATH=" + defaultPath}}

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Store is the on-disk image store:
//
//	<dir>/names.json                     name -> digest, rewritten atomically
//	<dir>/leases.json                    holder -> digest (see Acquire, AcquireDigest)
//	<dir>/blobs/sha256-<hex>/rootfs/     an immutable rootfs
//	<dir>/blobs/sha256-<hex>/image.json  its metadata
//	<dir>/tmp/                           imports in progress, emptied by Open
//
// A Store is safe for concurrent use; imports of different names run in
// parallel and serialize only to publish their result. One process owns a
// store directory at a time.
type Store struct {
	dir string // absolute

	// MaxImportBytes caps the regular-file data of one import; larger
	// imports fail with errdefs.ErrTooLarge. Set it before the first
	// import; it defaults to DefaultMaxImportBytes.
	MaxImportBytes int64
	// MaxImportEntries caps the number of entries of one import; more fail
	// with errdefs.ErrTooLarge. Set it before the first import; it defaults
	// to DefaultMaxImportEntries.
	MaxImportEntries int

	// host is the host's root directory, "/" except in tests of EnsureBase.
	host string
	// shellOptional lets rootfs imports without a ShellPath through
	// (checkShell): only for tests of the unpacker, whose archives are
	// made of the entries under test and no more.
	shellOptional bool

	// mu guards names, leases and every change below blobs/, of
	// names.json and of leases.json.
	mu     sync.Mutex
	names  map[string]string // name -> digest
	leases map[string]string // holder -> digest
	// baseErr is why EnsureBase could not prepare the base image when
	// none was stored either (a full disk): Get("base") says so.
	baseErr error
}

// badPathChars are the characters overlayfs mount options cannot carry.
var badPathChars = regexp.MustCompile(`[,:\\\x00\n]`)

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?$`)

// ValidName returns an errdefs.ErrInvalidArgument error unless name is a
// valid image name: a repository-like part ^[a-z0-9][a-z0-9._-]{0,127}$,
// optionally followed by ":" and a tag of at most 128 letters, digits, '.',
// '_' and '-' that does not start with '.' or '-' ("python:3.12-slim").
func ValidName(name string) error {
	if !validName.MatchString(name) {
		return errdefs.New(errdefs.ErrInvalidArgument, "invalid image name %q: want lowercase letters, digits, '.', '_' and '-', starting with a letter or digit, at most 128 characters, optionally followed by :TAG", name)
	}
	return nil
}

// Open opens the store in dir (usually <data>/images), creating it with mode
// 0700 if needed, and removes what interrupted imports left in tmp/. It
// refuses a dir whose absolute path contains ',', ':' or '\\', which could
// not go into overlayfs mount options.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("image store %q: %w", dir, err)
	}
	if badPathChars.MatchString(abs) {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "image store path %q contains a character overlayfs cannot take (comma, colon, backslash, NUL or newline)", abs)
	}
	s := &Store{
		dir:              abs,
		MaxImportBytes:   DefaultMaxImportBytes,
		MaxImportEntries: DefaultMaxImportEntries,
		host:             "/",
		names:            map[string]string{},
		leases:           map[string]string{},
	}
	for _, d := range []string{abs, s.blobsDir(), s.tmpDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create image store: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("create image store: %w", err)
		}
	}
	ents, err := os.ReadDir(s.tmpDir())
	if err != nil {
		return nil, fmt.Errorf("clean image store tmp: %w", err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(s.tmpDir(), e.Name())); err != nil {
			return nil, fmt.Errorf("clean image store tmp: %w", err)
		}
	}
	if err := s.loadNames(); err != nil {
		return nil, err
	}
	s.loadLeases()
	return s, nil
}

func (s *Store) blobsDir() string { return filepath.Join(s.dir, "blobs") }
func (s *Store) tmpDir() string   { return filepath.Join(s.dir, "tmp") }
func (s *Store) namesFile() string {
	return filepath.Join(s.dir, "names.json")
}

// blobDir returns the directory of a digest's content.
func (s *Store) blobDir(digest string) string {
	return filepath.Join(s.blobsDir(), strings.Replace(digest, ":", "-", 1))
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// namesFileContent is the format of names.json.
type namesFileContent struct {
	Version int               `json:"version"`
	Names   map[string]string `json:"names"`
}

func (s *Store) loadNames() error {
	b, err := os.ReadFile(s.namesFile())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read image names: %w", err)
	}
	var c namesFileContent
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("read image names %s: %w", s.namesFile(), err)
	}
	if c.Version != 1 {
		return fmt.Errorf("read image names %s: unknown version %d", s.namesFile(), c.Version)
	}
	for name, d := range c.Names {
		if ValidName(name) != nil || !digestRE.MatchString(d) {
			return fmt.Errorf("read image names %s: bad entry %q -> %q", s.namesFile(), name, d)
		}
		s.names[name] = d
	}
	return nil
}

// saveNamesLocked writes names.json atomically: a temporary file, fsync,
// rename, fsync of the directory.
//
// Preconditions: s.mu must be locked.
func (s *Store) saveNamesLocked() error {
	b, err := json.MarshalIndent(namesFileContent{Version: 1, Names: s.names}, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(s.dir, "names.json.tmp-*")
	if err != nil {
		return fmt.Errorf("write image names: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.namesFile())
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write image names: %w", err)
	}
	return syncDir(s.dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// Get returns the image called name, or an errdefs.ErrNotFound error.
func (s *Store) Get(name string) (*Image, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	digest, ok := s.names[name]
	var missing error
	if !ok {
		missing = s.missingLocked(name)
	}
	s.mu.Unlock()
	if !ok {
		return nil, missing
	}
	return s.load(name, digest)
}

// missingLocked is the error for a name that names no image: not found,
// or unavailable for the base image EnsureBase could not prepare.
func (s *Store) missingLocked(name string) error {
	if name == BaseName && s.baseErr != nil {
		return errdefs.New(errdefs.ErrUnavailable, "the base image could not be prepared: %w", s.baseErr)
	}
	return errdefs.New(errdefs.ErrNotFound, "image %q not found", name)
}

// List returns every named image, sorted by name.
func (s *Store) List() ([]*Image, error) {
	s.mu.Lock()
	names := make(map[string]string, len(s.names))
	for n, d := range s.names {
		names[n] = d
	}
	s.mu.Unlock()
	var out []*Image
	for _, n := range slices.Sorted(maps.Keys(names)) {
		img, err := s.load(n, names[n])
		if err != nil {
			return nil, err
		}
		out = append(out, img)
	}
	return out, nil
}

// load reads a blob's metadata; name is what the Image is called and what
// errors name. Blobs are immutable, and GC removes only blobs no name
// points to and no lease holds, so a blob read here may vanish only if its
// name was removed (or its lease ended) in the meantime.
func (s *Store) load(name, digest string) (*Image, error) {
	dir := s.blobDir(digest)
	b, err := os.ReadFile(filepath.Join(dir, "image.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errdefs.New(errdefs.ErrNotFound, "image %q not found", name)
	}
	if err != nil {
		return nil, fmt.Errorf("read image %q: %w", name, err)
	}
	var m metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read image %q metadata: %w", name, err)
	}
	layers := m.Layers
	if layers == 0 {
		layers = 1 // stored before layers were counted: a plain rootfs
	}
	return &Image{
		Name:       name,
		Digest:     m.Digest,
		Size:       m.Size,
		CreatedAt:  m.CreatedAt,
		RootFS:     filepath.Join(dir, "rootfs"),
		HostDirs:   m.HostDirs,
		Env:        m.Env,
		WorkingDir: m.WorkingDir,
		Shell:      m.Shell,
		User:       m.User,
		Entrypoint: m.Entrypoint,
		Cmd:        m.Cmd,
		Source:     m.Source,
		RepoDigest: m.RepoDigest,
		ImageID:    m.ImageID,
		Platform:   m.Platform,
		Layers:     layers,
	}, nil
}

// Remove drops the name. The content stays until GC. The base image cannot
// be removed.
func (s *Store) Remove(name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if name == BaseName {
		return errdefs.New(errdefs.ErrInvalidArgument, "image %q is built in and cannot be removed", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	digest, ok := s.names[name]
	if !ok {
		return errdefs.New(errdefs.ErrNotFound, "image %q not found", name)
	}
	delete(s.names, name)
	if err := s.saveNamesLocked(); err != nil {
		s.names[name] = digest
		return err
	}
	return nil
}

// GC deletes the content that no name points to, no lease holds (see
// Acquire and AcquireDigest) and inUse reports as unused (inUse may be nil: nothing else is
// in use). It returns how many blobs it removed. inUse is called with the
// store locked and must not call back into the Store.
func (s *Store) GC(inUse func(digest string) bool) (removed int, err error) {
	digests, _, err := s.gc(inUse)
	return len(digests), err
}

// gc is GC that also returns the digests it removed and their sizes.
func (s *Store) gc(inUse func(digest string) bool) (removed []string, bytes int64, err error) {
	var doomed []string
	defer func() {
		// Deleting happens outside the lock: the blobs were moved to tmp/,
		// where nothing looks for them.
		for _, d := range doomed {
			if rerr := os.RemoveAll(d); rerr != nil && err == nil {
				err = fmt.Errorf("image gc: %w", rerr)
			}
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := map[string]bool{}
	for _, d := range s.names {
		kept[d] = true
	}
	for _, d := range s.leases {
		kept[d] = true
	}
	ents, err := os.ReadDir(s.blobsDir())
	if err != nil {
		return nil, 0, fmt.Errorf("image gc: %w", err)
	}
	for _, e := range ents {
		digest := strings.Replace(e.Name(), "-", ":", 1)
		if !digestRE.MatchString(digest) || kept[digest] {
			continue
		}
		if inUse != nil && inUse(digest) {
			continue
		}
		var size int64
		if b, err := os.ReadFile(filepath.Join(s.blobsDir(), e.Name(), "image.json")); err == nil {
			var m metadata
			if json.Unmarshal(b, &m) == nil {
				size = m.Size
			}
		}
		dst, err := os.MkdirTemp(s.tmpDir(), "gc-*")
		if err != nil {
			return removed, bytes, fmt.Errorf("image gc: %w", err)
		}
		doomed = append(doomed, dst)
		if err := os.Rename(filepath.Join(s.blobsDir(), e.Name()), filepath.Join(dst, "blob")); err != nil {
			return removed, bytes, fmt.Errorf("image gc: %w", err)
		}
		removed = append(removed, digest)
		bytes += size
	}
	return removed, bytes, nil
}

// ImportDir imports the directory tree src as the image called name. It
// copies regular files, directories and symlinks with their permission
// bits and ownership; symlinks are copied as symlinks and never followed,
// so the walk cannot leave src; a hard-linked file becomes independent
// copies. Sockets, device nodes and FIFOs are skipped: a sandbox gets its
// own /dev, and an image must not bring device nodes. A tree without a
// working /bin/sh is refused (checkShell).
func (s *Store) ImportDir(ctx context.Context, name, src string) (*Image, error) {
	if err := checkImportName(name); err != nil {
		return nil, err
	}
	return s.importWith(ctx, name, importConfig, rootfsProvenance, func(ctx context.Context, rootfs string) error {
		if err := s.copyTree(ctx, src, rootfs); err != nil {
			return err
		}
		return checkShell(rootfs, s.shellOptional)
	})
}

// rootfsProvenance is the provenance of a plain rootfs.
var rootfsProvenance = provenance{Source: "rootfs", Layers: 1}

func checkImportName(name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if name == BaseName {
		return errdefs.New(errdefs.ErrInvalidArgument, "image name %q is reserved for the built-in image", name)
	}
	return nil
}

// importWith runs fill on a fresh rootfs directory under tmp/ and, if it
// succeeds, stores the result as name with cfg.
func (s *Store) importWith(ctx context.Context, name string, cfg config, prov provenance, fill func(ctx context.Context, rootfs string) error) (*Image, error) {
	work, err := os.MkdirTemp(s.tmpDir(), "import-*")
	if err != nil {
		return nil, fmt.Errorf("import image %q: %w", name, err)
	}
	defer os.RemoveAll(work)
	rootfs := filepath.Join(work, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return nil, fmt.Errorf("import image %q: %w", name, err)
	}
	if err := os.Chmod(rootfs, 0o755); err != nil { // not subject to the umask
		return nil, fmt.Errorf("import image %q: %w", name, err)
	}
	if err := fill(ctx, rootfs); err != nil {
		return nil, fmt.Errorf("import image %q: %w", name, err)
	}
	return s.commit(ctx, name, work, cfg, prov)
}

// commit digests work/rootfs with cfg, moves work into blobs/ (or drops it
// if that content is stored already) and points name at it. work is gone
// or moved when commit returns.
func (s *Store) commit(ctx context.Context, name, work string, cfg config, prov provenance) (*Image, error) {
	digest, size, err := digestTree(ctx, filepath.Join(work, "rootfs"), cfg)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", name, err)
	}
	m := metadata{Digest: digest, Size: size, CreatedAt: time.Now().UTC(), config: cfg, provenance: prov}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(work, "image.json"), append(b, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("image %q: %w", name, err)
	}
	// One syncfs makes the whole tree durable before it becomes visible.
	if err := syncFS(work); err != nil {
		return nil, fmt.Errorf("image %q: %w", name, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	blob := s.blobDir(digest)
	if _, err := os.Lstat(filepath.Join(blob, "image.json")); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("image %q: %w", name, err)
		}
		if err := os.Rename(work, blob); err != nil {
			return nil, fmt.Errorf("store image %q: %w", name, err)
		}
		if err := syncDir(s.blobsDir()); err != nil {
			return nil, err
		}
	}
	old, had := s.names[name]
	if had && old == digest {
		// Nothing to write: a restart on an unchanged host (and on a full
		// disk) rewrites nothing.
		return s.load(name, digest)
	}
	s.names[name] = digest
	if err := s.saveNamesLocked(); err != nil {
		if had {
			s.names[name] = old
		} else {
			delete(s.names, name)
		}
		return nil, err
	}
	return s.load(name, digest)
}

func syncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}
