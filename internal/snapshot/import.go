package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// ImportLimits bound what one archive may unpack to.
type ImportLimits struct {
	// MaxBytes caps the regular-file data (0: 8 GiB).
	MaxBytes int64
	// MaxEntries caps the number of entries (0: 1<<20).
	MaxEntries int
}

const (
	maxManifest   = 64 << 10
	maxOverlays   = 16
	maxPathLen    = 4096
	maxNameLen    = 255
	maxZstdWindow = 128 << 20
)

func bad(format string, args ...any) error {
	return errdefs.New(errdefs.ErrInvalidArgument, "snapshot archive: "+format, args...)
}

// Import unpacks a snapshot archive (as Export writes it) from r into the
// new directory dst (whose parent must exist) as a Layer and returns its
// manifest. Nothing is created outside dst: entry paths must be relative
// and free of "..", their parents must be directories of the archive
// (never links), hard links must name a file unpacked before, device nodes
// other than whiteouts are refused, owners outside the canonical ids become
// nobody, and only the xattrs a layer keeps are set. dst is removed on
// failure.
func Import(ctx context.Context, r io.Reader, dst string, lim ImportLimits) (m *Manifest, st Stats, err error) {
	if lim.MaxBytes == 0 {
		lim.MaxBytes = 8 << 30
	}
	if lim.MaxEntries == 0 {
		lim.MaxEntries = 1 << 20
	}
	zr, err := zstd.NewReader(r, zstd.WithDecoderMaxWindow(maxZstdWindow), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, st, err
	}
	defer zr.Close()
	if err := unix.Mkdir(dst, 0o700); err != nil {
		return nil, st, fmt.Errorf("create layer %s: %w", dst, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dst)
		}
	}()
	root, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, st, err
	}
	defer unix.Close(root)
	u := &unpacker{ctx: ctx, root: root, lim: lim, tr: tar.NewReader(zr)}
	if err := u.run(); err != nil {
		return nil, u.st, err
	}
	return u.m, u.st, nil
}

type unpacker struct {
	ctx     context.Context
	root    int
	lim     ImportLimits
	tr      *tar.Reader
	m       *Manifest
	st      Stats
	entries int
	dirs    []dirTime
}

type dirTime struct {
	rel   string
	mtime time.Time
}

