package agent

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
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
		rep.Size, err = writeFile(ctx, s, p, req.Mode, req.MaxBytes)
		if err == nil {
			a.chown(p)
		}
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
		err = mkdirAll(p)
		if err == nil {
			a.chown(p)
		}
	case agentproto.OpRemove:
		err = remove(p, req.Recursive)
	case agentproto.OpTarGet:
		rep.Size, err = tarGet(ctx, s, p, req.MaxBytes)
	case agentproto.OpTarPut:
		rep.Size, err = tarPut(ctx, s, p, req.MaxBytes)
	}
	if err != nil {
		s.Fail(fileError(req.Path, err))
		return
	}
	s.Reply(rep, nil)
}

// chown gives a file the agent wrote to the session's user, when that user
// is not root: what the API puts in a session must be the user's to change.
func (a *Agent) chown(p string) {
	if a.owner != nil {
		os.Lchown(p, int(a.owner.uid), int(a.owner.gid))
	}
}

// fileError classifies a file error by its errno.
func fileError(p string, err error) error {
	if errdefs.ClassOf(err) != errdefs.ErrInternal {
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
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return 0, err
	}
	if agentOwnProc(fd) {
		unix.Close(fd)
		return 0, errdefs.New(errdefs.ErrPermissionDenied, "%s belongs to the sandbox's agent", p)
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
	unix.SetNonblock(fd, false)
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
// old file untouched.
func writeFile(ctx context.Context, s *agentproto.Stream, p string, mode uint32, max int64) (int64, error) {
	if strings.HasSuffix(p, "/") {
		return 0, errdefs.New(errdefs.ErrInvalidArgument, "%s is a directory", p)
	}
	dir := path.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	perm := os.FileMode(0o644)
	if fi, err := os.Lstat(p); err == nil {
		if fi.IsDir() {
			return 0, errdefs.New(errdefs.ErrInvalidArgument, "%s is a directory", p)
		}
		if fi.Mode().IsRegular() {
			perm = fi.Mode().Perm()
		}
	}
	if mode != 0 {
		perm = os.FileMode(mode) & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
	}
	tmp, err := os.CreateTemp(dir, ".warren-upload-*")
	if err != nil {
		return 0, err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
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
	if err := tmp.Chmod(perm); err != nil {
		return n, err
	}
	if err := tmp.Close(); err != nil {
		return n, err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return n, err
	}
	ok = true
	return n, nil
}

func entryOf(p string, fi fs.FileInfo) agentproto.Entry {
	e := agentproto.Entry{
		Name:  fi.Name(),
		Path:  p,
		Size:  fi.Size(),
		Mode:  uint32(fi.Mode().Perm()),
		MTime: fi.ModTime().UTC(),
	}
	if fi.Mode()&os.ModeSetuid != 0 {
		e.Mode |= 0o4000
	}
	if fi.Mode()&os.ModeSetgid != 0 {
		e.Mode |= 0o2000
	}
	if fi.Mode()&os.ModeSticky != 0 {
		e.Mode |= 0o1000
	}
	switch {
	case fi.Mode().IsRegular():
		e.Type = "file"
	case fi.IsDir():
		e.Type = "dir"
	case fi.Mode()&os.ModeSymlink != 0:
		e.Type = "symlink"
		e.Target, _ = os.Readlink(p)
	default:
		e.Type = "other"
	}
	if p == "/" {
		e.Name = "/"
	}
	return e
}

func stat(p string) (agentproto.Entry, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return agentproto.Entry{}, err
	}
	return entryOf(p, fi), nil
}

// maxListEntries bounds one listing.
const maxListEntries = 100000

func list(p string) ([]agentproto.Entry, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "%s is not a directory", p)
	}
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
		cp := path.Join(p, n)
		fi, err := os.Lstat(cp)
		if err != nil {
			continue // removed while listing
		}
		entries = append(entries, entryOf(cp, fi))
	}
	return entries, nil
}

func mkdirAll(p string) error {
	if err := os.MkdirAll(p, 0o755); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && errors.Is(err, unix.ENOTDIR) {
			return errdefs.New(errdefs.ErrConflict, "%s: a file is in the way", p)
		}
		return err
	}
	return nil
}

func remove(p string, recursive bool) error {
	if path.Clean(p) == "/" {
		return errdefs.New(errdefs.ErrInvalidArgument, "refusing to remove /")
	}
	if _, err := os.Lstat(p); err != nil {
		return err
	}
	if recursive {
		return os.RemoveAll(p)
	}
	err := os.Remove(p)
	if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
		return errdefs.New(errdefs.ErrConflict, "%s is a directory that is not empty; remove it with recursive=true", p)
	}
	return err
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

// tarGet writes a tar of p (a directory's contents, or one file) as Data.
// Symlinks are stored as links, never followed; sockets, FIFOs and devices
// are skipped.
func tarGet(ctx context.Context, s *agentproto.Stream, p string, max int64) (int64, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return 0, err
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(p, &sfs); err == nil && (sfs.Type == unix.PROC_SUPER_MAGIC || sfs.Type == unix.SYSFS_MAGIC) {
		return 0, errdefs.New(errdefs.ErrInvalidArgument, "%s is on a kernel filesystem and cannot be archived", p)
	}
	lw := &limitWriter{w: agentproto.NewDataWriter(ctx, s, agentproto.ChanData), max: max}
	tw := tar.NewWriter(lw)
	add := func(name, full string, fi fs.FileInfo) error {
		if !fi.Mode().IsRegular() && !fi.IsDir() && fi.Mode()&os.ModeSymlink == 0 {
			return nil
		}
		link := ""
		if fi.Mode()&os.ModeSymlink != 0 {
			link, _ = os.Readlink(full)
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = name
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(full)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyN(tw, f, hdr.Size)
		return err
	}
	if !fi.IsDir() {
		if err := add(fi.Name(), p, fi); err != nil {
			return lw.n, err
		}
	} else {
		err = filepath.WalkDir(p, func(full string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if full == p {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(p, full)
			return add(filepath.ToSlash(rel), full, fi)
		})
		if err != nil {
			return lw.n, err
		}
	}
	if err := tw.Close(); err != nil {
		return lw.n, err
	}
	return lw.n, nil
}

// tarPut extracts the tar in the stream's data into directory p, which is
// created. Entries cannot leave p: os.Root refuses any path or symlink that
// would resolve outside it.
func tarPut(ctx context.Context, s *agentproto.Stream, p string, max int64) (int64, error) {
	if err := os.MkdirAll(p, 0o755); err != nil {
		return 0, err
	}
	root, err := os.OpenRoot(p)
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
		root.Chtimes(d.Name, d.ModTime, d.ModTime)
	}
	// Drain the rest (tar padding) so the sender is not left waiting.
	io.Copy(io.Discard, cr)
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
		root.Chmod(name, mode)
	case tar.TypeReg:
		root.Remove(name)
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
		root.Chmod(name, mode)
	case tar.TypeSymlink:
		root.Remove(name)
		if err := root.Symlink(hdr.Linkname, name); err != nil {
			return err
		}
	case tar.TypeLink:
		target := path.Clean(strings.TrimPrefix(hdr.Linkname, "/"))
		if target == ".." || strings.HasPrefix(target, "../") {
			return tarEscape
		}
		root.Remove(name)
		if err := root.Link(target, name); err != nil {
			return err
		}
	default:
		return nil // devices, FIFOs and the like are not extracted
	}
	root.Lchown(name, hdr.Uid, hdr.Gid)
	if hdr.Typeflag != tar.TypeSymlink {
		root.Chtimes(name, time.Now(), hdr.ModTime)
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
