package agent

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/errdefs"
)

// File operations run in the agent, that is inside the sandbox's mount
// namespace after pivot_root: "/" is the sandbox's root, so "..", absolute
// paths and symlinks planted by sandboxed code all resolve inside the sandbox
// by the kernel's own rules. There is no host path to escape to.

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// resolve turns a request path into an absolute sandbox path.
func (a *Agent) resolve(p string) (string, error) {
	if p == "" {
		return "", errdefs.New(errdefs.ErrInvalidArgument, "path is required")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errdefs.New(errdefs.ErrInvalidArgument, "path contains a NUL byte")
	}
	// No lexical cleaning: "a/../b" is left to the kernel, which follows
	// symlinks as the shell would. Everything resolves inside the sandbox.
	if !path.IsAbs(p) {
		base := a.spec.BaseDir
		if base == "" {
			base = "/"
		}
		p = strings.TrimSuffix(base, "/") + "/" + p
	}
	return p, nil
}

func (a *Agent) fileOp(ctx context.Context, s *agentproto.Stream, op agentproto.Op, req *agentproto.FileRequest) {
	p, err := a.resolve(req.Path)
	if err != nil {
		s.Fail(err)
		return
	}
	var rep agentproto.FileReply
	switch op {
	case agentproto.OpReadFile:
		rep.Size, err = readFile(ctx, s, p, req.MaxBytes)
	case agentproto.OpWriteFile:
		rep.Size, err = a.writeFile(ctx, s, p, req.Mode, req.MaxBytes)
	case agentproto.OpList:
		rep.Entries, err = list(p)
		if err == nil {
			// A listing too large for one frame goes as Data.
			if js, jerr := json.Marshal(rep.Entries); jerr == nil && len(js) > agentproto.MaxTail {
				if err = s.WriteData(ctx, agentproto.ChanData, js); err == nil {
					rep.Entries, rep.EntriesStreamed = nil, true
				}
			}
		}
	case agentproto.OpStat:
		var e agentproto.Entry
		e, err = stat(p)
		rep.Entry = &e
	case agentproto.OpMkdir:
		var fd int
		if fd, err = a.mkdirAll(p); err == nil {
			unix.Close(fd)
		}
	case agentproto.OpRemove:
		err = remove(p, req.Recursive)
	case agentproto.OpTarGet:
		rep.Size, err = tarGet(ctx, s, p, req.MaxBytes)
	case agentproto.OpTarPut:
		rep.Size, err = a.tarPut(ctx, s, p, req.MaxBytes)
	}
	if err != nil {
		s.Fail(fileError(req.Path, err))
		return
	}
	s.Reply(rep, nil)
}

// fileError classifies a file error by its errno.
func fileError(p string, err error) error {
	// Explicit, not ClassOf: here a full filesystem is the session's own
	// layer at its disk limit (resource_exhausted below), not the host's
	// disk, which is what a bare ENOSPC means to the daemon.
	if errdefs.Explicit(err) {
		return err
	}
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return errdefs.New(errdefs.ErrInternal, "%s: %v", p, err)
	}
	msg := fmt.Sprintf("%s: %s", p, errno.Error())
	switch errno {
	case unix.ENOENT:
		return errdefs.New(errdefs.ErrNotFound, "%s", msg)
	case unix.EACCES, unix.EPERM, unix.EROFS:
		return errdefs.New(errdefs.ErrPermissionDenied, "%s", msg)
	case unix.ENOSPC, unix.EDQUOT, unix.EMFILE, unix.ENFILE:
		return errdefs.New(errdefs.ErrResourceExhausted, "%s", msg)
	case unix.EEXIST, unix.ENOTEMPTY, unix.EBUSY:
		return errdefs.New(errdefs.ErrConflict, "%s", msg)
	case unix.EFBIG:
		return errdefs.New(errdefs.ErrTooLarge, "%s", msg)
	default:
		return errdefs.New(errdefs.ErrInvalidArgument, "%s", msg)
	}
}

func tooLarge(max int64) error {
	return errdefs.New(errdefs.ErrTooLarge, "larger than the limit of %d bytes", max)
}

