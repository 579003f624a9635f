package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// The helpers in this file work on directory file descriptors and never
// follow a symlink: every directory is opened with O_NOFOLLOW relative to
// its already open parent, so a tree that changes while it is read cannot
// lead the walk out of it.

// openDirAt opens the directory name below dir without following a
// symlink.
func openDirAt(dir *os.File, name string) (*os.File, error) {
	fd, err := openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openDir opens path, which must be a directory; a symlink as the last
// component is followed (the caller named it).
func openDir(path string) (*os.File, error) {
	fd, err := openat(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

func openat(dirfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// lstatAt stats name below dir without following a symlink.
func lstatAt(dir *os.File, name string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &os.PathError{Op: "fstatat", Path: name, Err: err}
	}
	return &st, nil
}

// openFileAt opens the regular file name below dir for reading, without
// following a symlink, and checks that it is the file want describes.
func openFileAt(dir *os.File, name string, want *unix.Stat_t) (*os.File, error) {
	// O_NONBLOCK: should the entry have become a FIFO, do not hang on it.
	fd, err := openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	if err := sameFile(f, want, unix.S_IFREG); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// sameFile checks that f is the file want describes, of type typ: the entry
// was not swapped between the stat and the open.
func sameFile(f *os.File, want *unix.Stat_t, typ uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return &os.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	if st.Mode&unix.S_IFMT != typ || st.Dev != want.Dev || st.Ino != want.Ino {
		return errdefs.New(errdefs.ErrInvalidArgument, "%s changed while it was read", f.Name())
	}
	return nil
}

// readlinkAt reads the target of the symlink name below dir.
func readlinkAt(dir *os.File, name string) (string, error) {
	buf := make([]byte, maxPathLen+1)
	n, err := unix.Readlinkat(int(dir.Fd()), name, buf)
	if err != nil {
		return "", &os.PathError{Op: "readlinkat", Path: name, Err: err}
	}
	if n > maxPathLen {
		return "", errdefs.New(errdefs.ErrInvalidArgument, "symlink %s: target longer than %d bytes", name, maxPathLen)
	}
	return string(buf[:n]), nil
}

// readNames returns the names in dir, sorted in byte order.
func readNames(dir *os.File) ([]string, error) {
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", dir.Name(), err)
	}
	slices.Sort(names)
	return names, nil
}

// copier copies trees without following symlinks, with limits.
type copier struct {
	ctx        context.Context
	maxBytes   int64 // regular-file data
	maxEntries int
	// publicOnly skips regular files other users could not read and
	// directories they could not list: a second guard, after the
	// allow-list, against copying a host secret into the base image.
	publicOnly bool

	bytes   int64
	entries int
}

// copyTree copies the tree src into the existing directory dst and gives
// dst the permissions, owner and times of src.
func (s *Store) copyTree(ctx context.Context, src, dst string) error {
	c := &copier{ctx: ctx, maxBytes: s.maxImportBytes(), maxEntries: s.maxImportEntries()}
	sd, err := openDir(src)
	if err != nil {
		return errdefs.New(errdefs.ErrInvalidArgument, "import source: %w", err)
	}
	defer sd.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(sd.Fd()), &st); err != nil {
		return err
	}
	dd, err := openDir(dst)
	if err != nil {
		return err
	}
	defer dd.Close()
	if err := c.copyDir(sd, dd, 1); err != nil {
		return err
	}
	return setAttrs(dd, nil, dst, &st)
}

func (s *Store) maxImportBytes() int64 {
	if s.MaxImportBytes > 0 {
		return s.MaxImportBytes
	}
	return DefaultMaxImportBytes
}

func (s *Store) maxImportEntries() int {
	if s.MaxImportEntries > 0 {
		return s.MaxImportEntries
	}
	return DefaultMaxImportEntries
}

// copyDir copies the entries of src into dst; depth is the level of the
// entries below the top of the copy.
func (c *copier) copyDir(src, dst *os.File, depth int) error {
	names, err := readNames(src)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := c.copyEntry(src, dst, name, depth); err != nil {
			return err
		}
	}
	return nil
}

// copyEntry copies src/name to dst/name. Sockets, device nodes and FIFOs
// are skipped.
func (c *copier) copyEntry(src, dst *os.File, name string, depth int) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	c.entries++
	if c.entries > c.maxEntries {
		return errdefs.New(errdefs.ErrTooLarge, "more than %d entries", c.maxEntries)
	}
	st, err := lstatAt(src, name)
	if err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if c.publicOnly && st.Mode&0o005 != 0o005 {
			return nil
		}
		if depth > maxDepth {
			return errdefs.New(errdefs.ErrInvalidArgument, "directory %s: more than %d levels deep", name, maxDepth)
		}
		sd, dd, err := openDirPair(src, dst, name, st)
		if err != nil {
			return err
		}
		defer sd.Close()
		defer dd.Close()
		if err := c.copyDir(sd, dd, depth+1); err != nil {
			return err
		}
		// Last, so that copying the children does not change the mtime.
		return setAttrs(dd, dst, name, st)

	case unix.S_IFREG:
		if c.publicOnly && st.Mode&0o004 == 0 {
			return nil
		}
		if st.Size > c.maxBytes-c.bytes {
			return errdefs.New(errdefs.ErrTooLarge, "file %s: the import exceeds %d bytes of file data", name, c.maxBytes)
		}
		sf, err := openFileAt(src, name, st)
		if err != nil {
			return err
		}
		defer sf.Close()
		fd, err := openat(int(dst.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return &os.PathError{Op: "create", Path: name, Err: err}
		}
		df := os.NewFile(uintptr(fd), name)
		defer df.Close()
		left := c.maxBytes - c.bytes
		n, err := io.Copy(df, io.LimitReader(sf, left+1))
		c.bytes += n
		if err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
		if n > left {
			return errdefs.New(errdefs.ErrTooLarge, "file %s: the import exceeds %d bytes of file data", name, c.maxBytes)
		}
		if err := setAttrs(df, dst, name, st); err != nil {
			return err
		}
		return df.Close()

	case unix.S_IFLNK:
		target, err := readlinkAt(src, name)
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(target, int(dst.Fd()), name); err != nil {
			return &os.PathError{Op: "symlinkat", Path: name, Err: err}
		}
		return setLinkAttrs(dst, name, st)

	default:
		return nil // socket, device node or FIFO
	}
}

