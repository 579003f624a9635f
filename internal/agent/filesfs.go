package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/errdefs"
)

// The filesystem calls of E2B's envd (agentproto.OpFS). They reach paths
// the way the file API does (openIn: openat2 with RESOLVE_NO_MAGICLINKS and
// the own-process guard; every later step on a descriptor) and run as the
// user the call names: on a thread of their own whose filesystem ids and
// groups are that user's, so the kernel's permission checks are theirs.

// fsCall serves one OpFS call.
func (a *Agent) fsCall(ctx context.Context, s *agentproto.Stream, req *agentproto.FSRequest) {
	acct, err := a.fsAccount(req)
	if err != nil {
		s.Fail(err)
		return
	}
	var rep agentproto.FSReply
	// Giving a file away is the agent's own right, done before it acts as
	// the user.
	if req.Op == agentproto.FSMetadata && req.Own && acct != nil {
		if err := a.fsOwn(req.Path, acct); err != nil {
			s.Fail(fsError(req.Path, err))
			return
		}
	}
	err = asAccount(acct, func() error { return a.fsDo(req, &rep) })
	if err != nil {
		s.Fail(err)
		return
	}
	if len(rep.Entries) > 0 {
		// A listing too large for one frame goes as Data.
		if js, jerr := json.Marshal(rep.Entries); jerr == nil && len(js) > agentproto.MaxTail {
			if err := s.WriteData(ctx, agentproto.ChanData, js); err != nil {
				s.Fail(err)
				return
			}
			rep.Entries, rep.EntriesStreamed = nil, true
		}
	}
	s.Reply(rep, nil)
}

// fsAccount is the account a call acts as: the one it names, else the
// session's user; nil is the agent itself (root of the sandbox, or the one
// host user of a sandbox without a user namespace).
func (a *Agent) fsAccount(req *agentproto.FSRequest) (*account, error) {
	if req.Op == agentproto.FSHome {
		return nil, nil
	}
	if req.User == "" {
		if a.spec.RunAs != nil || a.owner == nil || a.owner.uid == 0 {
			return nil, nil
		}
		return a.owner, nil
	}
	acct, err := a.processAccount(req.User)
	if err != nil {
		if errdefs.Is(err, errdefs.ErrInvalidArgument) && a.spec.RunAs == nil {
			return nil, errdefs.New(errdefs.ErrUnauthenticated, "error looking up user '%s': unknown user", req.User)
		}
		return nil, err
	}
	if acct.uid == 0 && acct.gid == 0 {
		return nil, nil
	}
	return acct, nil
}

// asAccount runs f with acct's filesystem ids and groups, on a thread
// locked for it and never unlocked: the thread ends with f, so no other
// goroutine ever runs with those ids, and nothing has to be restored.
// Changing the filesystem uid from 0 drops the capabilities that bypass
// permission checks (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_CHOWN ...) from the
// thread, as for a process of that user.
func asAccount(acct *account, f func() error) error {
	if acct == nil {
		return f()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// These raw calls act on this thread only (the syscall package's
		// Setuid and friends would change every thread).
		gids := make([]int, len(acct.groups))
		for i, g := range acct.groups {
			gids[i] = int(g)
		}
		if err := unix.Setgroups(gids); err != nil {
			done <- errdefs.New(errdefs.ErrInternal, "act as %s: setgroups: %v", acct, err)
			return
		}
		_, _ = unix.SetfsgidRetGid(int(acct.gid))
		_, _ = unix.SetfsuidRetUid(int(acct.uid))
		// setfs[ug]id report no error; reading them back says whether
		// they took.
		gid, _ := unix.SetfsgidRetGid(-1)
		uid, _ := unix.SetfsuidRetUid(-1)
		if uid != int(acct.uid) || gid != int(acct.gid) {
			done <- errdefs.New(errdefs.ErrInternal, "act as %s: the filesystem ids did not change", acct)
			return
		}
		done <- f()
	}()
	return <-done
}

// fsOwn gives p (not followed) to acct.
func (a *Agent) fsOwn(p string, acct *account) error {
	dfd, base, err := fsParent(p)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	return unix.Fchownat(dfd, base, int(acct.uid), int(acct.gid), unix.AT_SYMLINK_NOFOLLOW)
}

