package image

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// maxHeaderBytes bounds what one tar entry may cost beyond its file data
// (header blocks, padding, PAX records, GNU long names), for the cap on the
// decompressed stream.
const maxHeaderBytes = 4096

// maxDeferredBytes bounds the memory kept for directory modes and times,
// which are applied after all entries.
const maxDeferredBytes = 64 << 20

// ImportTar imports a tar archive of a flat rootfs, plain or
// gzip-compressed (recognised by its magic number), as the image called
// name.
//
// The archive is untrusted. Extraction goes through an os.Root on a fresh
// directory, so no entry can write outside it:
//   - a leading "/" is stripped; names with a ".." component, names and
//     link targets that are too long, and whiteouts (".wh.*") are refused;
//   - os.Root refuses a path through a symlink that leads out of the
//     rootfs or is absolute; symlinks themselves are created as they are,
//     since they are resolved inside the sandbox;
//   - a hard link must name an existing regular file or symlink inside;
//   - character and block devices and FIFOs are skipped, never created;
//   - entries, file data (MaxImportBytes, checked against each declared
//     size before writing) and the decompressed stream are capped.
//
// Ownership, permission bits and times come from the headers; xattrs
// (and with them file capabilities) are dropped. A refused archive gives
// an errdefs.ErrInvalidArgument or errdefs.ErrTooLarge error and leaves
// nothing behind; so does a rootfs without a working /bin/sh (checkShell).
func (s *Store) ImportTar(ctx context.Context, name string, r io.Reader) (*Image, error) {
	if err := checkImportName(name); err != nil {
		return nil, err
	}
	return s.importWith(ctx, name, importConfig, rootfsProvenance, func(ctx context.Context, rootfs string) error {
		if err := s.untar(ctx, r, rootfs, modeRootfs); err != nil {
			return err
		}
		return checkShell(rootfs, s.shellOptional)
	})
}

// untarMode is the kind of archive the unpacker takes. Every mode has the
// same guards (see ImportTar); they differ in what an archive may hold.
type untarMode int

const (
	// modeRootfs is a flat rootfs tar, plain or gzip-compressed. A later
	// entry for a path replaces an earlier one, as tar does.
	modeRootfs untarMode = iota
	// modeLayers is the stream of an image's layers flattened by
	// mutate.Extract: uncompressed, the topmost layer first, whiteouts
	// already applied. The first entry for a path wins (a later one comes
	// from a lower layer, or is below a directory an upper layer made),
	// and a hard link may come before its target, which a lower layer
	// brings: it is made at the end.
	modeLayers
	// modePlain holds only directories and regular files: an OCI image
	// layout, whose files the daemon reads back.
	modePlain
)

// ctxReader fails reads once ctx is done and after limit bytes.
type ctxReader struct {
	ctx   context.Context
	r     io.Reader
	limit int64
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if c.limit <= 0 {
		return 0, errdefs.New(errdefs.ErrTooLarge, "the archive is too large")
	}
	if int64(len(p)) > c.limit {
		p = p[:c.limit]
	}
	n, err := c.r.Read(p)
	c.limit -= int64(n)
	return n, err
}

// dirMeta is a directory's mode and times, applied after all entries so
// that creating the children does not change them.
type dirMeta struct {
	name  string
	mode  fs.FileMode
	mtime time.Time
	atime time.Time
}

type untarrer struct {
	root       *os.Root
	mode       untarMode
	maxBytes   int64
	maxEntries int
	bytes      int64
	dirs       map[string]int // name -> index in dirList
	dirList    []dirMeta
	dirBytes   int
	// lastParent is the parent directory makeParent last made sure of.
	lastParent string
	// links are the hard links whose target was not there yet (modeLayers).
	links []*tar.Header
}

func (s *Store) untar(ctx context.Context, r io.Reader, rootfs string, mode untarMode) error {
	maxBytes, maxEntries := s.maxImportBytes(), s.maxImportEntries()
	streamLimit := int64(math.MaxInt64)
	if maxBytes < math.MaxInt64/2 && int64(maxEntries) < math.MaxInt64/(2*maxHeaderBytes) {
		// Both sides of the sum stay below MaxInt64/2: no overflow.
		streamLimit = maxBytes + int64(maxEntries)*maxHeaderBytes + 2*maxHeaderBytes
	}
	br := bufio.NewReader(&ctxReader{ctx: ctx, r: r, limit: math.MaxInt64})
	var in io.Reader = br
	if magic, _ := br.Peek(2); mode != modeLayers && len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return errdefs.New(errdefs.ErrInvalidArgument, "malformed gzip stream: %w", err)
		}
		defer zr.Close()
		in = zr
	}
	// The limit applies to the decompressed stream: a small gzip bomb
	// cannot make extraction chew forever.
	in = &ctxReader{ctx: ctx, r: in, limit: streamLimit}

	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return err
	}
	defer root.Close()
	u := &untarrer{root: root, mode: mode, maxBytes: maxBytes, maxEntries: maxEntries, dirs: map[string]int{}}
	tr := tar.NewReader(in)
	for n := 1; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return classifyReadErr(err)
		}
		if n > maxEntries {
			return errdefs.New(errdefs.ErrTooLarge, "the archive has more than %d entries", maxEntries)
		}
		if err := u.entry(hdr, tr); err != nil {
			return err
		}
	}
	if err := u.finishLinks(); err != nil {
		return err
	}
	return u.finishDirs()
}

