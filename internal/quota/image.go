package quota

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/sparse"
)

// imageFS gives each limited layer its own ext4 filesystem in a sparse image
// sized to the limit: the filesystem being full is the limit (ENOSPC). A
// layer without a limit is a plain directory.
type imageFS struct {
	images    string // <dataDir>/layer-images (immutable)
	mkfs      string // mkfs.ext4 (immutable)
	maxInodes int64  // (immutable)
	// overcommit and watermark are Options.Overcommit and
	// Options.WatermarkBytes (see guard.go). (immutable)
	overcommit bool
	watermark  int64
	// remaining, set only on the stand-in for a shared image (guardShared),
	// returns what the layers in it may still write. (immutable)
	remaining func() int64

	mu    sync.Mutex
	owned map[string]string   // layer directory -> loop device, for the mounts we made
	guard map[string]*guarded // layer directory -> its image, for every mounted one
}

// Layer filesystems use 4 KiB blocks, no journal (a layer does not outlive
// a crash of its session: the daemon removes them at start, and the root
// overlay is mounted volatile anyway), no reserved GDT blocks for growing,
// and no blocks reserved for root: sandboxed root writes as uid 0.
const (
	blockSize   = 4096
	inodeSize   = 256
	groupBlocks = 8 * blockSize // blocks per group: one bitmap block's bits
	bytesPerIno = 4096          // default inode ratio of a layer
	minInodes   = 4096
)

func (l *Layers) openImagePerLayer(o Options) error {
	mkfs, err := findMkfs(o.Mkfs)
	if err != nil {
		return err
	}
	f := &imageFS{images: l.imagesDir(), mkfs: mkfs, maxInodes: o.MaxInodes, owned: map[string]string{},
		guard: map[string]*guarded{}, overcommit: o.Overcommit, watermark: o.WatermarkBytes}
	if err := os.Mkdir(f.images, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	register(f)
	if err := f.adopt(l.dir); err != nil {
		f.close()
		return err
	}
	l.be, l.mode = f, ModeImagePerLayer
	return nil
}

// adopt puts the layers of an earlier run back in shape: an image whose
// layer directory is gone (a Create that crashed) is deleted, an image that
// is not mounted is mounted again. An image that fails to mount stays as it
// is, for Remove.
func (f *imageFS) adopt(dir string) error {
	ents, err := os.ReadDir(f.images)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".img")
		img := filepath.Join(f.images, e.Name())
		if !ok || validName(name) != nil {
			continue
		}
		layer := filepath.Join(dir, name)
		if _, err := os.Lstat(layer); errors.Is(err, os.ErrNotExist) {
			if err := os.Remove(img); err != nil {
				return err
			}
			continue
		}
		// Still mounted: a sandbox that outlived its daemon writes to it.
		// Remove unmounts it when the session goes; the guard keeps it in
		// its share meanwhile.
		if dev, ok, err := loopBackedBy(layer, img); err != nil || ok {
			if ok {
				f.watch(layer, dev, img, false)
			}
			continue
		}
		if mp, err := isMountPoint(layer); err != nil || mp {
			continue
		}
		dev, err := mountImage(img, layer, layerMountData)
		if err != nil {
			continue
		}
		f.owned[layer] = dev
		// The reserved clusters do not survive a mount: fit again.
		if b, err := getxattr(img, limitXattr); err == nil {
			if blocks, err := strconv.ParseInt(string(b), 10, 64); err == nil {
				_, _ = fitCapacity(layer, dev, blocks) // unfitted, the layer offers the estimate's small surplus, as without the xattr
			}
		}
		f.watch(layer, dev, img, true)
	}
	return nil
}

const layerMountData = "discard,noinit_itable"

// limitXattr, on an image file, holds the layer's limit in blocks.
const limitXattr = "user.warren.limit_blocks"

func getxattr(path, name string) ([]byte, error) {
	b := make([]byte, 32)
	n, err := unix.Getxattr(path, name, b)
	if err != nil {
		return nil, err
	}
	return b[:n], nil
}

func (f *imageFS) imagePath(dir string) string {
	return filepath.Join(f.images, filepath.Base(dir)+".img")
}