// fsParent opens p's directory and returns it with p's last name.
func fsParent(p string) (int, string, error) {
	dir, base := splitPath(p)
	if base == "" || base == "." || base == ".." || strings.HasSuffix(p, "/") {
		return -1, "", errdefs.New(errdefs.ErrInvalidArgument, "%s: name the file itself, not / . or ..", p)
	}
	dfd, err := openIn(unix.AT_FDCWD, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	return dfd, base, err
}

func (a *Agent) fsDo(req *agentproto.FSRequest, rep *agentproto.FSReply) error {
	if req.Op == agentproto.FSHome {
		acct, err := a.fsUser(req.User)
		if err != nil {
			return err
		}
		rep.Home = acct.home
		return nil
	}
	p, err := fsPath(req.Path)
	if err != nil {
		return err
	}
	switch req.Op {
	case agentproto.FSStat:
		e, err := fsStat(p)
		if err != nil {
			return fsError(p, err)
		}
		rep.Entry = e
	case agentproto.FSList:
		rep.Entries, err = fsList(p, req.Depth)
		if err != nil {
			return fsError(p, err)
		}
		if rep.Entries == nil {
			rep.Entries = []agentproto.FSEntry{}
		}
	case agentproto.FSMkdir:
		e, err := fsStat(p)
		if err == nil && e.Type == "symlink" {
			// A link to a directory is a directory that exists, as
			// mkdir -p has it.
			if fd, oerr := openIn(unix.AT_FDCWD, p, unix.O_PATH|unix.O_DIRECTORY, 0); oerr == nil {
				unix.Close(fd)
				e.Type = "dir"
			}
		}
		switch {
		case err == nil && e.Type == "dir":
			rep.Entry, rep.Existed = e, true
			return nil
		case err == nil:
			return errdefs.New(errdefs.ErrInvalidArgument, "path '%s' already exists and is not a directory", p)
		}
		// Created as the user the call acts as, so theirs.
		fd, err := mkdirAllFor(p, nil)
		if err != nil {
			return fsError(p, err)
		}
		unix.Close(fd)
		if rep.Entry, err = fsStat(p); err != nil {
			return fsError(p, err)
		}
	case agentproto.FSMove:
		dst, err := fsPath(req.Dest)
		if err != nil {
			return err
		}
		if err := fsMove(p, dst); err != nil {
			return err
		}
		if rep.Entry, err = fsStat(dst); err != nil {
			return fsError(dst, err)
		}
	case agentproto.FSRemove:
		if err := remove(p, true); err != nil && !errors.Is(err, unix.ENOENT) {
			return fsError(p, err)
		}
	case agentproto.FSMetadata:
		if err := fsSetMetadata(p, req.Metadata); err != nil {
			return err
		}
		if rep.Entry, err = fsStat(p); err != nil {
			return fsError(p, err)
		}
	case agentproto.FSReadable:
		fd, err := openIn(unix.AT_FDCWD, p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
		if err != nil {
			return fsError(p, err)
		}
		unix.Close(fd)
	default:
		return errdefs.New(errdefs.ErrInvalidArgument, "unknown filesystem operation %q", req.Op)
	}
	return nil
}

// fsUser resolves a user for its home: root too.
func (a *Agent) fsUser(user string) (*account, error) {
	acct, err := lookupUser(user)
	if err != nil || (acct != nil && acct.home == "/" && strconv.Itoa(int(acct.uid)) == acct.name) {
		// A bare number is no user name the image knows.
		return nil, errdefs.New(errdefs.ErrUnauthenticated, "error looking up user '%s': unknown user", user)
	}
	if acct == nil {
		return &account{name: "root", home: "/root"}, nil
	}
	return acct, nil
}

// fsPath checks an absolute path and cleans it (envd resolves relative
// paths against the user's home before asking).
func fsPath(p string) (string, error) {
	if p == "" {
		return "", errdefs.New(errdefs.ErrInvalidArgument, "path is required")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errdefs.New(errdefs.ErrInvalidArgument, "path contains a NUL byte")
	}
	if !path.IsAbs(p) {
		return "", errdefs.New(errdefs.ErrInvalidArgument, "path %q is not absolute", p)
	}
	return path.Clean(p), nil
}

// fsError classifies err as the file API does, with E2B's wording for a
// missing path.
func fsError(p string, err error) error {
	if errors.Is(err, unix.ENOENT) && !errdefs.Explicit(err) {
		return errdefs.New(errdefs.ErrNotFound, "path '%s' does not exist", p)
	}
	return fileError(p, err)
}

// fsStat describes p, not followed.
func fsStat(p string) (*agentproto.FSEntry, error) {
	if p == "/" {
		fd, err := openIn(unix.AT_FDCWD, "/", unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return nil, err
		}
		defer unix.Close(fd)
		e, err := fsEntryAt(fd, ".", "/")
		if e != nil {
			e.Name = "/"
		}
		return e, err
	}
	dfd, base, err := fsParent(p)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	return fsEntryAt(dfd, base, p)
}

// fsEntryAt describes name in dfd, not followed, with its owners' names,
// a symlink's resolved target and the user.e2b.* metadata.
func fsEntryAt(dfd int, name, p string) (*agentproto.FSEntry, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, err
	}
	return fsEntry(dfd, name, p, &st), nil
}

func fsEntry(dfd int, name, p string, st *unix.Stat_t) *agentproto.FSEntry {
	base, _ := entryFromStat(dfd, name, p, st)
	e := &agentproto.FSEntry{Entry: base, UID: st.Uid, GID: st.Gid}
	e.Owner, e.Group = idNames.names(st.Uid, st.Gid)
	switch e.Type {
	case "symlink":
		e.Resolved = resolveLink(dfd, name, p, e.Target)
	case "file", "dir":
		e.Metadata = readMetadata(dfd, name, st)
	}
	return e
}

// resolveLink is the absolute path a symlink leads to, every link on the
// way followed (as realpath does): opened by openIn, so a /proc magic link
// or the agent's own /proc is never entered, and named by the kernel. A
// link that does not resolve (dangling, or refused) gets its target made
// absolute.
func resolveLink(dfd int, name, p, target string) string {
	fd, err := openIn(dfd, name, unix.O_PATH, 0)
	if err == nil {
		defer unix.Close(fd)
		if r, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil && path.IsAbs(r) {
			return r
		}
	}
	if path.IsAbs(target) {
		return path.Clean(target)
	}
	return path.Join(path.Dir(p), target)
}

// readMetadata reads the user.e2b.* attributes of a file or directory, on
// a descriptor (a path could be swapped for a link meanwhile): at most
// MaxMetadata of them, values past MaxMetadataValue left out. One the
// caller may not open has none to show.
func readMetadata(dfd int, name string, st *unix.Stat_t) map[string]string {
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	var fst unix.Stat_t
	if unix.Fstat(fd, &fst) != nil || fst.Ino != st.Ino || fst.Dev != st.Dev {
		return nil
	}
	buf := make([]byte, 64<<10)
	n, err := unix.Flistxattr(fd, buf)
	if err != nil || n == 0 {
		return nil
	}
	var out map[string]string
	val := make([]byte, agentproto.MaxMetadataValue)
	for _, attr := range strings.Split(string(buf[:n]), "\x00") {
		key, ok := strings.CutPrefix(attr, agentproto.MetadataPrefix)
		if !ok || key == "" {
			continue
		}
		k, err := unix.Fgetxattr(fd, attr, val)
		if err != nil {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[key] = strings.ToValidUTF8(string(val[:k]), "\uFFFD")
		if len(out) == agentproto.MaxMetadata {
			break
		}
	}
	return out
}

// fsSetMetadata replaces p's user.e2b.* attributes by md.
func fsSetMetadata(p string, md map[string]string) error {
	if len(md) > agentproto.MaxMetadata {
		return errdefs.New(errdefs.ErrInvalidArgument, "at most %d metadata entries", agentproto.MaxMetadata)
	}
	for k, v := range md {
		if k == "" || len(k) > agentproto.MaxMetadataKey || strings.IndexByte(k, 0) >= 0 || !utf8.ValidString(k) {
			return errdefs.New(errdefs.ErrInvalidArgument, "invalid metadata key %q", k)
		}
		if len(v) > agentproto.MaxMetadataValue {
			return errdefs.New(errdefs.ErrInvalidArgument, "metadata %q is larger than %d bytes", k, agentproto.MaxMetadataValue)
		}
	}
	dfd, base, err := fsParent(p)
	if err != nil {
		return fsError(p, err)
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return errdefs.New(errdefs.ErrInvalidArgument, "%s is a symlink: it has no metadata", p)
	}
	if err != nil {
		return fsError(p, err)
	}
	defer unix.Close(fd)
	xerr := func(err error) error {
		switch {
		case errors.Is(err, unix.ENOTSUP):
			return errdefs.New(errdefs.ErrConflict, "the filesystem of '%s' has no user extended attributes", p)
		case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.E2BIG), errors.Is(err, unix.ERANGE):
			return errdefs.New(errdefs.ErrInvalidArgument, "metadata too large for '%s'", p)
		}
		return fsError(p, err)
	}
	buf := make([]byte, 64<<10)
	n, err := unix.Flistxattr(fd, buf)
	if err != nil && !errors.Is(err, unix.ENOTSUP) {
		return xerr(err)
	}
	for _, attr := range strings.Split(string(buf[:max(n, 0)]), "\x00") {
		if key, ok := strings.CutPrefix(attr, agentproto.MetadataPrefix); ok {
			if _, keep := md[key]; !keep {
				if err := unix.Fremovexattr(fd, attr); err != nil && !errors.Is(err, unix.ENODATA) {
					return xerr(err)
				}
			}
		}
	}
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := unix.Fsetxattr(fd, agentproto.MetadataPrefix+k, []byte(md[k]), 0); err != nil {
			return xerr(err)
		}
	}
	return nil
}

