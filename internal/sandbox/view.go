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

// viewEvery is how often the daemon rewrites every sandbox's /proc/meminfo
// and /proc/stat (spec.View) from its workload's memory cgroup and the
// host's /proc/stat. A file cannot know when it is read (only a FUSE
// filesystem can, and warren has none), so the view is up to this old. One
// rewrite of /proc/meminfo costs about 30 us of the daemon's CPU per sandbox
// (docs/BENCHMARKS.md); done by each agent on its own timer it cost ten
// times that, in wakeups.
const viewEvery = time.Second

// viewer keeps the views of every sandbox current, from one goroutine.
type viewer struct {
	mu    sync.Mutex
	views map[string]*sandboxView
	stop  chan struct{} // closed by close; nil while no loop runs
}

// sandboxView is one sandbox's files; either may be nil.
type sandboxView struct {
	meminfo *os.File         // the sandbox's /proc/meminfo, open for writing
	mem     *procview.Memory // the workload's memory cgroup
	limit   uint64
	stat    *os.File // the sandbox's /proc/stat, open for writing
	cpus    []int
}

// refresh rewrites the sandbox's files; hostStat is the host's /proc/stat.
func (v *sandboxView) refresh(hostStat []byte) error {
	if v.meminfo != nil {
		b, err := v.mem.Meminfo(v.limit)
		if err != nil {
			return err
		}
		if err := procview.Rewrite(int(v.meminfo.Fd()), b); err != nil {
			return err
		}
	}
	if v.stat != nil && hostStat != nil {
		return procview.Rewrite(int(v.stat.Fd()), procview.Stat(hostStat, v.cpus))
	}
	return nil
}

func (v *sandboxView) close() {
	if v.meminfo != nil {
		v.mem.Close()
		v.meminfo.Close()
	}
	if v.stat != nil {
		v.stat.Close()
	}
}

// watch starts keeping sb's view current: /proc/meminfo for a workload
// limited to limit bytes (0: read from the file's MemTotal, for an adopted
// sandbox) and /proc/stat for the CPUs cpus. A sandbox without the files
// (from before the view, or without limits) is left alone.
func (w *viewer) watch(sb *Sandbox, limit uint64, cpus []int) (err error) {
	v := &sandboxView{cpus: cpus}
	defer func() {
		if err != nil {
			v.close()
		}
	}()
	if v.meminfo, err = openView(sb, spec.FDMeminfo); err != nil {
		return err
	}
	if v.meminfo != nil {
		if limit == 0 {
			if limit, err = memTotal(v.meminfo); err != nil {
				return err
			}
		}
		v.limit = limit
		dir, err := sb.cg.OpenMemoryDir()
		if err != nil {
			return err
		}
		v.mem, err = procview.OpenMemory(int(dir.Fd()), sb.rt.cgroups.Version())
		dir.Close() // mem keeps the two files it reads
		if err != nil {
			v.meminfo.Close()
			v.meminfo = nil
			return err
		}
	}
	if len(cpus) > 0 {
		if v.stat, err = openView(sb, spec.FDStat); err != nil {
			return err
		}
	}
	if v.meminfo == nil && v.stat == nil {
		return nil
	}
	// At once: init wrote the limit with no use.
	var host []byte
	if v.stat != nil {
		if host, err = os.ReadFile("/proc/stat"); err != nil {
			return err
		}
	}
	if err := v.refresh(host); err != nil {
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
	t := time.NewTicker(viewEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		w.mu.Lock()
		// The host's /proc/stat once for every sandbox with CPUs of its
		// own (nil without: their files keep their last content).
		var host []byte
		for _, v := range w.views {
			if v.stat != nil {
				host, _ = os.ReadFile("/proc/stat")
				break
			}
		}
		for name, v := range w.views {
			if err := v.refresh(host); err != nil {
				// Its cgroup or PID 1 is gone: the sandbox is on its way
				// out, and its destroy forgets it too.
				v.close()
				delete(w.views, name)
			}
		}
		w.mu.Unlock()
	}
}

// openView opens, for writing, the file the agent holds as fd (one bound
// over a /proc file of the sandbox), through /proc/<pid>/fd. It returns nil,
// nil for a sandbox without one. The file must be what init made: a regular
// file on the sandbox's scratch tmpfs owned by the sandbox's root.
func openView(sb *Sandbox, fd int) (*os.File, error) {
	p := "/proc/" + strconv.Itoa(sb.pid) + "/fd/" + strconv.Itoa(fd)
	f, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open the sandbox's view (%s): %w", p, err)
	}
	var st unix.Stat_t
	var fs unix.Statfs_t
	owner := uint32(0)
	if sb.rt.opts.UserNS {
		owner = sb.ids.HostID
	}
	if unix.Fstat(f, &st) != nil || unix.Fstatfs(f, &fs) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || fs.Type != unix.TMPFS_MAGIC || st.Uid != owner {
		unix.Close(f)
		return nil, fmt.Errorf("the sandbox's view (%s) is not the file its init made", p)
	}
	return os.NewFile(uintptr(f), "view"), nil
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
