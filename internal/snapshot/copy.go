package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/sparse"
)

// Canonical id space: a layer's files are owned by ids 0 to IDSpace-1.
const (
	IDSpace = 65536
	nobody  = 65534
)

// maxDepth bounds directory nesting: every level holds two descriptors
// while it is copied.
const maxDepth = 1024

// Stats counts what a copy or an import wrote.
type Stats struct {
	Files, Dirs, Links int64
	// Bytes of regular-file data.
	Bytes int64
	// Skipped are entries that have no place in a layer (device nodes that
	// are no whiteouts, sockets).
	Skipped int64
}

// Copy copies the writable layer src of a sandbox whose root is host id
// base into the new directory dst (whose parent must exist), re-based to
// the canonical ids: owner u becomes u-base when base <= u < base+IDSpace,
// else nobody. dst is removed again on failure. The caller keeps src still
// meanwhile (freezes the sandbox); a src that changes anyway yields some
// mix of its states, never anything from outside it.
func Copy(ctx context.Context, dst, src string, base uint32) (st Stats, err error) {
	srcFd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return st, fmt.Errorf("open layer %s: %w", src, err)
	}
	defer unix.Close(srcFd)
	if err := unix.Mkdir(dst, 0o700); err != nil {
		return st, fmt.Errorf("create layer %s: %w", dst, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dst)
		}
	}()
	dstFd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return st, err
	}
	defer unix.Close(dstFd)
	c := &copier{ctx: ctx, base: base, dstRoot: dstFd, links: map[inode]string{}}
	var sst unix.Stat_t
	if err := unix.Fstat(srcFd, &sst); err != nil {
		return st, err
	}
	if err := c.dir(srcFd, dstFd, "", 0); err != nil {
		return c.st, err
	}
	if err := c.finish(srcFd, dstFd, &sst, true); err != nil {
		return c.st, err
	}
	return c.st, nil
}

type inode struct{ dev, ino uint64 }

type copier struct {
	ctx     context.Context
	base    uint32
	dstRoot int
	// links maps a source inode with more than one link to the path (below
	// dstRoot) of its first copy.
	links map[inode]string
	st    Stats
}

func (c *copier) id(u uint32) int {
	if u >= c.base && u-c.base < IDSpace {
		return int(u - c.base)
	}
	return nobody
}

// dir copies the entries of the directory srcFd into dstFd; rel is its path
// below the roots.
func (c *copier) dir(srcFd, dstFd int, rel string, depth int) error {
	if depth > maxDepth {
		return errdefs.New(errdefs.ErrInvalidArgument, "%s: directories nest deeper than %d levels", rel, maxDepth)
	}
	if err := c.ctx.Err(); err != nil {
		return err
	}
	names, err := readNames(srcFd)
	if err != nil {
		return fmt.Errorf("read directory %q: %w", rel, err)
	}
	for _, name := range names {
		if err := c.entry(srcFd, dstFd, name, path.Join(rel, name), depth); err != nil {
			return err
		}
	}
	return nil
}