func readFile(ctx context.Context, s *agentproto.Stream, p string, max int64) (int64, error) {
	// O_NONBLOCK: opening a FIFO must not hang; non-regular files are refused
	// after the open, on the descriptor, so nothing can swap the path.
	fd, err := openIn(unix.AT_FDCWD, p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return 0, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		unix.Close(fd)
		return 0, errdefs.New(errdefs.ErrInvalidArgument, "%s is a directory", p)
	default:
		unix.Close(fd)
		return 0, errdefs.New(errdefs.ErrInvalidArgument, "%s is not a regular file", p)
	}
	if max > 0 && st.Size > max {
		unix.Close(fd)
		return 0, tooLarge(max)
	}
	_ = unix.SetNonblock(fd, false) // if it stays non-blocking, the read reports EAGAIN
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	var src io.Reader = f
	if max > 0 {
		src = io.LimitReader(f, max+1)
	}
	buf := make([]byte, agentproto.MaxChunk)
	var n int64
	for {
		k, err := src.Read(buf)
		if k > 0 {
			n += int64(k)
			if max > 0 && n > max {
				return n, tooLarge(max)
			}
			if werr := s.WriteData(ctx, agentproto.ChanData, buf[:k]); werr != nil {
				return n, werr
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// writeFile writes the stream's data to p through a temporary file in the
// same directory, renamed into place at the end: a failed upload leaves the
// old file untouched. The directory is reached by openAt2 (no magic link,
// not the agent's /proc) and everything after works on its descriptor.
func (a *Agent) writeFile(ctx context.Context, s *agentproto.Stream, p string, mode uint32, max int64) (int64, error) {
	dir, base := splitPath(p)
	if base == "" || base == "." || base == ".." || strings.HasSuffix(p, "/") {
		return 0, errdefs.New(errdefs.ErrInvalidArgument, "%s is a directory", p)
	}
	dfd, err := a.mkdirAll(dir)
	if err != nil {
		return 0, err
	}
	defer unix.Close(dfd)
	perm := uint32(0o644)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			return 0, errdefs.New(errdefs.ErrInvalidArgument, "%s is a directory", p)
		case unix.S_IFREG:
			perm = st.Mode & 0o777
		}
	}
	if mode != 0 {
		perm = mode & 0o7777
	}
	var tmpName string
	tfd := -1
	for attempt := 0; tfd < 0; attempt++ {
		var nonce [6]byte
		rand.Read(nonce[:])
		tmpName = ".warren-upload-" + hex.EncodeToString(nonce[:])
		tfd, err = unix.Openat(dfd, tmpName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil && (!errors.Is(err, unix.EEXIST) || attempt > 10) {
			return 0, err
		}
	}
	tmp := os.NewFile(uintptr(tfd), tmpName)
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			unix.Unlinkat(dfd, tmpName, 0)
		}
	}()
	r := agentproto.NewDataReader(ctx, s)
	var src io.Reader = r
	if max > 0 {
		src = io.LimitReader(r, max+1)
	}
	n, err := io.Copy(tmp, src)
	if err != nil {
		return n, err
	}
	if max > 0 && n > max {
		return n, tooLarge(max)
	}
	// What the API puts in a session must be the user's to change; the
	// owner first, as chown clears setuid.
	if a.owner != nil {
		if err := unix.Fchown(tfd, int(a.owner.uid), int(a.owner.gid)); err != nil {
			return n, err
		}
	}
	if err := unix.Fchmod(tfd, perm); err != nil {
		return n, err
	}
	if err := tmp.Close(); err != nil {
		return n, err
	}
	if err := unix.Renameat(dfd, tmpName, dfd, base); err != nil {
		return n, err
	}
	ok = true
	return n, nil
}

// entryAt describes name in the directory dfd without following it.
func entryAt(dfd int, name, p string) (agentproto.Entry, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return agentproto.Entry{}, err
	}
	return entryFromStat(dfd, name, p, &st)
}

// entryFromStat describes name in dfd, whose lstat is st.
func entryFromStat(dfd int, name, p string, st *unix.Stat_t) (agentproto.Entry, error) {
	e := agentproto.Entry{
		Name:  name,
		Path:  p,
		Size:  st.Size,
		Mode:  st.Mode & 0o7777,
		MTime: time.Unix(st.Mtim.Unix()).UTC(),
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Type = "file"
	case unix.S_IFDIR:
		e.Type = "dir"
	case unix.S_IFLNK:
		e.Type = "symlink"
		e.Target, _ = readlinkAt(dfd, name)
	default:
		e.Type = "other"
	}
	return e, nil
}