func (f *imageFS) create(dir string, limitBytes int64) (err error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return errdefs.New(errdefs.ErrConflict, "%s already exists", dir)
		}
		return err
	}
	if limitBytes == 0 {
		return nil
	}
	img := f.imagePath(dir)
	var dev string
	defer func() {
		if err == nil {
			return
		}
		if dev != "" {
			if uerr := unmount(dir); uerr != nil {
				err = errors.Join(err, uerr)
				return // keep the image, Remove retries
			}
		}
		os.Remove(img)
		os.Remove(dir)
	}()
	limitBlocks := (limitBytes + blockSize - 1) / blockSize
	// ext4 keeps the first 11 inodes for itself (lost+found is the 11th).
	inodes := f.maxInodes + 11
	if f.maxInodes == 0 {
		inodes = max(limitBlocks*blockSize/bytesPerIno, minInodes)
	}
	blocks := imageBlocks(limitBlocks, inodes)
	// The estimate is a little generous; if it ever falls short, format
	// once more with the shortfall added.
	for try := 0; ; try++ {
		// The image counts for the next admission once it exists.
		registry.admit.Lock()
		err := f.admit(blocks * blockSize)
		if err == nil {
			err = f.format(img, blocks, inodes)
		}
		registry.admit.Unlock()
		if err != nil {
			return err
		}
		dev, err = mountImage(img, dir, layerMountData)
		if err != nil {
			return err
		}
		short, err := fitCapacity(dir, dev, limitBlocks)
		if err != nil {
			return err
		}
		if short == 0 {
			break
		}
		if try == 1 {
			return fmt.Errorf("a %d-block image holds %d blocks less than the limit", blocks, short)
		}
		if err := unmount(dir); err != nil {
			return err
		}
		dev = ""
		os.Remove(img)
		blocks += short + 16
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	// For a later mount of the image (Open after Close, or after a crash).
	// Without it (a data directory without user xattrs) such a mount offers
	// the estimate's small surplus too.
	_ = unix.Setxattr(img, limitXattr, []byte(strconv.FormatInt(limitBlocks, 10)), 0)
	f.mu.Lock()
	f.owned[dir] = dev
	f.mu.Unlock()
	f.watch(dir, dev, img, true)
	return nil
}

// format creates img, which must not exist, as a fresh filesystem of
// blocks blocks and inodes inodes: a copy of a template that mkfs.ext4
// formatted once for that shape, in <images>/templates. Running mkfs costs
// a process and about 4 ms per layer; the copy moves the 150 KiB or so that
// mkfs writes into the sparse image, holes kept, in well under a
// millisecond. Copies share the template's UUID and directory hash seed,
// which matter to nothing across separate filesystems.
func (f *imageFS) format(img string, blocks, inodes int64) error {
	dir := filepath.Join(f.images, "templates")
	tpl := filepath.Join(dir, fmt.Sprintf("%s-%d-%d.img", templateVersion, blocks, inodes))
	src, err := os.Open(tpl)
	if errors.Is(err, os.ErrNotExist) {
		if err := f.makeTemplate(dir, tpl, blocks, inodes); err != nil {
			return err
		}
		src, err = os.Open(tpl)
	}
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = sparse.Copy(int(dst.Fd()), int(src.Fd()), blocks*blockSize)
	if err == nil {
		err = unix.Ftruncate(int(dst.Fd()), blocks*blockSize)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(img)
		return fmt.Errorf("copy the filesystem template: %w", err)
	}
	return nil
}

// templateVersion names the mkfs options below: change it with them, so
// no image is made from a template of the old ones.
const templateVersion = "v1"

// maxTemplates bounds the templates kept (one per layer size in use); the
// oldest go first.
const maxTemplates = 16

// makeTemplate formats the template tpl in dir, written aside and renamed so
// a concurrent create never copies half a filesystem.
func (f *imageFS) makeTemplate(dir, tpl string, blocks, inodes int64) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp-%d-%d", tpl, os.Getpid(), time.Now().UnixNano())
	if err := createSparse(tmp, blocks*blockSize); err != nil {
		return err
	}
	err := runMkfs(f.mkfs, "-q", "-b", strconv.Itoa(blockSize), "-I", strconv.Itoa(inodeSize),
		"-N", strconv.FormatInt(inodes, 10), "-m", "0", "-O", "^has_journal,^resize_inode",
		"-E", "lazy_itable_init=1,nodiscard,root_owner=0:0", tmp)
	if err == nil {
		err = os.Rename(tmp, tpl)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	ents, _ := os.ReadDir(dir)
	type aged struct {
		name string
		mod  time.Time
	}
	var tpls []aged
	for _, e := range ents {
		if info, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".img") {
			tpls = append(tpls, aged{e.Name(), info.ModTime()})
		} else if err == nil && !strings.Contains(e.Name(), fmt.Sprintf(".tmp-%d-", os.Getpid())) {
			os.Remove(filepath.Join(dir, e.Name())) // left by a crash, or an older version
		}
	}
	// Newest first; the one just made is kept whatever its time says.
	slices.SortFunc(tpls, func(a, b aged) int { return b.mod.Compare(a.mod) })
	kept := 1
	for _, t := range tpls {
		if t.name == filepath.Base(tpl) {
			continue
		}
		if kept < maxTemplates && strings.HasPrefix(t.name, templateVersion+"-") {
			kept++
			continue
		}
		os.Remove(filepath.Join(dir, t.name))
	}
	return nil
}

// imageBlocks estimates the size of an image whose filesystem has room for
// limitBlocks blocks of data with the given inodes: ext4 also stores the
// inode tables, a block and an inode bitmap per group, the superblock and
// group descriptors with backups in groups 0, 1 and the powers of 3, 5 and 7,
// and keeps 2% of the blocks (at most 4096) out of reach for its own use.
func imageBlocks(limitBlocks, inodes int64) int64 {
	itable := (inodes*inodeSize + blockSize - 1) / blockSize
	total := limitBlocks + itable
	for range 3 {
		groups := (total + groupBlocks - 1) / groupBlocks
		gdt := (groups*64 + blockSize - 1) / blockSize
		total = limitBlocks + itable + 2*groups + backups(groups)*(1+gdt) + min(total/50, 4096) + 16
	}
	return total
}

