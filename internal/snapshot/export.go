package snapshot

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// ManifestName is the first entry of a snapshot archive.
const ManifestName = "warren-snapshot.json"

// ManifestVersion is the archive format this package writes and reads.
const ManifestVersion = 1

// Manifest describes a snapshot archive: the image the snapshot's changes
// apply to, and the extra overlays of that image (its host directories)
// whose changes it carries.
type Manifest struct {
	Version     int    `json:"version"`
	Image       string `json:"image"`
	ImageDigest string `json:"image_digest,omitempty"`
	// Overlays are the targets (such as "/usr") of the archive's ov/<i>
	// trees, in order.
	Overlays []string `json:"overlays,omitempty"`
}

// Layer is one layer of a snapshot on disk: Dir holds root/ (the changes to
// the root filesystem) and ov/<i>/ (the changes to Overlays[i]).
type Layer struct {
	Dir      string
	Overlays []string
}

// RootDir is the tree of a layer that holds its root filesystem's changes.
func (l Layer) RootDir() string { return filepath.Join(l.Dir, "root") }

// OverlayDir is the tree of a layer that holds the changes to target, or ""
// when the layer has none.
func (l Layer) OverlayDir(target string) string {
	i := slices.Index(l.Overlays, target)
	if i < 0 {
		return ""
	}
	return filepath.Join(l.Dir, "ov", strconv.Itoa(i))
}

// Export writes a zstd-compressed tar of the snapshot made of layers
// (topmost first) to w: the manifest m (its Overlays replaced by those of
// the layers), then root/ and ov/<i>/, each the layers merged into one, in
// the layer format (whiteouts as character devices 0/0, opaque directories
// with the user.overlay.opaque xattr in a SCHILY.xattr PAX record, owners
// as canonical numeric ids).
//
// Sparse files are exported at their full size (archive/tar writes no
// sparse entries), so the regular-file data is capped at
// DefaultMaxExportBytes: a larger snapshot is refused with ErrTooLarge
// before anything is written (a walk of the layers sums the sizes first).
func Export(ctx context.Context, w io.Writer, m Manifest, layers []Layer) error {
	return ExportLimited(ctx, w, m, layers, DefaultMaxExportBytes)
}

// DefaultMaxExportBytes is Export's cap on file data: the default of what
// Import accepts (ImportLimits.MaxBytes), so every export can come back.
const DefaultMaxExportBytes = 8 << 30

// ExportLimited is Export with a cap of max bytes of regular-file data (0:
// none). Past the cap it fails with errdefs.ErrTooLarge, before writing
// anything.
func ExportLimited(ctx context.Context, w io.Writer, m Manifest, layers []Layer, max int64) error {
	m.Version = ManifestVersion
	m.Overlays = nil
	for _, l := range layers {
		for _, t := range l.Overlays {
			if !slices.Contains(m.Overlays, t) {
				m.Overlays = append(m.Overlays, t)
			}
		}
	}
	if max > 0 {
		// A dry walk (no tar, no file data) finds an oversized snapshot
		// before a byte goes out: a 10 TiB sparse file would otherwise
		// stream zeros until the client gave up.
		dry := &exporter{ctx: ctx, links: map[inode]string{}, max: max}
		if err := dry.trees(m, layers); err != nil {
			return err
		}
	}
	zw, err := zstd.NewWriter(w)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	e := &exporter{ctx: ctx, tw: tw, links: map[inode]string{}, max: max}
	if err := e.manifest(&m); err != nil {
		_ = zw.Close() // the export failed already; err says why
		return err
	}
	if err := e.trees(m, layers); err != nil {
		_ = zw.Close() // the export failed already; err says why
		return err
	}
	if err := tw.Close(); err != nil {
		_ = zw.Close() // the export failed already; err says why
		return err
	}
	return zw.Close()
}

// trees writes root/ and ov/<i>/ of the layers.
func (e *exporter) trees(m Manifest, layers []Layer) error {
	var roots []string
	for _, l := range layers {
		roots = append(roots, l.RootDir())
	}
	if err := e.tree("root", roots); err != nil {
		return err
	}
	for i, t := range m.Overlays {
		var dirs []string
		for _, l := range layers {
			if d := l.OverlayDir(t); d != "" {
				dirs = append(dirs, d)
			}
		}
		if err := e.tree("ov/"+strconv.Itoa(i), dirs); err != nil {
			return err
		}
	}
	return nil
}

type exporter struct {
	ctx   context.Context
	tw    *tar.Writer      // nil: a dry walk that only counts
	links map[inode]string // first archive name of inodes with several links
	max   int64            // cap on regular-file data (0: none)
	bytes int64            // regular-file data so far
}

func (e *exporter) manifest(m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: ManifestName, Mode: 0o644, Size: int64(len(b)), ModTime: time.Now(), Format: tar.FormatPAX}
	if err := e.tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = e.tw.Write(b)
	return err
}

// tree writes the merge of the directories roots (topmost first) as name.
func (e *exporter) tree(name string, roots []string) error {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, r := range roots {
		fd, err := unix.Open(r, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return fmt.Errorf("open layer %s: %w", r, err)
		}
		fds = append(fds, fd)
	}
	if len(fds) == 0 {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fds[0], &st); err != nil {
		return err
	}
	xs, err := readXattrs(fds[0], identity)
	if err != nil {
		return err
	}
	delete(xs, OpaqueXattr)
	if err := e.header(name+"/", tar.TypeDir, &st, "", xs); err != nil {
		return err
	}
	return e.dir(name, fds, 0)
}