func readlinkAt(dfd int, name string) (string, error) {
	for n := 256; ; n *= 2 {
		buf := make([]byte, n)
		k, err := unix.Readlinkat(dfd, name, buf)
		if err != nil {
			return "", err
		}
		if k < n {
			return string(buf[:k]), nil
		}
	}
}

func stat(p string) (agentproto.Entry, error) {
	dir, base := splitPath(p)
	if base == "" || base == "." || base == ".." || strings.HasSuffix(p, "/") {
		// "/", or a path ending in a dot or a slash: the directory it
		// names.
		fd, err := openIn(unix.AT_FDCWD, p, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return agentproto.Entry{}, err
		}
		defer unix.Close(fd)
		e, err := entryAt(fd, ".", p)
		if e.Name = path.Base(p); e.Name == "." || e.Name == ".." {
			e.Name = base
		}
		return e, err
	}
	dfd, err := openIn(unix.AT_FDCWD, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return agentproto.Entry{}, err
	}
	defer unix.Close(dfd)
	return entryAt(dfd, base, p)
}

// maxListEntries bounds one listing.
const maxListEntries = 100000

func list(p string) ([]agentproto.Entry, error) {
	// O_DIRECTORY: anything else (a FIFO above all, whose open would wait
	// for a writer) is refused before it is opened.
	fd, err := openIn(unix.AT_FDCWD, p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOTDIR) {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "%s is not a directory", p)
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	names, err := f.Readdirnames(maxListEntries + 1)
	if err != nil && err != io.EOF {
		return nil, err
	}
	if len(names) > maxListEntries {
		return nil, errdefs.New(errdefs.ErrTooLarge, "%s has more than %d entries", p, maxListEntries)
	}
	sort.Strings(names)
	entries := make([]agentproto.Entry, 0, len(names))
	for _, n := range names {
		e, err := entryAt(fd, n, path.Join(p, n))
		if err != nil {
			continue // removed while listing
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// mkdirAll creates p and its missing parents one component at a time, each
// reached by openAt2 from the one before (so no magic link and no part of
// the agent's /proc is ever entered), and returns a descriptor (O_PATH) of
// p. Directories it creates belong to the session's user.
func (a *Agent) mkdirAll(p string) (int, error) { return mkdirAllFor(p, a.owner) }

// mkdirAllFor is mkdirAll giving what it creates to owner (nil: left to
// whoever creates it).
func mkdirAllFor(p string, owner *account) (int, error) {
	fd, err := openIn(unix.AT_FDCWD, "/", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." {
			continue
		}
		next, err := openIn(fd, c, unix.O_PATH|unix.O_DIRECTORY, 0)
		if errors.Is(err, unix.ENOENT) && c != ".." {
			err = unix.Mkdirat(fd, c, 0o755)
			if err == nil && owner != nil {
				// Best effort, as for a file's owner: the directory
				// exists either way, and a user who cannot write in it is
				// told so by the write.
				_ = unix.Fchownat(fd, c, int(owner.uid), int(owner.gid), unix.AT_SYMLINK_NOFOLLOW)
			}
			if err == nil || errors.Is(err, unix.EEXIST) {
				next, err = openIn(fd, c, unix.O_PATH|unix.O_DIRECTORY, 0)
			}
		}
		unix.Close(fd)
		if errors.Is(err, unix.ENOTDIR) {
			return -1, errdefs.New(errdefs.ErrConflict, "%s: a file is in the way", p)
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

func remove(p string, recursive bool) error {
	dir, base := splitPath(p)
	if base == "" {
		return errdefs.New(errdefs.ErrInvalidArgument, "refusing to remove /")
	}
	if base == "." || base == ".." {
		return errdefs.New(errdefs.ErrInvalidArgument, "%s: name the directory itself, not . or ..", p)
	}
	dfd, err := openIn(unix.AT_FDCWD, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if recursive {
		return removeAllAt(dfd, base, &st)
	}
	flags := 0
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		flags = unix.AT_REMOVEDIR
	}
	err = unix.Unlinkat(dfd, base, flags)
	if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
		return errdefs.New(errdefs.ErrConflict, "%s is a directory that is not empty; remove it with recursive=true", p)
	}
	return err
}

// removeAllAt removes name in dfd and, for a directory, everything below
// it, never following a symlink.
func removeAllAt(dfd int, name string, st *unix.Stat_t) error {
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Unlinkat(dfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
		return nil
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return err
	}
	for _, n := range names {
		var cst unix.Stat_t
		if err := unix.Fstatat(fd, n, &cst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // gone already
			}
			f.Close()
			return err
		}
		if err := removeAllAt(fd, n, &cst); err != nil {
			f.Close()
			return err
		}
	}
	f.Close()
	if err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// limitWriter fails once more than max bytes went through.
type limitWriter struct {
	w   io.Writer
	n   int64
	max int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	l.n += int64(len(p))
	if l.max > 0 && l.n > l.max {
		return 0, tooLarge(l.max)
	}
	return l.w.Write(p)
}

// agentOwnProc reports whether fd is a /proc file of the agent itself (PID 1
// or one of its threads). The file API runs as the agent, which may read its
// own /proc entries where sandboxed processes may not (it is not dumpable);
// serving them would reveal the agent's memory map and descriptors.
func agentOwnProc(fd int) bool {
	var sfs unix.Statfs_t
	if unix.Fstatfs(fd, &sfs) != nil || sfs.Type != unix.PROC_SUPER_MAGIC {
		return false
	}
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return true // on procfs and unexplained: refuse
	}
	rest, ok := strings.CutPrefix(target, "/proc/")
	if !ok {
		return false
	}
	pid, _, _ := strings.Cut(rest, "/")
	n, err := strconv.Atoi(pid)
	if err != nil {
		return pid == "self" || pid == "thread-self"
	}
	if n == 1 {
		return true
	}
	status, err := os.ReadFile("/proc/" + pid + "/status")
	return err != nil || strings.Contains(string(status), "\nTgid:\t1\n")
}

// openIn opens p relative to dirfd with openat2 and RESOLVE_NO_MAGICLINKS:
// ordinary symlinks resolve inside the sandbox as before, but a /proc magic
// link (/proc/<pid>/fd/N, root, cwd, exe, map_files) fails with ELOOP, so a
// descriptor the agent holds can never be a way out. Then the own-process
// guard: nothing of the agent's own /proc is served. O_CLOEXEC always.
func openIn(dirfd int, p string, flags int, mode uint32) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: unix.RESOLVE_NO_MAGICLINKS}
	var fd int
	var err error
	for try := 0; ; try++ {
		fd, err = unix.Openat2(dirfd, p, &how)
		if (err != unix.EINTR && err != unix.EAGAIN) || try == 100 {
			break
		}
	}
	if err == unix.ELOOP && isMagic(dirfd, p, flags) {
		return -1, errdefs.New(errdefs.ErrPermissionDenied, "%s leads through a /proc magic link (such as /proc/<pid>/fd/N, root or cwd), which the file API never follows", p)
	}
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	if agentOwnProc(fd) {
		unix.Close(fd)
		return -1, errdefs.New(errdefs.ErrPermissionDenied, "%s belongs to the sandbox's agent", p)
	}
	return fd, nil
}

// isMagic tells a magic link from a real symlink loop after openat2 said
// ELOOP: the same lookup with magic links allowed succeeds. It opens O_PATH
// only (no access to the file's data) and closes at once.
func isMagic(dirfd int, p string, flags int) bool {
	how := unix.OpenHow{Flags: uint64(flags&(unix.O_DIRECTORY|unix.O_NOFOLLOW) | unix.O_PATH | unix.O_CLOEXEC)}
	fd, err := unix.Openat2(dirfd, p, &how)
	if err != nil {
		return err != unix.ELOOP
	}
	unix.Close(fd)
	return true
}

// splitPath splits an absolute path into its directory and last name; the
// name is "" for "/".
func splitPath(p string) (dir, base string) {
	t := strings.TrimRight(p, "/")
	if t == "" {
		return "/", ""
	}
	i := strings.LastIndexByte(t, '/')
	dir, base = t[:i+1], t[i+1:]
	if dir == "" {
		dir = "."
	}
	return dir, base
}

// tarGet writes a tar of p (a directory's contents, or one file) as Data.
// Symlinks are stored as links, never followed; sockets, FIFOs and devices
// are skipped; directories on a kernel filesystem (/proc, /sys) are stored
// empty. Every file is opened relative to its directory's descriptor with
// O_NOFOLLOW, so nothing swapped in during the walk leads anywhere else.
func tarGet(ctx context.Context, s *agentproto.Stream, p string, max int64) (int64, error) {
	dir, base := splitPath(p)
	var dfd int
	var err error
	if base == "" || base == "." || base == ".." || strings.HasSuffix(p, "/") {
		dfd, err = openIn(unix.AT_FDCWD, p, unix.O_PATH|unix.O_DIRECTORY, 0)
		base = "."
	} else {
		dfd, err = openIn(unix.AT_FDCWD, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	}
	if err != nil {
		return 0, err
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, err
	}
	lw := &limitWriter{w: agentproto.NewDataWriter(ctx, s, agentproto.ChanData), max: max}
	tw := tar.NewWriter(lw)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		fd, err := openIn(dfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		if err != nil {
			return 0, err
		}
		if kernelFS(fd) {
			unix.Close(fd)
			return 0, errdefs.New(errdefs.ErrInvalidArgument, "%s is on a kernel filesystem and cannot be archived", p)
		}
		if err := tarDir(tw, fd, ""); err != nil {
			return lw.n, err
		}
	} else {
		name := base
		if name == "." {
			name = path.Base(p)
		}
		if err := tarEntry(tw, dfd, base, name, &st); err != nil {
			return lw.n, err
		}
	}
	if err := tw.Close(); err != nil {
		return lw.n, err
	}
	return lw.n, nil
}

// kernelFS reports whether fd is on procfs or sysfs, whose files describe
// the kernel and the agent rather than the session's data.
func kernelFS(fd int) bool {
	var sfs unix.Statfs_t
	return unix.Fstatfs(fd, &sfs) != nil || sfs.Type == unix.PROC_SUPER_MAGIC || sfs.Type == unix.SYSFS_MAGIC
}

// tarDir adds the entries of the open directory fd (which it closes) under
// prefix, in name order.
func tarDir(tw *tar.Writer, fd int, prefix string) error {
	f := os.NewFile(uintptr(fd), prefix)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // removed while archiving
		}
		if err := tarEntry(tw, fd, n, prefix+n, &st); err != nil {
			return err
		}
	}
	return nil
}