// classifyReadErr classifies an error from reading the archive.
func classifyReadErr(err error) error {
	if errdefs.ClassOf(err) != errdefs.ErrInternal || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return errdefs.New(errdefs.ErrInvalidArgument, "malformed archive: %w", err)
}

// cleanName checks an entry name (or hard link target) and returns it
// relative to the rootfs, "." for the rootfs itself.
func cleanName(what, name string) (string, error) {
	if len(name) > maxPathLen {
		return "", errdefs.New(errdefs.ErrInvalidArgument, "archive entry %.64q...: %s longer than %d bytes", name, what, maxPathLen)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q: NUL byte in %s", name, what)
	}
	rel := strings.TrimLeft(name, "/")
	for _, c := range strings.Split(rel, "/") {
		if c == ".." {
			return "", errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q: %s contains \"..\"", name, what)
		}
		if len(c) > maxNameLen {
			return "", errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q: a component of the %s is longer than %d bytes", name, what, maxNameLen)
		}
		if strings.HasPrefix(c, ".wh.") {
			return "", errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q is a whiteout: a flat rootfs tar has none; layered images come with `image pull`", name)
		}
	}
	return path.Clean(rel), nil
}

// fsErr classifies an error of a filesystem operation for an entry: the
// host's trouble stays internal, anything else is the archive's fault (a
// path through a symlink out of the rootfs, a file where a directory
// should be, ...).
func fsErr(name string, err error) error {
	if isResourceErr(err) {
		return fmt.Errorf("archive entry %q: %w", name, err)
	}
	return errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q: %v", name, err)
}

