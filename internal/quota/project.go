package quota

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// errUnusable marks a mode that cannot work on this host or data directory;
// ModeAuto then tries the next one.
var errUnusable = errors.New("unusable here")

// projectFS enforces the limits with project quotas: each layer directory
// has its own project id, inherited by everything created below it, and the
// project's hard limits.
type projectFS struct {
	root      int    // descriptor of the layers directory: quotactl_fd addresses the fs through it (immutable)
	first     uint32 // lowest id we hand out (immutable)
	maxInodes int64  // inode hard limit per layer, 0 for none (immutable)

	mu   sync.Mutex
	ids  map[uint32]bool // ids of live layers and of layers being created
	next uint32          // next id to try
}

// openProjectFS checks that the filesystem of dir enforces project quotas
// and collects the project ids of the layers already in dir.
func openProjectFS(dir string, o Options) (*projectFS, error) {
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	p := &projectFS{root: root, first: o.FirstProjectID, maxInodes: o.MaxInodes, ids: map[uint32]bool{}, next: o.FirstProjectID}
	enforced, err := projectQuotaEnforced(root)
	if err != nil {
		p.close()
		return nil, fmt.Errorf("%w: quota state of %s: quotactl_fd(Q_XGETQSTATV): %v", errUnusable, dir, err)
	}
	if !enforced {
		p.close()
		return nil, fmt.Errorf("%w: %s does not enforce project quotas", errUnusable, dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		p.close()
		return nil, err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		id, err := projectID(filepath.Join(dir, e.Name()))
		if err != nil {
			p.close()
			return nil, err
		}
		if id >= p.first {
			p.ids[id] = true
			if id >= p.next && id != ^uint32(0) {
				p.next = id + 1
			}
		}
	}
	return p, nil
}

func (l *Layers) openProjectQuota(o Options) error {
	p, err := openProjectFS(l.dir, o)
	if err != nil {
		return err
	}
	if err := p.probe(l.dir); err != nil {
		p.close()
		return err
	}
	l.be, l.mode = p, ModeProjectQuota
	return nil
}

// probe proves that project quotas work on dir's filesystem by doing what
// create does on a scratch directory: set a project id with inheritance,
// then set and read back a limit.
func (p *projectFS) probe(dir string) (err error) {
	stale, _ := filepath.Glob(filepath.Join(dir, ".probe-*")) // left by a crash
	for _, s := range stale {
		os.RemoveAll(s)
	}
	probe := filepath.Join(dir, ".probe-"+strconv.Itoa(os.Getpid()))
	id, err := p.allocate()
	if err != nil {
		return err
	}
	defer p.release(id)
	if err := os.Mkdir(probe, 0o700); err != nil {
		return err
	}
	defer os.Remove(probe)
	if err := setProject(probe, id); err != nil {
		return fmt.Errorf("%w: set a project id on %s: %v", errUnusable, dir, err)
	}
	if err := p.setLimits(id, 1<<20, 0); err != nil {
		return fmt.Errorf("%w: set a project quota on %s: %v", errUnusable, dir, err)
	}
	defer func() { _ = p.setLimits(id, 0, 0) }() // the probe's project id is never given to a layer
	q, err := getProjectQuota(p.root, id)
	if err != nil || q.Bhardlimit != 1<<10 {
		return fmt.Errorf("%w: read back a project quota on %s: %v (limit %d KiB)", errUnusable, dir, err, q.Bhardlimit)
	}
	return nil
}

// allocate reserves a project id that no live layer uses and that nothing is
// charged to or limited under (another user of project ids on a shared host
// filesystem, or files of a removed layer that are still open).
func (p *projectFS) allocate() (uint32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range 1 << 16 {
		id := p.next
		p.next++
		if p.next < p.first { // wrapped past 2^32-1
			p.next = p.first
		}
		if p.ids[id] {
			continue
		}
		q, err := getProjectQuota(p.root, id)
		switch {
		case errors.Is(err, unix.ESRCH), errors.Is(err, unix.ENOENT):
		case err != nil:
			return 0, fmt.Errorf("read quota of project %d: %w", id, err)
		case q.Curspace != 0, q.Curinodes != 0, q.Bhardlimit != 0, q.Bsoftlimit != 0, q.Ihardlimit != 0, q.Isoftlimit != 0:
			continue
		}
		p.ids[id] = true
		return id, nil
	}
	return 0, errdefs.New(errdefs.ErrResourceExhausted, "no free project id from %d on", p.first)
}

func (p *projectFS) release(id uint32) {
	p.mu.Lock()
	delete(p.ids, id)
	p.mu.Unlock()
}

// setLimits sets the project's hard limits; zero means none.
func (p *projectFS) setLimits(id uint32, bytes, inodes int64) error {
	q := dqblk{
		Bhardlimit: uint64((bytes + 1023) / 1024),
		Ihardlimit: uint64(inodes),
		Valid:      qifBLimits | qifILimits,
	}
	return setProjectQuota(p.root, id, &q)
}

func (p *projectFS) create(dir string, limitBytes int64) (err error) {
	id, err := p.allocate()
	if err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		p.release(id)
		if errors.Is(err, os.ErrExist) {
			return errdefs.New(errdefs.ErrConflict, "%s already exists", dir)
		}
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(dir)
			p.release(id)
		}
	}()
	if err := setProject(dir, id); err != nil {
		return fmt.Errorf("set project id %d: %w", id, err)
	}
	if err := p.setLimits(id, limitBytes, p.maxInodes); err != nil {
		return fmt.Errorf("set quota of project %d: %w", id, err)
	}
	return nil
}