// tarEntry adds name of directory dfd, described by st, as entry.
func tarEntry(tw *tar.Writer, dfd int, name, entry string, st *unix.Stat_t) error {
	hdr := &tar.Header{
		Name:    entry,
		Mode:    int64(st.Mode & 0o7777),
		Uid:     int(st.Uid),
		Gid:     int(st.Gid),
		ModTime: time.Unix(st.Mtim.Unix()),
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), entry)
		defer f.Close()
		// The header takes what the descriptor says, not the earlier stat.
		if err := unix.Fstat(fd, st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil
		}
		_ = unix.SetNonblock(fd, false) // if it stays non-blocking, the read reports EAGAIN
		hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = io.CopyN(tw, f, hdr.Size)
		if err == io.EOF {
			// Truncated while archiving: pad with zeros, as tar(1) does.
			err = nil
		}
		return err
	case unix.S_IFDIR:
		fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Name = tar.TypeDir, entry+"/"
		if err := tw.WriteHeader(hdr); err != nil {
			unix.Close(fd)
			return err
		}
		if kernelFS(fd) {
			unix.Close(fd)
			return nil
		}
		return tarDir(tw, fd, entry+"/")
	case unix.S_IFLNK:
		link, err := readlinkAt(dfd, name)
		if err != nil {
			return nil
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, link
		return tw.WriteHeader(hdr)
	}
	return nil
}