func (u *untarrer) entry(hdr *tar.Header, data io.Reader) error {
	name, err := cleanName("name", hdr.Name)
	if err != nil {
		return err
	}
	if hdr.Uid < 0 || hdr.Gid < 0 || int64(hdr.Uid) >= math.MaxUint32 || int64(hdr.Gid) >= math.MaxUint32 {
		return errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q: bad owner %d:%d", hdr.Name, hdr.Uid, hdr.Gid)
	}
	mode := tarMode(hdr.Mode)
	if u.mode == modePlain && hdr.Typeflag != tar.TypeDir && hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeRegA {
		return errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q: only directories and regular files are allowed here", hdr.Name)
	}
	if u.mode == modeLayers && name != "." {
		// The first entry for a path wins: what is there came from an
		// upper layer. A directory entry still gives an existing
		// directory its owner and mode (an upper layer's entries below
		// it made it, with defaults).
		_, err := u.root.Lstat(name)
		switch {
		case errors.Is(err, unix.ENOTDIR):
			return nil // below something an upper layer made a non-directory
		case err == nil && hdr.Typeflag != tar.TypeDir:
			return nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return fsErr(name, err)
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return u.dir(name, hdr, mode)
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse, tar.TypeCont:
		return u.file(name, hdr, mode, data)
	case tar.TypeSymlink:
		return u.symlink(name, hdr)
	case tar.TypeLink:
		return u.link(name, hdr)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		// A sandbox gets its own /dev; an image brings no device nodes.
		return nil
	case tar.TypeXGlobalHeader:
		return nil
	default:
		return errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q: unsupported type %q", hdr.Name, hdr.Typeflag)
	}
}

// tarMode converts a tar header's mode to permission bits with setuid,
// setgid and sticky.
func tarMode(m int64) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// makeParent creates the missing parent directories of name with mode
// 0755 (exactly, whatever the umask), owned by root, as tar does for
// entries that come before their directory.
func (u *untarrer) makeParent(name string) error {
	dir := path.Dir(name)
	if dir == "." || dir == u.lastParent {
		return nil
	}
	for i := 0; i < len(dir); i++ {
		if i < len(dir)-1 && dir[i+1] != '/' {
			continue
		}
		p := dir[:i+1]
		fi, err := u.root.Lstat(p)
		switch {
		case err == nil && (fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0):
			continue // a symlink is followed by the next step, inside the root
		case err == nil:
			return errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q: %s is not a directory", name, p)
		case !errors.Is(err, fs.ErrNotExist):
			return fsErr(name, err)
		}
		if err := u.root.Mkdir(p, 0o755); err != nil {
			return fsErr(name, err)
		}
		if err := u.root.Chmod(p, 0o755); err != nil {
			return fsErr(name, err)
		}
	}
	u.lastParent = dir
	return nil
}

// taken reports whether something is at name already, or a parent of
// name is not a directory: in modeLayers, an upper layer decided what is
// there. A path that leads through a symlink out of the rootfs is an
// error.
func (u *untarrer) taken(name string) (bool, error) {
	_, err := u.root.Lstat(name)
	switch {
	case err == nil, errors.Is(err, unix.ENOTDIR):
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fsErr(name, err)
}

// clear removes what is at name so that a non-directory can take its
// place. An existing directory is not replaced.
func (u *untarrer) clear(name string) error {
	fi, err := u.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fsErr(name, err)
	}
	if fi.IsDir() {
		return errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q would replace a directory", name)
	}
	if err := u.root.Remove(name); err != nil {
		return fsErr(name, err)
	}
	u.lastParent = "" // name may have been a directory on that path
	return nil
}

func (u *untarrer) dir(name string, hdr *tar.Header, mode fs.FileMode) error {
	if name != "." {
		if err := u.makeParent(name); err != nil {
			return err
		}
		fi, err := u.root.Lstat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := u.root.Mkdir(name, 0o700); err != nil {
				return fsErr(name, err)
			}
		case err != nil:
			return fsErr(name, err)
		case !fi.IsDir() && u.mode == modeLayers:
			return nil // an upper layer put a file here
		case !fi.IsDir():
			if err := u.root.Remove(name); err != nil {
				return fsErr(name, err)
			}
			u.lastParent = ""
			if err := u.root.Mkdir(name, 0o700); err != nil {
				return fsErr(name, err)
			}
		}
	}
	if err := u.root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
		return fsErr(name, err)
	}
	m := dirMeta{name: name, mode: mode, mtime: hdr.ModTime, atime: hdr.AccessTime}
	if i, ok := u.dirs[name]; ok {
		u.dirList[i] = m
		return nil
	}
	u.dirBytes += len(name) + 64
	if u.dirBytes > maxDeferredBytes {
		return errdefs.New(errdefs.ErrTooLarge, "the archive has too many directories")
	}
	u.dirs[name] = len(u.dirList)
	u.dirList = append(u.dirList, m)
	return nil
}

// finishDirs applies the directories' modes and times, deepest first.
func (u *untarrer) finishDirs() error {
	slices.SortStableFunc(u.dirList, func(a, b dirMeta) int {
		return strings.Count(b.name, "/") - strings.Count(a.name, "/")
	})
	for _, d := range u.dirList {
		if err := u.root.Chmod(d.name, d.mode); err != nil {
			return fsErr(d.name, err)
		}
		if err := u.root.Chtimes(d.name, atimeOr(d.atime, d.mtime), d.mtime); err != nil {
			return fsErr(d.name, err)
		}
	}
	return nil
}

func timespec(t time.Time) unix.Timespec {
	return unix.Timespec{Sec: t.Unix(), Nsec: int64(t.Nanosecond())}
}

func atimeOr(atime, mtime time.Time) time.Time {
	if atime.IsZero() {
		return mtime
	}
	return atime
}

func (u *untarrer) file(name string, hdr *tar.Header, mode fs.FileMode, data io.Reader) error {
	if name == "." {
		return errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q: the rootfs must be a directory", hdr.Name)
	}
	if hdr.Size < 0 {
		return errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q: negative size", hdr.Name)
	}
	left := u.maxBytes - u.bytes
	if hdr.Size > left {
		return errdefs.New(errdefs.ErrTooLarge, "archive entry %q: the import exceeds %d bytes of file data", hdr.Name, u.maxBytes)
	}
	if err := u.makeParent(name); err != nil {
		return err
	}
	if err := u.clear(name); err != nil {
		return err
	}
	// O_EXCL: never follow a symlink at name, never reuse a file.
	f, err := u.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fsErr(name, err)
	}
	defer f.Close()
	n, err := io.Copy(f, io.LimitReader(data, left+1))
	u.bytes += n
	if err != nil {
		if errdefs.ClassOf(err) != errdefs.ErrInternal || isResourceErr(err) {
			return fmt.Errorf("archive entry %q: %w", hdr.Name, err)
		}
		return classifyReadErr(fmt.Errorf("archive entry %q: %w", hdr.Name, err))
	}
	if n > left {
		return errdefs.New(errdefs.ErrTooLarge, "archive entry %q: the import exceeds %d bytes of file data", hdr.Name, u.maxBytes)
	}
	// Owner first: chown clears setuid and setgid.
	if err := f.Chown(hdr.Uid, hdr.Gid); err != nil {
		return fsErr(name, err)
	}
	if err := f.Chmod(mode); err != nil {
		return fsErr(name, err)
	}
	if err := f.Close(); err != nil {
		return fsErr(name, err)
	}
	return u.setTimes(name, hdr)
}

