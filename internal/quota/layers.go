package quota

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Mode is how Layers enforces the limits.
type Mode int

const (
	// ModeAuto picks the first mode that works, in the order below.
	ModeAuto Mode = iota
	// ModeProjectQuota uses project quotas of the filesystem that already
	// holds <dataDir>/layers (XFS mounted with prjquota, or ext4 with the
	// project and quota features mounted with prjquota).
	ModeProjectQuota
	// ModeSharedImage mounts one sparse ext4 image with project quotas,
	// <dataDir>/layers.img, on <dataDir>/layers. It needs a kernel whose
	// ext4 can mount the quota feature (CONFIG_QUOTA and CONFIG_QFMT_V2).
	ModeSharedImage
	// ModeImagePerLayer gives each limited layer its own sparse ext4 image,
	// <dataDir>/layer-images/<name>.img, mounted on <dataDir>/layers/<name>
	// and sized to the limit. It needs only loop devices and ext4.
	ModeImagePerLayer
)

var modeNames = [...]string{"auto", "project-quota", "shared-image", "image-per-layer"}

func (m Mode) String() string {
	if m < 0 || int(m) >= len(modeNames) {
		return fmt.Sprintf("Mode(%d)", int(m))
	}
	return modeNames[m]
}

// Options configures Open. The zero value is the default.
type Options struct {
	// Mode forces a mode; ModeAuto (the default) picks one.
	Mode Mode
	// ImageBytes is the size of the sparse shared image, created once. The
	// default is 64 GiB, capped at the free space of dataDir's filesystem.
	ImageBytes int64
	// MaxInodes, if nonzero, is the number of inodes a layer may use. In the
	// project modes it is an inode hard limit; in ModeImagePerLayer it is the
	// inode count of the layer's filesystem, by default one per 4 KiB of the
	// limit and at least 4096.
	MaxInodes int64
	// FirstProjectID is the lowest project id handed to a layer (default
	// 100000), so the ids below stay free for the administrator's
	// /etc/projects on a shared host filesystem.
	FirstProjectID uint32
	// Mkfs is the path of mkfs.ext4 (from e2fsprogs). The default looks in
	// PATH, /usr/sbin and /sbin.
	Mkfs string
	// Overcommit, in ModeImagePerLayer, creates limited layers whatever
	// the free space; off (the default), a layer is created only if the
	// free space backs every live layer's limit and the new one (see
	// guard.go).
	Overcommit bool
	// WatermarkBytes is the free space that ModeImagePerLayer's guard
	// keeps on the data directory's filesystem: below it, writes in the
	// layers fail with ENOSPC (0: 5% of the filesystem, at most 256 MiB).
	WatermarkBytes int64
}

const (
	defaultImageBytes     = 64 << 30
	defaultFirstProjectID = 100000
	minImageBytes         = 64 << 20
)

// Layers is the directory that holds the sessions' writable layers, one
// subdirectory per layer, each with a hard size limit. It is safe for
// concurrent use. One Layers at a time may manage a data directory.
type Layers struct {
	dataDir string // absolute (immutable)
	dir     string // <dataDir>/layers (immutable)
	mode    Mode   // never ModeAuto (immutable)
	mounted bool   // Open mounted the shared image (immutable)
	dev     string // the shared image's loop device, when mounted (immutable)
	be      backend
	shared  *imageFS // the shared image's stand-in for the guard, in ModeSharedImage (immutable)

	mu        sync.Mutex
	busy      map[string]bool // names a Create or Remove is working on
	closed    bool            // Close was called
	unmounted bool            // Close unmounted the shared image
}

// backend is one way of enforcing the limits. Its methods get the layer's
// directory; Layers checks names and serializes operations per name.
type backend interface {
	create(dir string, limitBytes int64) error
	remove(dir string) error
	usage(dir string) (int64, error)
	// close releases what the backend holds open, so the fs can unmount.
	close() error
}