// maxFSEntries bounds one listing, all levels together.
const maxFSEntries = maxListEntries

// fsList lists p's tree depth levels deep (1: its own entries), sorted by
// name within each directory, each subdirectory right after its entry.
// Links are described, never followed; p itself may be one.
func fsList(p string, depth int) ([]agentproto.FSEntry, error) {
	depth = min(max(depth, 1), agentproto.MaxFSDepth)
	fd, err := openIn(unix.AT_FDCWD, p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOTDIR) {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "path '%s' is not a directory", p)
	}
	if err != nil {
		return nil, err
	}
	var out []agentproto.FSEntry
	err = fsWalk(fd, p, 1, depth, &out)
	return out, err
}

// fsWalk lists the directory fd (and closes it); a subdirectory that
// cannot be read is left out, as it vanished or is not the user's.
func fsWalk(fd int, dir string, level, depth int, out *[]agentproto.FSEntry) error {
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	names, err := f.Readdirnames(maxFSEntries + 1)
	if err != nil && err != io.EOF {
		return err
	}
	if len(*out)+len(names) > maxFSEntries {
		return errdefs.New(errdefs.ErrTooLarge, "%s has more than %d entries", dir, maxFSEntries)
	}
	sort.Strings(names)
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue // removed while listing
		}
		c := path.Join(dir, n)
		*out = append(*out, *fsEntry(fd, n, c, &st))
		if level < depth && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			cfd, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			if err := fsWalk(cfd, c, level+1, depth, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// fsMove renames src to dst, creating dst's missing parents; both are
// reached by openIn.
func fsMove(src, dst string) error {
	sfd, sbase, err := fsParent(src)
	if err != nil {
		return fsError(src, err)
	}
	defer unix.Close(sfd)
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, sbase, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fsError(src, err)
	}
	ddir, dbase := splitPath(dst)
	if dbase == "" || dbase == "." || dbase == ".." {
		return errdefs.New(errdefs.ErrInvalidArgument, "%s: name the destination itself, not / . or ..", dst)
	}
	dfd, err := mkdirAllFor(ddir, nil)
	if err != nil {
		return fsError(dst, err)
	}
	defer unix.Close(dfd)
	if err := unix.Renameat(sfd, sbase, dfd, dbase); err != nil {
		return fsError(dst, err)
	}
	return nil
}