func (u *untarrer) symlink(name string, hdr *tar.Header) error {
	if name == "." {
		return errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q: the rootfs must be a directory", hdr.Name)
	}
	target := hdr.Linkname
	if target == "" || len(target) > maxPathLen || strings.IndexByte(target, 0) >= 0 {
		return errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q: bad symlink target", hdr.Name)
	}
	if err := u.makeParent(name); err != nil {
		return err
	}
	if err := u.clear(name); err != nil {
		return err
	}
	if err := u.root.Symlink(target, name); err != nil {
		return fsErr(name, err)
	}
	if err := u.root.Lchown(name, hdr.Uid, hdr.Gid); err != nil {
		return fsErr(name, err)
	}
	return u.setTimes(name, hdr)
}

func (u *untarrer) link(name string, hdr *tar.Header) error {
	if name == "." {
		return errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q: the rootfs must be a directory", hdr.Name)
	}
	target, err := cleanName("hard link target", hdr.Linkname)
	if err != nil {
		return err
	}
	fi, err := u.root.Lstat(target)
	if err != nil && u.mode == modeLayers && errors.Is(err, fs.ErrNotExist) && len(u.links) < u.maxEntries {
		// The target comes from a lower layer, later in the stream.
		u.dirBytes += len(hdr.Name) + len(hdr.Linkname) + 64
		if u.dirBytes > maxDeferredBytes {
			return errdefs.New(errdefs.ErrTooLarge, "the archive has too many hard links")
		}
		u.links = append(u.links, &tar.Header{Name: hdr.Name, Linkname: hdr.Linkname, Typeflag: tar.TypeLink})
		return nil
	}
	if err != nil {
		return errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q: hard link target %q: %v", hdr.Name, hdr.Linkname, err)
	}
	if !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0 {
		return errdefs.New(errdefs.ErrInvalidArgument, "archive entry %q: hard link target %q is not a file", hdr.Name, hdr.Linkname)
	}
	if target == name {
		return nil
	}
	// Every link is a file of its own in the digest and the size: charge
	// it, or a few links to a big file would cost far more than the cap.
	if fi.Mode().IsRegular() {
		if fi.Size() > u.maxBytes-u.bytes {
			return errdefs.New(errdefs.ErrTooLarge, "archive entry %q: the import exceeds %d bytes of file data", hdr.Name, u.maxBytes)
		}
		u.bytes += fi.Size()
	}
	if err := u.makeParent(name); err != nil {
		return err
	}
	if err := u.clear(name); err != nil {
		return err
	}
	if err := u.root.Link(target, name); err != nil {
		return fsErr(name, err)
	}
	return nil
}

// finishLinks makes the hard links whose targets came later in the stream.
// A link whose path was taken meanwhile is dropped, as the first entry
// wins; a target that never came is the archive's fault.
func (u *untarrer) finishLinks() error {
	links := u.links
	u.links = nil
	u.mode = modeRootfs // no more deferring: a missing target is an error now
	for _, hdr := range links {
		name, err := cleanName("name", hdr.Name)
		if err != nil {
			return err
		}
		if taken, err := u.taken(name); err != nil || taken {
			if err != nil {
				return err
			}
			continue
		}
		if err := u.link(name, hdr); err != nil {
			return err
		}
	}
	return nil
}

// setTimes sets the times of name from hdr without following a symlink:
// through the parent directory, opened inside the root.
func (u *untarrer) setTimes(name string, hdr *tar.Header) error {
	parent, err := u.root.Open(path.Dir(name))
	if err != nil {
		return fsErr(name, err)
	}
	defer parent.Close()
	mt := hdr.ModTime
	at := atimeOr(hdr.AccessTime, mt)
	ts := []unix.Timespec{timespec(at), timespec(mt)}
	if mt.IsZero() {
		ts = []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
	}
	if err := unix.UtimesNanoAt(int(parent.Fd()), path.Base(name), ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fsErr(name, err)
	}
	return nil
}