// Open prepares <dataDir>/layers. In ModeAuto it uses, in this order: the
// shared image if it is already mounted there (left by a daemon that
// crashed), project quotas of the filesystem holding the directory, the
// shared image (created and formatted on first use), and one image per layer.
func Open(dataDir string, o Options) (*Layers, error) {
	if o.ImageBytes == 0 {
		o.ImageBytes = defaultImageBytes
	}
	if o.FirstProjectID == 0 {
		o.FirstProjectID = defaultFirstProjectID
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	l := &Layers{dataDir: abs, dir: filepath.Join(abs, "layers"), busy: map[string]bool{}}
	if err := os.Mkdir(l.dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create layers directory: %w", err)
	}
	if err := l.open(o); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Layers) image() string     { return filepath.Join(l.dataDir, "layers.img") }
func (l *Layers) imagesDir() string { return filepath.Join(l.dataDir, "layer-images") }

func (l *Layers) open(o Options) error {
	switch o.Mode {
	case ModeProjectQuota:
		return l.openProjectQuota(o)
	case ModeSharedImage:
		return l.openSharedImage(o)
	case ModeImagePerLayer:
		return l.openImagePerLayer(o)
	case ModeAuto:
	default:
		return errdefs.New(errdefs.ErrInvalidArgument, "unknown quota mode %d", int(o.Mode))
	}
	// What an earlier Open left decides first, whatever else works now (a
	// data directory can gain project quotas later, by a remount with
	// prjquota): its layers live there, and a new mechanism would neither
	// see nor limit them. A shared image is reused, mounted or not; so are
	// per-layer images (a shared image mounted over them would hide them).
	if _, ok, err := loopBackedBy(l.dir, l.image()); err != nil {
		return err
	} else if ok {
		return l.openSharedImage(o)
	}
	if leftovers, _ := os.ReadDir(l.imagesDir()); len(leftovers) > 0 {
		return l.openImagePerLayer(o)
	}
	var why []string
	_, err := os.Stat(l.image())
	triedShared := err == nil
	if triedShared {
		// An image this kernel cannot mount, or a layers directory with
		// other contents, leaves the choice to the order below.
		err := l.openSharedImage(o)
		if err == nil || !errors.Is(err, errUnusable) {
			return err
		}
		why = append(why, err.Error())
	}
	err = l.openProjectQuota(o)
	if err == nil {
		return nil
	}
	why = append(why, err.Error())
	if !triedShared {
		err := l.openSharedImage(o)
		if err == nil {
			return nil
		}
		// Too little room to create it (a full disk at a restart) leaves
		// per-layer images, which need no space until a layer is made.
		if !errors.Is(err, errUnusable) && !errdefs.Is(err, errdefs.ErrResourceExhausted) {
			return err
		}
		why = append(why, err.Error())
	}
	if err := l.openImagePerLayer(o); err != nil {
		return fmt.Errorf("%w (no project quotas: %s)", err, strings.Join(why, "; "))
	}
	return nil
}

// Close releases the filesystem. It unmounts the shared image only if Open
// mounted it, and every per-layer image this Layers mounted; a busy
// filesystem is reported, never detached lazily, and a later Close tries
// again. The images stay on disk. Layers cannot be used after Close.
//
// Preconditions: no other method of l is running.
func (l *Layers) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.unguardShared()
	err := l.be.close()
	if l.mounted && !l.unmounted {
		if uerr := unmount(l.dir); uerr != nil {
			return errors.Join(err, uerr)
		}
		l.unmounted = true
		err = errors.Join(err, waitLoopFree(l.dev, waitLoop))
	}
	return err
}

// Release closes the store but leaves every layer mounted, for sandboxes
// that outlive the daemon: the next Open finds the mounts and adopts them.
// (Unmounting a layer that a running sandbox uses, then mounting its image
// again, would put one ext4 filesystem under two mounts.)
func (l *Layers) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if f, ok := l.be.(*imageFS); ok {
		f.mu.Lock()
		clear(f.owned)
		f.mu.Unlock()
	}
	l.unmounted = true // the shared image, if any, stays mounted too
	l.unguardShared()
	return l.be.close()
}

// unguardShared takes the shared image, if any, out of the guard.
func (l *Layers) unguardShared() {
	if l.shared != nil {
		unregister(l.shared)
		l.shared.mu.Lock()
		clear(l.shared.guard)
		l.shared.mu.Unlock()
	}
}