// tarPut extracts the tar in the stream's data into directory p, which is
// created. Entries cannot leave p: os.Root refuses any path or symlink that
// would resolve outside it.
func (a *Agent) tarPut(ctx context.Context, s *agentproto.Stream, p string, max int64) (int64, error) {
	dfd, err := a.mkdirAll(p)
	if err != nil {
		return 0, err
	}
	// The root is opened through the agent's own descriptor of p, which
	// mkdirAll reached safely: its magic link is the agent's own doing.
	root, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(dfd))
	unix.Close(dfd)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	r := agentproto.NewDataReader(ctx, s)
	cr := &countReader{r: r, max: max}
	tr := tar.NewReader(cr)
	var dirs []*tar.Header
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if cr.err != nil {
				return cr.n, cr.err
			}
			return cr.n, errdefs.New(errdefs.ErrInvalidArgument, "read tar: %v", err)
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "/"))
		if name == "." || name == ".." || strings.HasPrefix(name, "../") {
			if name == "." {
				continue
			}
			return cr.n, errdefs.New(errdefs.ErrInvalidArgument, "tar entry %q leaves the target directory", hdr.Name)
		}
		if err := extractEntry(root, name, hdr, tr); err != nil {
			if isEscape(err) {
				return cr.n, errdefs.New(errdefs.ErrInvalidArgument, "tar entry %q leaves the target directory", hdr.Name)
			}
			if cr.err != nil {
				return cr.n, cr.err
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				// The upload ended cleanly, the tar inside it did not.
				return cr.n, errdefs.New(errdefs.ErrInvalidArgument, "tar entry %q is cut short: the archive ends inside it", hdr.Name)
			}
			return cr.n, fmt.Errorf("extract %s: %w", hdr.Name, err)
		}
		if hdr.Typeflag == tar.TypeDir {
			h := *hdr
			h.Name = name
			dirs = append(dirs, &h)
		}
	}
	// Directory times last, after their contents were written.
	for _, d := range dirs {
		_ = root.Chtimes(d.Name, d.ModTime, d.ModTime)
	}
	// Drain the rest (tar padding) so the sender is not left waiting.
	_, _ = io.Copy(io.Discard, cr) // cr.err, checked next, records a failed read
	if cr.err != nil {
		return cr.n, cr.err
	}
	return cr.n, nil
}

