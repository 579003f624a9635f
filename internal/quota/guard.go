package quota

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// A per-layer image is sparse: its blocks are allocated in the data
// directory's filesystem only when the layer's ext4 writes them back. If
// that filesystem fills first, the write-back fails in the loop device
// ("Buffer I/O error ... lost async page write", "potential data loss")
// after the session's write and even its sync reported success. Two things
// prevent that here:
//
//   - Admission (Options.Overcommit off, the default): a limited layer is
//     created only if the filesystem's free space covers what every live
//     image on it may still grow by (its size less what it has allocated)
//     plus the new image plus the watermark. Beyond, Create fails with
//     errdefs.ErrUnavailable (503): the limits granted are backed by space.
//   - The guard, in both modes: every guardInterval it gives the layers on a
//     filesystem, between them, at most the free space above the watermark
//     less what they count as used but have not yet allocated in their
//     images (dirty data, and metadata such as inode tables), each in
//     proportion to what its limit still allows, and raises the reserved
//     clusters of a layer's ext4 so that it offers no more than its share.
//     A write past the share fails with ENOSPC inside the session, before
//     the host filesystem fills; the shares grow again when space returns.
//     The sum of the shares never exceeds the headroom, so a write between
//     two ticks cannot overrun it either; only writers outside the layers
//     (the daemon, the operator) can, and the watermark is their margin.
//
// The guard watches the images of every Layers in this process (the
// sessions' and the workspaces'), grouped by filesystem. A shared image
// (ModeSharedImage) is sparse too: it is guarded as one layer, and admitted
// against by the remaining limits of the layers in it. Project quotas on
// the host filesystem itself (ModeProjectQuota) need neither: a full host
// filesystem fails the write itself with ENOSPC.

const guardInterval = 200 * time.Millisecond

// The default watermark: 5% of the filesystem, at most 256 MiB.
const (
	defaultWatermarkBytes   = 256 << 20
	defaultWatermarkPercent = 5
)

// guarded is one mounted per-layer image the guard keeps in its share.
type guarded struct {
	dev, img string
	base     int64 // reserved clusters fitCapacity left (the limit's own)
	extra    int64 // reserved clusters the guard added on top
}

// registry holds the imageFS backends of this process.
var registry struct {
	mu    sync.Mutex
	fss   map[*imageFS]bool
	stop  chan struct{}
	done  chan struct{}
	admit sync.Mutex // held from an admission check until its image exists
	tick  sync.Mutex // one tick at a time: it takes the backends' locks
}

func register(f *imageFS) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.fss == nil {
		registry.fss = map[*imageFS]bool{}
	}
	registry.fss[f] = true
	if registry.stop == nil {
		registry.stop, registry.done = make(chan struct{}), make(chan struct{})
		go guardLoop(registry.stop, registry.done)
	}
}

func unregister(f *imageFS) {
	registry.mu.Lock()
	delete(registry.fss, f)
	var stop, done chan struct{}
	if len(registry.fss) == 0 && registry.stop != nil {
		stop, done = registry.stop, registry.done
		registry.stop, registry.done = nil, nil
	}
	registry.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

func guardLoop(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(guardInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			guardTick()
		}
	}
}

// watermark returns the free space the guard keeps on a filesystem of
// total bytes for a setting of w bytes (0: the default). Of the Layers on
// one filesystem, the largest setting counts (the workspaces' store leaves
// it at 0, the sessions' store has the operator's).
func watermark(w int64, total uint64) int64 {
	if w > 0 {
		return w
	}
	return int64(min(defaultWatermarkBytes, total*defaultWatermarkPercent/100))
}

// fsKey identifies the filesystem holding path.
func fsKey(path string) (unix.Fsid, unix.Statfs_t, error) {
	var st unix.Statfs_t
	err := unix.Statfs(path, &st)
	return st.Fsid, st, err
}