func identity(u uint32) int { return int(u) }

// dir writes the merged entries of one directory; dirs are its instances
// in the layers that take part in the merge, topmost first.
func (e *exporter) dir(name string, dirs []int, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s: directories nest deeper than %d levels", name, maxDepth)
	}
	if err := e.ctx.Err(); err != nil {
		return err
	}
	var names []string
	for _, d := range dirs {
		ns, err := readNames(d)
		if err != nil {
			return fmt.Errorf("read directory %s: %w", name, err)
		}
		names = append(names, ns...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for _, n := range names {
		if err := e.entry(path.Join(name, n), n, dirs, depth); err != nil {
			return err
		}
	}
	return nil
}

func (e *exporter) entry(name, base string, dirs []int, depth int) error {
	var st unix.Stat_t
	top := -1
	for i, d := range dirs {
		if err := unix.Fstatat(d, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			top = i
			break
		}
	}
	if top < 0 {
		return nil
	}
	parent := dirs[top]
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		fd, err := openChecked(parent, base, unix.O_DIRECTORY, unix.S_IFDIR, &st)
		if err != nil {
			return fmt.Errorf("open %s: %w", name, err)
		}
		sub := []int{fd}
		defer func() {
			for _, s := range sub {
				unix.Close(s)
			}
		}()
		xs, err := readXattrs(fd, identity)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		// The merged directory hides what lies below the snapshot (the
		// image) if any of its instances is opaque or the chain of
		// directories breaks at a whiteout or a file of a lower layer.
		_, opaque := xs[OpaqueXattr]
		for _, d := range dirs[top+1:] {
			if opaque {
				break
			}
			var lst unix.Stat_t
			if err := unix.Fstatat(d, base, &lst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue
			}
			if lst.Mode&unix.S_IFMT != unix.S_IFDIR {
				opaque = true
				break
			}
			lfd, err := openChecked(d, base, unix.O_DIRECTORY, unix.S_IFDIR, &lst)
			if err != nil {
				return fmt.Errorf("open %s: %w", name, err)
			}
			sub = append(sub, lfd)
			if isOpaque(lfd) {
				opaque = true
			}
		}
		delete(xs, OpaqueXattr)
		if opaque {
			if xs == nil {
				xs = map[string][]byte{}
			}
			xs[OpaqueXattr] = []byte("y")
		}
		if err := e.header(name+"/", tar.TypeDir, &st, "", xs); err != nil {
			return err
		}
		return e.dir(name, sub, depth+1)
	case unix.S_IFREG:
		if st.Nlink > 1 {
			if first, ok := e.links[inode{st.Dev, st.Ino}]; ok {
				return e.header(name, tar.TypeLink, &st, first, nil)
			}
			e.links[inode{st.Dev, st.Ino}] = name
		}
		if e.bytes += st.Size; e.max > 0 && e.bytes > e.max {
			return errdefs.New(errdefs.ErrTooLarge, "the snapshot holds more than %d bytes of file data (sparse files count at their full size), more than an export carries", e.max)
		}
		if e.tw == nil {
			return nil
		}
		fd, err := openChecked(parent, base, unix.O_NONBLOCK, unix.S_IFREG, &st)
		if err != nil {
			return fmt.Errorf("open %s: %w", name, err)
		}
		f := os.NewFile(uintptr(fd), name)
		defer f.Close()
		xs, err := readXattrs(fd, identity)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := e.header(name, tar.TypeReg, &st, "", xs); err != nil {
			return err
		}
		if _, err := io.CopyN(e.tw, f, st.Size); err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		return nil
	case unix.S_IFLNK:
		target, err := readlinkat(parent, base)
		if err != nil {
			return fmt.Errorf("read link %s: %w", name, err)
		}
		return e.header(name, tar.TypeSymlink, &st, target, nil)
	case unix.S_IFCHR:
		if st.Rdev != 0 {
			return nil
		}
		return e.header(name, tar.TypeChar, &st, "", nil)
	case unix.S_IFIFO:
		return e.header(name, tar.TypeFifo, &st, "", nil)
	}
	return nil
}

func isOpaque(fd int) bool {
	v, err := getXattr(fd, OpaqueXattr)
	return err == nil && len(v) > 0
}

func (e *exporter) header(name string, typ byte, st *unix.Stat_t, link string, xs map[string][]byte) error {
	if e.tw == nil {
		return nil
	}
	mode := int64(st.Mode & 0o7777)
	if typ == tar.TypeReg || typ == tar.TypeLink {
		// No setuid or setgid file leaves in an archive (a snapshot made
		// before Copy cleared them may still hold one).
		mode &^= unix.S_ISUID | unix.S_ISGID
	}
	hdr := &tar.Header{
		Typeflag: typ,
		Name:     name,
		Linkname: link,
		Mode:     mode,
		Uid:      int(st.Uid),
		Gid:      int(st.Gid),
		ModTime:  time.Unix(st.Mtim.Unix()),
		Format:   tar.FormatPAX,
	}
	if typ == tar.TypeReg {
		hdr.Size = st.Size
	}
	if len(xs) > 0 {
		hdr.PAXRecords = map[string]string{}
		for k, v := range xs {
			hdr.PAXRecords[paxXattr+k] = string(v)
		}
	}
	if err := e.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

const paxXattr = "SCHILY.xattr."