func (u *unpacker) run() error {
	hdr, err := u.tr.Next()
	if err != nil {
		return bad("no manifest: %v", err)
	}
	if hdr.Name != ManifestName || hdr.Typeflag != tar.TypeReg || hdr.Size > maxManifest {
		return bad("the first entry must be %s", ManifestName)
	}
	var m Manifest
	if err := json.NewDecoder(io.LimitReader(u.tr, maxManifest)).Decode(&m); err != nil {
		return bad("manifest: %v", err)
	}
	if m.Version != ManifestVersion {
		return bad("manifest version %d, want %d", m.Version, ManifestVersion)
	}
	if len(m.Overlays) > maxOverlays {
		return bad("%d overlays, at most %d", len(m.Overlays), maxOverlays)
	}
	for i, t := range m.Overlays {
		if !path.IsAbs(t) || path.Clean(t) != t || t == "/" || strings.ContainsAny(t, "\x00") || slices.Contains(m.Overlays[:i], t) {
			return bad("overlay target %q is not a clean absolute path", t)
		}
	}
	u.m = &m
	for _, d := range u.treeNames() {
		if err := unix.Mkdirat(u.root, d, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
	}
	for {
		if err := u.ctx.Err(); err != nil {
			return err
		}
		hdr, err := u.tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return bad("%v", err)
		}
		if u.entries++; u.entries > u.lim.MaxEntries {
			return errdefs.New(errdefs.ErrTooLarge, "snapshot archive: more than %d entries", u.lim.MaxEntries)
		}
		if err := u.entry(hdr); err != nil {
			return err
		}
	}
	// Directory times last: every entry created in them changed them.
	for i := len(u.dirs) - 1; i >= 0; i-- {
		d := u.dirs[i]
		ts := []unix.Timespec{unix.NsecToTimespec(d.mtime.UnixNano()), unix.NsecToTimespec(d.mtime.UnixNano())}
		if err := unix.UtimesNanoAt(u.root, d.rel, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return nil
}

// treeNames are the top-level trees of the layer: root, ov, ov/0, ov/1...
func (u *unpacker) treeNames() []string {
	out := []string{"root"}
	if len(u.m.Overlays) > 0 {
		out = append(out, "ov")
	}
	for i := range u.m.Overlays {
		out = append(out, "ov/"+strconv.Itoa(i))
	}
	return out
}

// clean checks an entry's name and returns it relative to the layer, and
// whether it is the top of a tree.
func (u *unpacker) clean(name string) (rel string, top bool, err error) {
	if len(name) > maxPathLen || strings.IndexByte(name, 0) >= 0 || strings.HasPrefix(name, "/") {
		return "", false, bad("entry %q: not a relative path", name)
	}
	parts := strings.Split(strings.TrimSuffix(name, "/"), "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." || len(p) > maxNameLen {
			return "", false, bad("entry %q: bad path component %q", name, p)
		}
	}
	if len(parts) > maxDepth {
		return "", false, bad("entry %q: nested too deep", name)
	}
	rel = strings.Join(parts, "/")
	for _, t := range u.treeNames() {
		if t == "ov" {
			continue
		}
		if rel == t {
			return rel, true, nil
		}
		if strings.HasPrefix(rel, t+"/") {
			return rel, false, nil
		}
	}
	return "", false, bad("entry %q is outside root/ and ov/<i>/", name)
}

// parent opens the directory that holds rel, never through a link.
func (u *unpacker) parent(rel string) (int, error) {
	dir := path.Dir(rel)
	fd, err := unix.Openat2(u.root, dir, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return -1, bad("entry %q: its directory %q is not a directory of the archive (%v)", rel, dir, err)
	}
	return fd, nil
}

func canonical(id int) int {
	if id < 0 || id >= IDSpace {
		return nobody
	}
	return id
}

// xattrsOf returns the xattrs of hdr that a layer keeps.
func xattrsOf(hdr *tar.Header, dir bool) (map[string][]byte, error) {
	var out map[string][]byte
	total := 0
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, paxXattr)
		if !ok {
			continue
		}
		keep, acl := keepXattr(name)
		if !keep || (name == OpaqueXattr && !dir) {
			continue
		}
		if total += len(name) + len(v); total > maxXattr {
			return nil, bad("entry %q: xattrs exceed %d bytes", hdr.Name, maxXattr)
		}
		b := []byte(v)
		if acl {
			var err error
			if b, err = rebaseACL(b, func(u uint32) int { return canonical(int(u)) }); err != nil {
				return nil, bad("entry %q: %v", hdr.Name, err)
			}
		}
		if out == nil {
			out = map[string][]byte{}
		}
		out[name] = b
	}
	return out, nil
}