// guardTick recomputes every layer's share and applies it.
func guardTick() {
	registry.tick.Lock()
	defer registry.tick.Unlock()
	registry.mu.Lock()
	fss := make([]*imageFS, 0, len(registry.fss))
	for f := range registry.fss {
		fss = append(fss, f)
	}
	registry.mu.Unlock()
	type group struct {
		st     unix.Statfs_t
		wm     int64
		layers []*imageFS
	}
	groups := map[unix.Fsid]*group{}
	for _, f := range fss {
		id, st, err := fsKey(f.images)
		if err != nil {
			continue
		}
		g := groups[id]
		if g == nil {
			g = &group{st: st}
			groups[id] = g
		}
		g.wm = max(g.wm, f.watermark)
		g.layers = append(g.layers, f)
	}
	for _, g := range groups {
		g.wm = watermark(g.wm, g.st.Blocks*uint64(g.st.Bsize))
		// Hold every member's lock while sharing out, so no layer is
		// added or removed under the computation.
		for _, f := range g.layers {
			f.mu.Lock()
		}
		share(g.st, g.wm, g.layers)
		for _, f := range g.layers {
			f.mu.Unlock()
		}
	}
}

// layerState is what one tick reads of a layer.
type layerState struct {
	dir   string
	g     *guarded
	bsize int64
	avail int64 // bytes the layer could write without the guard's extra
	total int64 // blocks of its ext4
}

// share gives the layers of one filesystem their shares (see the top of
// this file). Preconditions: every f.mu is held.
func share(host unix.Statfs_t, wm int64, fss []*imageFS) {
	headroom := int64(host.Bavail)*host.Bsize - wm
	var states []layerState
	var sumAvail int64
	for _, f := range fss {
		for dir, g := range f.guard {
			var st unix.Statfs_t
			var ist unix.Stat_t
			if unix.Statfs(dir, &st) != nil || unix.Stat(g.img, &ist) != nil {
				continue
			}
			// What the layer's ext4 counts as used but the image has not
			// allocated: dirty data, and metadata mkfs left sparse (inode
			// tables, a shared image's journal) that fills in as it is
			// written. An upper bound, so the shares stay on the safe side.
			used := int64(st.Blocks-st.Bfree) * st.Bsize
			pending := max(0, used-ist.Blocks*512)
			headroom -= pending
			s := layerState{dir: dir, g: g, bsize: st.Bsize, total: int64(st.Blocks),
				avail: (int64(st.Bavail) + g.extra) * st.Bsize}
			sumAvail += s.avail
			states = append(states, s)
		}
	}
	headroom = max(headroom, 0)
	for _, s := range states {
		allow := s.avail
		if sumAvail > headroom {
			// In proportion; float64 for the product's range.
			allow = int64(float64(headroom) * float64(s.avail) / float64(sumAvail))
		}
		extra := (s.avail - allow + s.bsize - 1) / s.bsize
		// ext4 takes fewer reserved clusters than its blocks.
		extra = max(0, min(extra, s.total-1-s.g.base))
		if extra == s.g.extra {
			continue
		}
		if setReserved(s.g.dev, s.g.base+extra) == nil {
			s.g.extra = extra
		}
	}
}

// baseXattr, on an image file, holds the reserved clusters of its mounted
// filesystem without the guard's extra.
const baseXattr = "user.warren.base_resv"

func reservedKnob(dev string) string {
	return "/sys/fs/ext4/" + filepath.Base(dev) + "/reserved_clusters"
}

func getReserved(dev string) (int64, error) {
	b, err := os.ReadFile(reservedKnob(dev))
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", reservedKnob(dev), err)
	}
	return n, nil
}

func setReserved(dev string, n int64) error {
	return os.WriteFile(reservedKnob(dev), []byte(strconv.FormatInt(n, 10)), 0)
}