// backups counts the groups that hold a copy of the superblock with
// sparse_super: 0, 1 and the powers of 3, 5 and 7.
func backups(groups int64) int64 {
	n := min(groups, 2)
	for _, b := range []int64{3, 5, 7} {
		for p := b; p < groups; p *= b {
			n++
		}
	}
	return n
}

// fitCapacity makes the filesystem on dir offer exactly limitBlocks free
// blocks: what the estimate gave too much is added to ext4's reserved
// clusters, which only the filesystem itself may use. It returns how many
// blocks are missing if the image is too small.
func fitCapacity(dir, dev string, limitBlocks int64) (short int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	extra := int64(st.Bavail) - limitBlocks
	if extra <= 0 {
		return -extra, nil
	}
	knob := "/sys/fs/ext4/" + filepath.Base(dev) + "/reserved_clusters"
	b, err := os.ReadFile(knob)
	if err != nil {
		return 0, err
	}
	resv, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", knob, err)
	}
	if err := os.WriteFile(knob, []byte(strconv.FormatInt(resv+extra, 10)), 0); err != nil {
		return 0, err
	}
	return 0, nil
}

func (f *imageFS) remove(dir string) error {
	// Out of the guard first: its loop device may serve another layer
	// once this one is unmounted.
	f.mu.Lock()
	delete(f.guard, dir)
	f.mu.Unlock()
	mp, err := isMountPoint(dir)
	if err != nil {
		return err
	}
	if mp {
		// The layer's data is garbage now: shut the filesystem down so the
		// unmount does not first write back what the session left dirty
		// (gigabytes, for a session that just wrote a big file).
		if err := shutdown(dir); err != nil {
			return fmt.Errorf("shut down the filesystem of %s: %w", dir, err)
		}
		// Without MNT_DETACH: a filesystem still in use (a process with a
		// file open in it) is an error. Copies of the mount in sandboxes'
		// mount namespaces do not count; the loop device frees itself when
		// the last one goes.
		if err := unmount(dir); err != nil {
			return err
		}
		f.mu.Lock()
		delete(f.owned, dir)
		f.mu.Unlock()
	}
	if err := os.Remove(f.imagePath(dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.RemoveAll(dir)
}

func (f *imageFS) usage(dir string) (int64, error) {
	mp, err := isMountPoint(dir)
	if err != nil {
		return 0, err
	}
	if mp {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			return 0, err
		}
		return int64(st.Blocks-st.Bfree) * st.Bsize, nil
	}
	if _, err := os.Stat(f.imagePath(dir)); err == nil {
		return 0, errdefs.New(errdefs.ErrUnavailable, "the image of %s is not mounted", dir)
	}
	// A layer without a limit: add up what its files occupy.
	var n int64
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
		return nil
	})
	return n, err
}

// close unmounts every layer filesystem this imageFS mounted.
func (f *imageFS) close() error {
	unregister(f)
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.guard)
	var errs []error
	for dir, dev := range f.owned {
		if err := unmount(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(f.owned, dir)
		errs = append(errs, waitLoopFree(dev, waitLoop))
	}
	return errors.Join(errs...)
}

// ext4IocShutdown is EXT4_IOC_SHUTDOWN, _IOR('X', 125, __u32), and
// ext4GoingNoLogFlush its flag that drops dirty data and the journal.
const (
	ext4IocShutdown     = 0x8004587d
	ext4GoingNoLogFlush = 2
)

// shutdown stops the ext4 filesystem mounted on dir at once: dirty data is
// dropped and every later operation on it fails with EIO.
func shutdown(dir string) error {
	syscall.ForkLock.RLock() // no fork may copy fd: the unmount would fail
	defer syscall.ForkLock.RUnlock()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.IoctlSetPointerInt(fd, ext4IocShutdown, ext4GoingNoLogFlush)
}

// findMkfs returns the path of mkfs.ext4.
func findMkfs(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	if p, err := exec.LookPath("mkfs.ext4"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errdefs.New(errdefs.ErrUnavailable, "mkfs.ext4 not found (in PATH, /usr/sbin or /sbin): install e2fsprogs; it formats the filesystem of the sessions' writable layers")
}

// runMkfs runs mkfs.ext4 with a fixed environment and no input.
func runMkfs(mkfs string, args ...string) error {
	cmd := exec.Command(mkfs, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		err = fmt.Errorf("%s %s: %w: %s", mkfs, strings.Join(args, " "), err, bytes.TrimSpace(out.Bytes()))
		if bytes.Contains(out.Bytes(), []byte("No space left on device")) {
			// mkfs says it only in words (LC_ALL=C above): keep the errno
			// so callers see a full disk.
			err = fmt.Errorf("%w (%w)", err, unix.ENOSPC)
		}
		return err
	}
	return nil
}

// createSparse creates path (which must not exist) as a sparse file of size
// bytes.
func createSparse(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}
