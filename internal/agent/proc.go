package agent

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/spec"
)

// reaper is the only code in the agent that waits for children. As PID 1 the
// agent inherits every orphan of the sandbox; it reaps them all with wait4(-1)
// and hands the statuses of the processes it started to whoever waits for
// them. Nothing else may call wait (os.Process.Wait would race it: STACK.md,
// "Reaping as PID 1").
type reaper struct {
	mu      sync.Mutex // held across fork+register, so no status is reaped before its waiter exists
	waiters map[int]chan unix.WaitStatus
}

func newReaper() *reaper {
	r := &reaper{waiters: map[int]chan unix.WaitStatus{}}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, unix.SIGCHLD)
	go func() {
		for range ch {
			r.reap()
		}
	}()
	return r
}

func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
		if ch, ok := r.waiters[pid]; ok {
			delete(r.waiters, pid)
			ch <- ws
		}
	}
}

// managed reports whether pid is a child the agent started and still waits
// for.
func (r *reaper) managed(pid int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.waiters[pid]
	return ok
}

// spawner starts every process of the sandbox from one OS thread that sits in
// the workload cgroup (v1), or with clone3(CLONE_INTO_CGROUP) into it (v2), so
// children are born inside the workload's limits while the agent itself stays
// outside them.
type spawner struct {
	r     *reaper
	reqs  chan *spawnReq
	cgv2  int // v2 workload directory fd, or -1
	ready chan error
	// runAs, without a user namespace, is the unprivileged host user every
	// sandboxed process runs as.
	runAs *syscall.Credential
}

type spawnReq struct {
	argv    []string
	env     []string
	dir     string
	files   []uintptr
	setsid  bool
	setpgid bool
	setctty bool // stdin (files[0]) becomes the controlling terminal
	// cred, if set, is the process's own user instead of the session's.
	cred *syscall.Credential

	pid  int
	exit chan unix.WaitStatus
	err  error
	done chan struct{}
}

func newSpawner(r *reaper, c spec.Cgroup, runAs *syscall.Credential) (*spawner, error) {
	sp := &spawner{r: r, reqs: make(chan *spawnReq), cgv2: -1, ready: make(chan error, 1), runAs: runAs}
	var tasks []int
	if c.Version == 2 {
		sp.cgv2 = c.WorkloadFD(0)
	} else {
		for i := range c.WorkloadFDs() {
			tasks = append(tasks, c.WorkloadFD(i))
		}
	}
	go sp.loop(tasks)
	if err := <-sp.ready; err != nil {
		return nil, err
	}
	return sp, nil
}

func (sp *spawner) loop(tasks []int) {
	// This thread is never unlocked: it carries the workload cgroup
	// membership (v1) that every child inherits. The Go runtime never clones
	// new threads from a locked thread, so the membership does not spread
	// to the agent's other threads.
	runtime.LockOSThread()
	tid := strconv.Itoa(unix.Gettid())
	for _, fd := range tasks {
		if _, err := unix.Pwrite(fd, []byte(tid), 0); err != nil {
			sp.ready <- fmt.Errorf("join workload cgroup: %w", err)
			return
		}
		unix.Close(fd)
	}
	sp.ready <- nil
	for req := range sp.reqs {
		sp.spawn(req)
		close(req.done)
	}
}

func (sp *spawner) spawn(req *spawnReq) {
	cred := sp.runAs
	if req.cred != nil {
		cred = req.cred
	}
	attr := &syscall.ProcAttr{
		Dir:   req.dir,
		Env:   req.env,
		Files: req.files,
		Sys:   &syscall.SysProcAttr{Setsid: req.setsid, Setpgid: req.setpgid && !req.setsid, Setctty: req.setctty, Ctty: 0, Credential: cred},
	}
	if sp.cgv2 >= 0 {
		attr.Sys.UseCgroupFD = true
		attr.Sys.CgroupFD = sp.cgv2
	}
	sp.r.mu.Lock()
	defer sp.r.mu.Unlock()
	pid, err := syscall.ForkExec(req.argv[0], req.argv, attr)
	if err != nil {
		req.err = err
		return
	}
	ch := make(chan unix.WaitStatus, 1)
	sp.r.waiters[pid] = ch
	req.pid, req.exit = pid, ch
}

// start runs argv (argv[0] an absolute path) and returns its pid and a
// channel that receives its wait status.
func (sp *spawner) start(req *spawnReq) (int, <-chan unix.WaitStatus, error) {
	req.done = make(chan struct{})
	sp.reqs <- req
	<-req.done
	if req.err != nil {
		return 0, nil, spawnError(req.argv[0], req.err)
	}
	return req.pid, req.exit, nil
}

// lookPath finds name in the PATH of env, inside the sandbox.
func lookPath(name string, env []string, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if isExecutable(p) {
			return p, nil
		}
		return "", fmt.Errorf("%s: %w", name, unix.ENOENT)
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		if p := filepath.Join(d, name); isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found", name)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// procInfo is one process of the sandbox as /proc shows it.
type procInfo struct {
	pid, ppid int
}

// scanProcs lists the sandbox's processes.
func scanProcs() []procInfo {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]procInfo, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		out = append(out, procInfo{pid: pid, ppid: ppid})
	}
	return out
}

// lastPid reads the PID namespace's most recently allocated pid. Processes
// started later have larger pids (until the counter wraps at pid_max).
func lastPid() int {
	// One descriptor for the agent's life, read with pread: this runs on
	// every command.
	lastPidOnce.Do(func() {
		lastPidFD, _ = unix.Open("/proc/sys/kernel/ns_last_pid", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	})
	if lastPidFD < 0 {
		return 0
	}
	var buf [24]byte
	n, err := unix.Pread(lastPidFD, buf[:], 0)
	if err != nil || n <= 0 {
		return 0
	}
	v, _ := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	return v
}

var (
	lastPidOnce sync.Once
	lastPidFD   = -1
)

// killStarted kills every process that root started since the pid counter
// stood at since: root's descendants with a newer pid, and newer orphans that
// were handed to PID 1 (daemonized children), except the agent's own
// children. If killRoot is set, root itself dies too. It repeats until a scan
// finds nothing, so a fork bomb cannot outrun it.
func killStarted(r *reaper, root int, since int, killRoot bool) {
	for range 50 {
		wrapped := lastPid() < since
		procs := scanProcs()
		parent := make(map[int]int, len(procs))
		for _, p := range procs {
			parent[p.pid] = p.ppid
		}
		descends := func(pid int) bool {
			for i := 0; pid > 1 && i < 4096; i++ {
				if pid == root {
					return true
				}
				pid = parent[pid]
			}
			return false
		}
		killed := 0
		for _, p := range procs {
			if p.pid == 1 || (p.pid == root && !killRoot) {
				continue
			}
			newer := wrapped || p.pid > since
			target := p.pid == root ||
				(newer && descends(p.pid)) ||
				(newer && p.ppid == 1 && !r.managed(p.pid))
			if target {
				unix.Kill(p.pid, unix.SIGKILL)
				killed++
			}
		}
		if killed == 0 {
			return
		}
	}
}

func spawnError(path string, err error) error {
	if errors.Is(err, unix.EAGAIN) {
		return fmt.Errorf("start %s: the session's process limit is reached: %w", path, err)
	}
	return fmt.Errorf("start %s: %w", path, err)
}