// Dir returns the directory that holds the layers, <dataDir>/layers.
func (l *Layers) Dir() string { return l.dir }

// Mounted reports whether Open mounted the shared image on Dir (and Close
// will unmount it).
func (l *Layers) Mounted() bool { return l.mounted }

// Mode returns the mode in use; never ModeAuto.
func (l *Layers) Mode() Mode { return l.mode }

// Create creates the layer directory <Dir>/<name> (mode 0700) whose contents
// can never use more than limitBytes (0: no limit) and returns its path.
// Writes past the limit fail with EDQUOT (project modes) or ENOSPC
// (per-layer images). Processes with CAP_SYS_RESOURCE are exempt from
// project quota limits, so the sandbox must not hold it (overlayfs drops it
// for the writes it makes to its upper directory).
func (l *Layers) Create(name string, limitBytes int64) (string, error) {
	if limitBytes < 0 {
		return "", errdefs.New(errdefs.ErrInvalidArgument, "negative size limit %d for layer %q", limitBytes, name)
	}
	dir, done, err := l.begin(name)
	if err != nil {
		return "", err
	}
	defer done()
	if l.shared != nil && limitBytes > 0 {
		// The limit counts for the next admission once it is set.
		registry.admit.Lock()
		defer registry.admit.Unlock()
		if err := l.shared.admit(limitBytes); err != nil {
			return "", fmt.Errorf("create layer %s: %w", name, err)
		}
	}
	if err := l.be.create(dir, limitBytes); err != nil {
		return "", fmt.Errorf("create layer %s: %w", name, err)
	}
	return dir, nil
}

// Remove deletes the layer's tree and releases its limit. The sandbox using
// it must be gone.
func (l *Layers) Remove(name string) error {
	dir, done, err := l.begin(name)
	if err != nil {
		return err
	}
	defer done()
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return errdefs.New(errdefs.ErrNotFound, "no layer %s", name)
	}
	if err := l.be.remove(dir); err != nil {
		return fmt.Errorf("remove layer %s: %w", name, err)
	}
	return nil
}

// Usage returns the bytes the layer uses, as its limit counts them.
func (l *Layers) Usage(name string) (int64, error) {
	if err := validName(name); err != nil {
		return 0, err
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return 0, errdefs.New(errdefs.ErrUnavailable, "layers at %s are closed", l.dir)
	}
	dir := filepath.Join(l.dir, name)
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return 0, errdefs.New(errdefs.ErrNotFound, "no layer %s", name)
	}
	n, err := l.be.usage(dir)
	if err != nil {
		return 0, fmt.Errorf("usage of layer %s: %w", name, err)
	}
	return n, nil
}

// Names returns the names of the existing layers, sorted, including those
// left by an earlier run.
func (l *Layers) Names() ([]string, error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() && validName(e.Name()) == nil {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// begin checks name, marks it busy and returns the layer's directory and the
// function that clears the mark.
func (l *Layers) begin(name string) (string, func(), error) {
	if err := validName(name); err != nil {
		return "", nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return "", nil, errdefs.New(errdefs.ErrUnavailable, "layers at %s are closed", l.dir)
	}
	if l.busy[name] {
		return "", nil, errdefs.New(errdefs.ErrConflict, "layer %s is being created or removed", name)
	}
	l.busy[name] = true
	return filepath.Join(l.dir, name), func() {
		l.mu.Lock()
		delete(l.busy, name)
		l.mu.Unlock()
	}, nil
}

// validName accepts a path component that is not reserved: no "/" or NUL,
// not "." or "..", no leading dot (kept for our own probes) and not
// lost+found (the root of an ext4 filesystem has one).
func validName(name string) error {
	switch {
	case name == "", len(name) > 255, strings.ContainsAny(name, "/\x00"),
		strings.HasPrefix(name, "."), name == "lost+found":
		return errdefs.New(errdefs.ErrInvalidArgument, "invalid layer name %q", name)
	}
	return nil
}

// freeBytes returns the space an unprivileged writer can still use on the
// filesystem holding path.
func freeBytes(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}
