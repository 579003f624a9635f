package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/procview"
	"github.com/warrenhq/warren/internal/spec"
)

// meminfoEvery is how often the daemon rewrites every sandbox's
// /proc/meminfo (spec.View) from its workload's memory cgroup. A file cannot
// know when it is read (only a FUSE filesystem can, and warren has none), so
// the view is up to this old. One rewrite costs about 30 µs of the daemon's
// CPU per sandbox (docs/BENCHMARKS.md); done by each agent on its own timer
// it cost ten times that, in wakeups.
const meminfoEvery = time.Second

// viewer keeps the /proc/meminfo of every sandbox with a memory limit
// current, from one goroutine.
type viewer struct {
	mu    sync.Mutex
	views map[string]*meminfoView
	stop  chan struct{} // closed by close; nil while no loop runs
}

type meminfoView struct {
	file  *os.File         // the sandbox's /proc/meminfo, open for writing
	mem   *procview.Memory // the workload's memory cgroup
	limit uint64
}

func (v *meminfoView) refresh() error {
	b, err := v.mem.Meminfo(v.limit)
	if err != nil {
		return err
	}
	return procview.Rewrite(int(v.file.Fd()), b)
}

func (v *meminfoView) close() {
	v.mem.Close()
	v.file.Close()
}

// watch starts refreshing sb's /proc/meminfo; limit 0 reads the limit
// from the file's MemTotal (an adopted sandbox). A sandbox without the view
// is left alone.
func (w *viewer) watch(sb *Sandbox, limit uint64) error {
	f, err := openMeminfo(sb)
	if f == nil || err != nil {
		return err
	}
	if limit == 0 {
		if limit, err = memTotal(f); err != nil {
			f.Close()
			return err
		}
	}
	dir, err := sb.cg.OpenMemoryDir()
	if err != nil {
		f.Close()
		return err
	}
	mem, err := procview.OpenMemory(int(dir.Fd()), sb.rt.cgroups.Version())
	dir.Close() // mem keeps the two files it reads
	if err != nil {
		f.Close()
		return err
	}
	v := &meminfoView{file: f, mem: mem, limit: limit}
	// At once: init wrote the limit with no use.
	if err := v.refresh(); err != nil {
		v.close()
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old := w.views[sb.name]; old != nil {
		old.close()
	}
	w.views[sb.name] = v
	if w.stop == nil {
		w.stop = make(chan struct{})
		go w.loop(w.stop)
	}
	return nil
}

// forget stops refreshing sandbox name's view.
func (w *viewer) forget(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if v := w.views[name]; v != nil {
		v.close()
		delete(w.views, name)
	}
}

// close stops the loop and lets go of every view.
func (w *viewer) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		close(w.stop)
		w.stop = nil
	}
	for name, v := range w.views {
		v.close()
		delete(w.views, name)
	}
}

func (w *viewer) loop(stop chan struct{}) {
	t := time.NewTicker(meminfoEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		w.mu.Lock()
		for name, v := range w.views {
			if err := v.refresh(); err != nil {
				// Its cgroup or PID 1 is gone: the sandbox is on its way
				// out, and its destroy forgets it too.
				v.close()
				delete(w.views, name)
			}
		}
		w.mu.Unlock()
	}
}

// openMeminfo opens, for writing, the file bound over sb's /proc/meminfo,
// through the agent's descriptor spec.FDMeminfo. It returns nil, nil for a
// sandbox without one. The file must be what init made: a regular file on
// the sandbox's scratch tmpfs owned by the sandbox's root.
func openMeminfo(sb *Sandbox) (*os.File, error) {
	p := "/proc/" + strconv.Itoa(sb.pid) + "/fd/" + strconv.Itoa(spec.FDMeminfo)
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open the sandbox's /proc/meminfo: %w", err)
	}
	var st unix.Stat_t
	var fs unix.Statfs_t
	owner := uint32(0)
	if sb.rt.opts.UserNS {
		owner = sb.ids.HostID
	}
	if unix.Fstat(fd, &st) != nil || unix.Fstatfs(fd, &fs) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || fs.Type != unix.TMPFS_MAGIC || st.Uid != owner {
		unix.Close(fd)
		return nil, fmt.Errorf("the sandbox's /proc/meminfo is not the file its init made")
	}
	return os.NewFile(uintptr(fd), "meminfo"), nil
}

// memTotal reads MemTotal from a rendered /proc/meminfo.
func memTotal(f *os.File) (uint64, error) {
	buf := make([]byte, 256)
	n, _ := f.ReadAt(buf, 0)
	line, _, _ := bytes.Cut(buf[:n], []byte{'\n'})
	v, ok := bytes.CutPrefix(line, []byte("MemTotal:"))
	v, _ = bytes.CutSuffix(v, []byte(" kB"))
	kb, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
	if !ok || err != nil {
		return 0, fmt.Errorf("the sandbox's /proc/meminfo starts %q", line)
	}
	return kb << 10, nil
}