// watch puts the layer mounted on dir from img by dev under the guard; with
// overcommit at once (a new layer must not write past its share before the
// next tick).
func (f *imageFS) watch(dir, dev, img string, fresh bool) {
	g := &guarded{dev: dev, img: img}
	base, err := getReserved(dev)
	if err != nil {
		return
	}
	// A layer still mounted from an earlier daemon may carry that guard's
	// extra: its base was recorded on the image when it was mounted. A
	// fresh mount (a create, or adopt mounting the image again) records it.
	if fresh {
		// Without user xattrs (tmpfs before Linux 6.6) a layer adopted
		// while mounted keeps the old extra as part of its base: it
		// stays smaller than its limit until its session ends, never
		// larger.
		_ = unix.Setxattr(img, baseXattr, []byte(strconv.FormatInt(base, 10)), 0)
	} else if b, err := getxattr(img, baseXattr); err == nil {
		if n, err := strconv.ParseInt(string(b), 10, 64); err == nil && n <= base {
			g.extra = base - n
			base = n
		}
	}
	g.base = base
	f.mu.Lock()
	f.guard[dir] = g
	f.mu.Unlock()
	if f.overcommit {
		// Without overcommit, admission backed the whole limit: the
		// next tick is soon enough (and a create saves a tick's cost).
		guardTick()
	}
}

// admit checks, in Options.Overcommit's off mode, that the filesystem
// holding the images has room for every live image to grow to its size
// (for a shared image: every layer in it to its limit), for a new image or
// layer of newBytes, and for the watermark. The caller holds
// registry.admit until the new image exists.
func (f *imageFS) admit(newBytes int64) error {
	if f.overcommit {
		return nil
	}
	id, st, err := fsKey(f.images)
	if err != nil {
		return err
	}
	registry.mu.Lock()
	var dirs []string
	var others []func() int64
	var wm int64
	for o := range registry.fss {
		if oid, _, err := fsKey(o.images); err != nil || oid != id {
			continue
		}
		wm = max(wm, o.watermark)
		if o.remaining != nil {
			others = append(others, o.remaining)
		} else {
			dirs = append(dirs, o.images)
		}
	}
	registry.mu.Unlock()
	var committed int64
	for _, o := range others {
		committed += o()
	}
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".img") || !e.Type().IsRegular() {
				continue
			}
			var ist unix.Stat_t
			if unix.Stat(filepath.Join(d, e.Name()), &ist) == nil {
				committed += max(0, ist.Size-ist.Blocks*512)
			}
		}
	}
	free := int64(st.Bavail) * st.Bsize
	wm = watermark(wm, st.Blocks*uint64(st.Bsize))
	if free < committed+newBytes+wm {
		return errdefs.New(errdefs.ErrUnavailable,
			"the disk cannot back another layer: its filesystem has %s free, and the live layers' limits still need %s, this one %s, and %s stay free (disk.reserve_watermark_mb); set disk.overcommit to grant limits beyond the free space",
			mibs(free), mibs(committed), mibs(newBytes), mibs(wm))
	}
	return nil
}

func mibs(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// guardShared puts the shared image mounted on l.dir from dev under the
// guard and admission, as one layer whose remaining limits are those of
// the layers in it.
func (l *Layers) guardShared(p *projectFS, dev string, o Options, fresh bool) {
	g := &imageFS{images: l.dataDir, overcommit: o.Overcommit, watermark: o.WatermarkBytes,
		owned: map[string]string{}, guard: map[string]*guarded{}}
	img := l.image()
	g.remaining = func() int64 {
		// Plus what its ext4 counts as used but the image has not
		// allocated (as share counts it): sparse metadata and the lazily
		// initialised journal fill in as they are written.
		var st unix.Statfs_t
		var ist unix.Stat_t
		var meta int64
		if unix.Statfs(l.dir, &st) == nil && unix.Stat(img, &ist) == nil {
			meta = max(0, int64(st.Blocks-st.Bfree)*st.Bsize-ist.Blocks*512)
		}
		return p.remaining(l.dir) + meta
	}
	register(g)
	g.watch(l.dir, dev, img, fresh)
	l.shared = g
}

// remaining returns what the layers in dir may still write: each one's
// limit less its usage.
func (p *projectFS) remaining(dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if !e.IsDir() || validName(e.Name()) != nil {
			continue
		}
		id, err := projectID(filepath.Join(dir, e.Name()))
		if err != nil || id < p.first {
			continue
		}
		if q, err := getProjectQuota(p.root, id); err == nil {
			n += max(0, int64(q.Bhardlimit)*1024-int64(q.Curspace))
		}
	}
	return n
}