// setAttrs gives the open file or directory f, which is dir/name, the
// owner, permission bits (with setuid, setgid and sticky) and times of st.
// The owner goes first, since chown clears the setuid and setgid bits.
// dir may be nil when name is an absolute path.
func setAttrs(f, dir *os.File, name string, st *unix.Stat_t) error {
	fd := int(f.Fd())
	if err := unix.Fchown(fd, int(st.Uid), int(st.Gid)); err != nil {
		return &os.PathError{Op: "fchown", Path: f.Name(), Err: err}
	}
	if err := unix.Fchmod(fd, st.Mode&0o7777); err != nil {
		return &os.PathError{Op: "fchmod", Path: f.Name(), Err: err}
	}
	return setTimes(dir, name, st)
}

// setTimes sets the times of dir/name, not following a symlink, to those
// of st. dir may be nil when name is an absolute path.
func setTimes(dir *os.File, name string, st *unix.Stat_t) error {
	dirfd := unix.AT_FDCWD
	if dir != nil {
		dirfd = int(dir.Fd())
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	if err := unix.UtimesNanoAt(dirfd, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "utimensat", Path: name, Err: err}
	}
	return nil
}

// setLinkAttrs gives the symlink dir/name the owner and times of st.
func setLinkAttrs(dir *os.File, name string, st *unix.Stat_t) error {
	if err := unix.Fchownat(int(dir.Fd()), name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "lchown", Path: name, Err: err}
	}
	return setTimes(dir, name, st)
}

// isResourceErr reports whether err is the host's trouble (disk full, out
// of memory or descriptors, I/O error) rather than the import's.
func isResourceErr(err error) bool {
	for _, e := range []error{unix.ENOSPC, unix.EDQUOT, unix.EIO, unix.EROFS, unix.ENOMEM, unix.EMFILE, unix.ENFILE} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// openDirPair opens the directory name under src (checking it is still the
// one st describes) and the directory of the same name under dst, which it
// creates (0700 until its attributes are copied).
func openDirPair(src, dst *os.File, name string, st *unix.Stat_t) (sd, dd *os.File, err error) {
	sd, err = openDirAt(src, name)
	if err != nil {
		return nil, nil, err
	}
	if err := sameFile(sd, st, unix.S_IFDIR); err != nil {
		sd.Close()
		return nil, nil, err
	}
	if err := unix.Mkdirat(int(dst.Fd()), name, 0o700); err != nil && err != unix.EEXIST {
		sd.Close()
		return nil, nil, &os.PathError{Op: "mkdirat", Path: name, Err: err}
	}
	dd, err = openDirAt(dst, name)
	if err != nil {
		sd.Close()
		return nil, nil, err
	}
	return sd, dd, nil
}