func (c *copier) entry(srcDir, dstDir int, name, rel string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(srcDir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // gone meanwhile
		}
		return fmt.Errorf("stat %q: %w", rel, err)
	}
	uid, gid := c.id(st.Uid), c.id(st.Gid)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		fd, err := openChecked(srcDir, name, unix.O_DIRECTORY, unix.S_IFDIR, &st)
		if err != nil {
			return fmt.Errorf("open directory %q: %w", rel, err)
		}
		defer unix.Close(fd)
		if err := unix.Mkdirat(dstDir, name, 0o700); err != nil {
			return fmt.Errorf("create directory %q: %w", rel, err)
		}
		dfd, err := unix.Openat(dstDir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		c.st.Dirs++
		if err := c.dir(fd, dfd, rel, depth+1); err != nil {
			return err
		}
		return c.finish(fd, dfd, &st, true)
	case unix.S_IFREG:
		if st.Nlink > 1 {
			if first, ok := c.links[inode{st.Dev, st.Ino}]; ok {
				if err := unix.Linkat(c.dstRoot, first, dstDir, name, 0); err != nil {
					return fmt.Errorf("link %q to %q: %w", rel, first, err)
				}
				c.st.Links++
				return nil
			}
		}
		fd, err := openChecked(srcDir, name, unix.O_NONBLOCK, unix.S_IFREG, &st)
		if err != nil {
			return fmt.Errorf("open %q: %w", rel, err)
		}
		defer unix.Close(fd)
		dfd, err := unix.Openat(dstDir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return fmt.Errorf("create %q: %w", rel, err)
		}
		defer unix.Close(dfd)
		n, err := sparse.Copy(dfd, fd, st.Size)
		if err != nil {
			return fmt.Errorf("copy %q: %w", rel, err)
		}
		c.st.Bytes += n
		c.st.Files++
		if st.Nlink > 1 {
			c.links[inode{st.Dev, st.Ino}] = rel
		}
		return c.finish(fd, dfd, &st, false)
	case unix.S_IFLNK:
		target, err := readlinkat(srcDir, name)
		if err != nil {
			return fmt.Errorf("read link %q: %w", rel, err)
		}
		if err := unix.Symlinkat(target, dstDir, name); err != nil {
			return fmt.Errorf("create link %q: %w", rel, err)
		}
		c.st.Files++
		return finishPath(dstDir, name, uid, gid, &st)
	case unix.S_IFCHR:
		if st.Rdev != 0 {
			c.st.Skipped++
			return nil
		}
		// A whiteout: the sandbox deleted a file of a lower layer.
		if err := unix.Mknodat(dstDir, name, unix.S_IFCHR|0o600, 0); err != nil {
			return fmt.Errorf("create whiteout %q: %w", rel, err)
		}
		c.st.Files++
		if err := finishPath(dstDir, name, uid, gid, &st); err != nil {
			return err
		}
		return unix.Fchmodat(dstDir, name, st.Mode&0o7777, 0)
	case unix.S_IFIFO:
		if err := unix.Mknodat(dstDir, name, unix.S_IFIFO|0o600, 0); err != nil {
			return fmt.Errorf("create fifo %q: %w", rel, err)
		}
		c.st.Files++
		if err := finishPath(dstDir, name, uid, gid, &st); err != nil {
			return err
		}
		return unix.Fchmodat(dstDir, name, st.Mode&0o7777, 0)
	default:
		c.st.Skipped++
		return nil
	}
}

// finish gives the copy dfd of fd its owner, mode, xattrs and times.
func (c *copier) finish(fd, dfd int, st *unix.Stat_t, isDir bool) error {
	if err := copyXattrs(dfd, fd, c.id); err != nil {
		return err
	}
	// Owner before mode: chown clears the set-id bits.
	if err := unix.Fchown(dfd, c.id(st.Uid), c.id(st.Gid)); err != nil {
		return err
	}
	if err := unix.Fchmod(dfd, layerMode(st.Mode, isDir)); err != nil {
		return err
	}
	return unix.Futimes(dfd, []unix.Timeval{unix.NsecToTimeval(unix.TimespecToNsec(st.Atim)), unix.NsecToTimeval(unix.TimespecToNsec(st.Mtim))})
}

// layerMode is the permission of a file copied or imported into a layer:
// a regular file loses setuid and setgid. Re-based to the canonical ids, a
// session's setuid-root file would be a setuid file of the host's real
// root on the data filesystem (mounted without nosuid as a rule), and
// sessions run with no_new_privs, where the bits grant nothing anyway. A
// directory keeps setgid (its files inherit its group).
func layerMode(mode uint32, isDir bool) uint32 {
	mode &= 0o7777
	if !isDir {
		mode &^= unix.S_ISUID | unix.S_ISGID
	}
	return mode
}

// finishPath sets the owner and times of a link, whiteout or fifo name in
// dir, never following it.
func finishPath(dir int, name string, uid, gid int, st *unix.Stat_t) error {
	if err := unix.Fchownat(dir, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	return unix.UtimesNanoAt(dir, name, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
}

// openChecked opens name in dir without following a link and makes sure it
// is still the file of type typ that st describes.
func openChecked(dir int, name string, flags int, typ uint32, st *unix.Stat_t) (int, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return -1, err
	}
	var got unix.Stat_t
	if err := unix.Fstat(fd, &got); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if got.Mode&unix.S_IFMT != typ || got.Ino != st.Ino || got.Dev != st.Dev {
		unix.Close(fd)
		return -1, errdefs.New(errdefs.ErrConflict, "the file changed while it was copied")
	}
	*st = got
	return fd, nil
}

// readNames lists the directory fd, sorted. It reads through a duplicate,
// so fd stays open and usable.
func readNames(fd int) ([]string, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(dup)
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

func readlinkat(dir int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		b := make([]byte, size)
		n, err := unix.Readlinkat(dir, name, b)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(b[:n]), nil
		}
		if size > 1<<16 {
			return "", unix.ENAMETOOLONG
		}
	}
}