func (u *unpacker) entry(hdr *tar.Header) error {
	rel, top, err := u.clean(hdr.Name)
	if err != nil {
		return err
	}
	if top && hdr.Typeflag != tar.TypeDir {
		return bad("entry %q must be a directory", hdr.Name)
	}
	uid, gid := canonical(hdr.Uid), canonical(hdr.Gid)
	mode := uint32(hdr.Mode & 0o7777)
	pfd, err := u.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	base := path.Base(rel)
	switch hdr.Typeflag {
	case tar.TypeDir:
		xs, err := xattrsOf(hdr, true)
		if err != nil {
			return err
		}
		if err := unix.Mkdirat(pfd, base, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("create %s: %w", rel, err)
		}
		fd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return bad("entry %q: a file of that name is no directory (%v)", hdr.Name, err)
		}
		defer unix.Close(fd)
		if err := setXattrs(fd, xs); err != nil {
			return err
		}
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return err
		}
		if err := unix.Fchmod(fd, mode); err != nil {
			return err
		}
		u.st.Dirs++
		u.dirs = append(u.dirs, dirTime{rel, hdr.ModTime})
		return nil
	case tar.TypeReg, tar.TypeRegA:
		xs, err := xattrsOf(hdr, false)
		if err != nil {
			return err
		}
		if hdr.Size < 0 || u.st.Bytes+hdr.Size > u.lim.MaxBytes {
			return errdefs.New(errdefs.ErrTooLarge, "snapshot archive: more than %d bytes of file data", u.lim.MaxBytes)
		}
		fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return bad("entry %q: %v", hdr.Name, err)
		}
		defer unix.Close(fd)
		if err := writeSparse(fd, u.tr, hdr.Size); err != nil {
			return fmt.Errorf("write %s: %w", rel, err)
		}
		u.st.Bytes += hdr.Size
		u.st.Files++
		if err := setXattrs(fd, xs); err != nil {
			return err
		}
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return err
		}
		if err := unix.Fchmod(fd, layerMode(mode, false)); err != nil {
			return err
		}
		return unix.Futimes(fd, []unix.Timeval{unix.NsecToTimeval(hdr.ModTime.UnixNano()), unix.NsecToTimeval(hdr.ModTime.UnixNano())})
	case tar.TypeSymlink:
		if hdr.Linkname == "" || len(hdr.Linkname) > maxPathLen || strings.IndexByte(hdr.Linkname, 0) >= 0 {
			return bad("entry %q: bad link target", hdr.Name)
		}
		if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
			return bad("entry %q: %v", hdr.Name, err)
		}
		u.st.Files++
		return u.finishPath(pfd, base, uid, gid, hdr.ModTime)
	case tar.TypeLink:
		target, ttop, err := u.clean(hdr.Linkname)
		if err != nil || ttop {
			return bad("entry %q: hard link to %q outside the archive", hdr.Name, hdr.Linkname)
		}
		tfd, err := u.parent(target)
		if err != nil {
			return err
		}
		defer unix.Close(tfd)
		var tst unix.Stat_t
		if err := unix.Fstatat(tfd, path.Base(target), &tst, unix.AT_SYMLINK_NOFOLLOW); err != nil || tst.Mode&unix.S_IFMT != unix.S_IFREG {
			return bad("entry %q: hard link to %q, which is no file unpacked before it", hdr.Name, hdr.Linkname)
		}
		if err := unix.Linkat(tfd, path.Base(target), pfd, base, 0); err != nil {
			return bad("entry %q: %v", hdr.Name, err)
		}
		u.st.Links++
		return nil
	case tar.TypeChar:
		if hdr.Devmajor != 0 || hdr.Devminor != 0 {
			return bad("entry %q is a device node; only whiteouts (0/0) are allowed", hdr.Name)
		}
		if err := unix.Mknodat(pfd, base, unix.S_IFCHR|0o600, 0); err != nil {
			return bad("entry %q: %v", hdr.Name, err)
		}
		u.st.Files++
		if err := u.finishPath(pfd, base, uid, gid, hdr.ModTime); err != nil {
			return err
		}
		return unix.Fchmodat(pfd, base, mode, 0)
	case tar.TypeFifo:
		if err := unix.Mknodat(pfd, base, unix.S_IFIFO|0o600, 0); err != nil {
			return bad("entry %q: %v", hdr.Name, err)
		}
		u.st.Files++
		if err := u.finishPath(pfd, base, uid, gid, hdr.ModTime); err != nil {
			return err
		}
		return unix.Fchmodat(pfd, base, mode, 0)
	case tar.TypeBlock:
		return bad("entry %q is a device node; only whiteouts (0/0) are allowed", hdr.Name)
	case tar.TypeXGlobalHeader:
		return nil
	}
	return bad("entry %q has unsupported type %q", hdr.Name, hdr.Typeflag)
}

func (u *unpacker) finishPath(dir int, name string, uid, gid int, mtime time.Time) error {
	if err := unix.Fchownat(dir, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	ts := unix.NsecToTimespec(mtime.UnixNano())
	return unix.UtimesNanoAt(dir, name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}

// writeSparse writes size bytes of r to fd, leaving holes where whole
// blocks of zeros are.
func writeSparse(fd int, r io.Reader, size int64) error {
	const block = 64 << 10
	buf := make([]byte, block)
	zero := make([]byte, block)
	var off int64
	for off < size {
		n, err := io.ReadFull(r, buf[:min(int64(block), size-off)])
		if err != nil {
			return bad("%v", err) // the archive is cut short or corrupt
		}
		if !bytes.Equal(buf[:n], zero[:n]) {
			if _, err := unix.Pwrite(fd, buf[:n], off); err != nil {
				return err
			}
		}
		off += int64(n)
	}
	return unix.Ftruncate(fd, size)
}