func (p *projectFS) remove(dir string) error {
	id, err := projectID(dir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if id < p.first {
		return nil // not one of ours: never touch its quota
	}
	if err := p.setLimits(id, 0, 0); err != nil {
		return fmt.Errorf("clear quota of project %d: %w", id, err)
	}
	p.release(id)
	return nil
}

func (p *projectFS) usage(dir string) (int64, error) {
	id, err := projectID(dir)
	if err != nil {
		return 0, err
	}
	if id < p.first {
		return 0, fmt.Errorf("%s has no project id of ours (%d)", dir, id)
	}
	q, err := getProjectQuota(p.root, id)
	if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read quota of project %d: %w", id, err)
	}
	return int64(q.Curspace), nil
}

func (p *projectFS) close() error {
	if p.root < 0 {
		return nil
	}
	err := unix.Close(p.root)
	p.root = -1
	return err
}

// projectID returns the project id of the directory dir.
func projectID(dir string) (uint32, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	a, err := getFsxattr(fd)
	if err != nil {
		return 0, fmt.Errorf("FS_IOC_FSGETXATTR on %s: %w", dir, err)
	}
	return a.Projid, nil
}

// setProject gives the directory dir the project id and the inherit flag, so
// everything created below it is charged to the project too.
func setProject(dir string, id uint32) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	a, err := getFsxattr(fd)
	if err != nil {
		return err
	}
	a.Projid = id
	a.Xflags |= fsXflagProjInherit
	return setFsxattr(fd, &a)
}

// openSharedImage mounts <dataDir>/layers.img on the layers directory,
// creating and formatting it first if it does not exist, or adopts it if a
// daemon that crashed left it mounted.
func (l *Layers) openSharedImage(o Options) error {
	img := l.image()
	dev, ok, err := loopBackedBy(l.dir, img)
	if err != nil {
		return err
	}
	if ok {
		p, err := openProjectFS(l.dir, o)
		if err != nil {
			return err
		}
		l.be, l.mode, l.dev = p, ModeSharedImage, dev
		l.guardShared(p, dev, o, false)
		return nil
	}
	if mp, err := isMountPoint(l.dir); err != nil {
		return err
	} else if mp {
		return fmt.Errorf("%w: something other than %s is mounted on %s", errUnusable, img, l.dir)
	}
	if ents, err := os.ReadDir(l.dir); err != nil {
		return err
	} else if len(ents) > 0 {
		return fmt.Errorf("%w: %s is not empty; the shared image would hide its contents", errUnusable, l.dir)
	}
	created := false
	if _, err := os.Stat(img); errors.Is(err, os.ErrNotExist) {
		if err := createSharedImage(img, o); err != nil {
			return err
		}
		created = true
	} else if err != nil {
		return err
	}
	dev, err = mountImage(img, l.dir, "prjquota,discard,noinit_itable")
	if err != nil {
		if created {
			os.Remove(img)
		}
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("%w: the kernel cannot mount ext4 with project quotas (it needs CONFIG_QUOTA and CONFIG_QFMT_V2): %v", errUnusable, err)
		}
		return err
	}
	p, err := openProjectFS(l.dir, o)
	if err == nil {
		err = os.Chmod(l.dir, 0o700)
	}
	if err != nil {
		if p != nil {
			p.close()
		}
		if uerr := unmount(l.dir); uerr != nil {
			return errors.Join(err, uerr)
		}
		return errors.Join(err, waitLoopFree(dev, waitLoop))
	}
	l.be, l.mode, l.mounted, l.dev = p, ModeSharedImage, true, dev
	l.guardShared(p, dev, o, true)
	return nil
}

// createSharedImage creates the sparse image with an ext4 filesystem that
// has project quotas, under a temporary name renamed into place when it is
// complete: an image that exists is always formatted.
func createSharedImage(img string, o Options) error {
	mkfs, err := findMkfs(o.Mkfs)
	if err != nil {
		return err
	}
	free, err := freeBytes(filepath.Dir(img))
	if err != nil {
		return err
	}
	size := min(o.ImageBytes, free) &^ (1<<20 - 1)
	if size < minImageBytes {
		return errdefs.New(errdefs.ErrResourceExhausted, "%d bytes free next to %s, at least %d needed", free, img, minImageBytes)
	}
	tmp := img + ".tmp"
	os.Remove(tmp)
	if err := createSparse(tmp, size); err != nil {
		return err
	}
	err = runMkfs(mkfs, "-q", "-m", "0", "-O", "quota,project",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", tmp)
	if err == nil {
		err = os.Rename(tmp, img)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