// idNames maps the image's uids and gids to names, from its /etc/passwd
// and /etc/group; read again when either file changes.
var idNames = &nameCache{}

type nameCache struct {
	mu sync.Mutex
	// +checklocks:mu
	stamp [2]fileStamp
	// +checklocks:mu
	users map[uint32]string
	// +checklocks:mu
	groups map[uint32]string
}

type fileStamp struct {
	ino, size int64
	mtime     unix.Timespec
}

func stampOf(p string) fileStamp {
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil {
		return fileStamp{}
	}
	return fileStamp{ino: int64(st.Ino), size: st.Size, mtime: st.Mtim}
}

// maxNames bounds the names taken from one file.
const maxNames = 100000

func (c *nameCache) names(uid, gid uint32) (string, string) {
	stamp := [2]fileStamp{stampOf("/etc/passwd"), stampOf("/etc/group")}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.users == nil || stamp != c.stamp {
		c.stamp = stamp
		c.users, c.groups = readIDs("/etc/passwd"), readIDs("/etc/group")
	}
	u, ok := c.users[uid]
	if !ok {
		u = strconv.FormatUint(uint64(uid), 10)
	}
	g, ok := c.groups[gid]
	if !ok {
		g = strconv.FormatUint(uint64(gid), 10)
	}
	return u, g
}

// readIDs maps the ids of a passwd or group file to their first name.
func readIDs(p string) map[uint32]string {
	m := map[uint32]string{}
	_ = scanColon(p, func(f []string) bool {
		if len(f) < 3 {
			return false
		}
		if id, err := strconv.ParseUint(f[2], 10, 32); err == nil {
			if _, dup := m[uint32(id)]; !dup {
				m[uint32(id)] = f[0]
			}
		}
		return len(m) >= maxNames
	})
	return m
}