//lint:ignore ST1012 the name says what it marks; it never leaves the package.
var tarEscape = errors.New("path escapes")

// isEscape reports whether extracting failed because an entry would leave
// the target directory. os.Root has no exported error for that, so its text
// is the only signal; a miss only turns invalid_argument into internal.
func isEscape(err error) bool {
	return errors.Is(err, tarEscape) || strings.Contains(err.Error(), "path escapes")
}

func extractEntry(root *os.Root, name string, hdr *tar.Header, r io.Reader) error {
	mode := os.FileMode(hdr.Mode) & os.ModePerm
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := root.MkdirAll(name, 0o755); err != nil {
			return err
		}
		// Best effort for directories: one that exists already may belong
		// to someone else (the archive's "." over a shared directory), and
		// its contents are what the archive is for. A file is the
		// extract's own, so its mode must take.
		_ = root.Chmod(name, mode)
	case tar.TypeReg:
		_ = root.Remove(name) // a file in the way; the exclusive create below fails if it stays
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, r); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := root.Chmod(name, mode); err != nil {
			return err
		}
	case tar.TypeSymlink:
		_ = root.Remove(name) // as for regular files: Symlink fails if it stays
		if err := root.Symlink(hdr.Linkname, name); err != nil {
			return err
		}
	case tar.TypeLink:
		target := path.Clean(strings.TrimPrefix(hdr.Linkname, "/"))
		if target == ".." || strings.HasPrefix(target, "../") {
			return tarEscape
		}
		_ = root.Remove(name) // as for regular files: Link fails if it stays
		if err := root.Link(target, name); err != nil {
			return err
		}
	default:
		return nil // devices, FIFOs and the like are not extracted
	}
	// Owners and times are kept where the agent may set them (a session
	// user who is not root may not give files away), as tar does for a
	// user who is not root.
	_ = root.Lchown(name, hdr.Uid, hdr.Gid)
	if hdr.Typeflag != tar.TypeSymlink {
		_ = root.Chtimes(name, time.Now(), hdr.ModTime)
	}
	return nil
}

// countReader counts bytes and fails past max.
type countReader struct {
	r   io.Reader
	n   int64
	max int64
	err error
}

func (c *countReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.max > 0 && c.n > c.max {
		c.err = tooLarge(c.max)
		return 0, c.err
	}
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}
