// Package sandbox is the host side of isolation: it starts a sandbox (a
// re-exec of this binary as `warren init` in new namespaces), places it in
// its cgroup, connects to its agent, and tears everything down again. It
// knows nothing about HTTP, tenants or sessions' lifecycles.
package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/cgroup"
	"github.com/warrenhq/warren/internal/cleanup"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/quota"
	"github.com/warrenhq/warren/internal/spec"
)

// DefaultCaps are the capabilities sandboxed root keeps: Docker's default
// set without CAP_MKNOD (no device nodes; there is no device cgroup rule to
// make them harmless), CAP_NET_RAW (no raw packets) and CAP_AUDIT_WRITE.
var DefaultCaps = []int{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_FSETID,
	unix.CAP_KILL, unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETPCAP,
	unix.CAP_NET_BIND_SERVICE, unix.CAP_SYS_CHROOT, unix.CAP_SETFCAP,
}

// DefaultMaskedPaths are hidden inside every sandbox (Docker's list): kernel
// memory, keys, timers and hardware details of the host. Also the host's
// virtual block devices: a loop device's loop/backing_file names the file
// behind it on the host, which for warren's layer and workspace images is a
// path in the data directory (every session's, and other daemons').
var DefaultMaskedPaths = []string{
	"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
	"/proc/latency_stats", "/proc/sched_debug", "/proc/scsi", "/proc/timer_list",
	"/proc/timer_stats", "/sys/devices/virtual/powercap", "/sys/firmware",
	"/sys/devices/virtual/block",
}

// DefaultReadOnlyPaths are read-only inside every sandbox.
var DefaultReadOnlyPaths = []string{
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
}

// Options are the runtime's isolation settings.
type Options struct {
	// UserNS runs every sandbox in its own user namespace with its own block
	// of host ids (the default). Without it sandboxed code runs as an
	// unprivileged host user instead of root.
	UserNS bool
	// IDBase is the first host id handed out; 0 means DefaultIDBase. It
	// must sit on the host-wide grid (see CheckIDBase).
	IDBase uint32
	// RunDir holds what the daemons of this host share: the registry of
	// id blocks and the locks on cgroup parents. "" means DefaultRunDir.
	RunDir string
	// Seccomp is the compiled filter every sandbox gets (see package
	// seccomp), or nil for none.
	Seccomp []byte
	// MaskedPaths and ReadOnlyPaths; nil means the defaults.
	MaskedPaths, ReadOnlyPaths []string
	// Layers holds the sandboxes' writable layers with a size limit each;
	// nil keeps them in the state directory, unlimited.
	Layers *quota.Layers
	// Program is the executable started as each sandbox's init, which
	// re-executes it as the agent: the small cmd/warren-agent (see package
	// agentbin). "" runs this very binary again (/proc/self/exe), as test
	// binaries and builds without the embedded agent do.
	Program string
	// ProgramFile, if set, is that program already open, such as a sealed
	// memfd (agentbin.Memfd: no file on disk, and it runs where the data
	// directory is mounted noexec); it takes precedence over Program. The
	// runtime takes it over.
	ProgramFile *os.File
}

// Runtime starts sandboxes.
type Runtime struct {
	dir     string // sessions' state: <data>/sessions
	cgroups *cgroup.Hierarchy
	exe     string
	prog    *os.File // exe, open: every sandbox's init execs the agent from it
	opts    Options

	removals sync.WaitGroup // Destroy's background removals
	rmu      sync.Mutex
	removing map[string]bool // names being removed in the background
	ids      *idAllocator
	cpus     *cpuPlacer
	views    viewer
	// hostNS idmaps host directories (see hostdirs.go); nil without user
	// namespaces.
	hostNS *os.File
	unlock func() // lets go of the cgroup parent
}

// NewRuntime returns a runtime that keeps per-sandbox state under dir and
// places sandboxes under the cgroup hierarchy h.
func NewRuntime(dir string, h *cgroup.Hierarchy, o Options) (*Runtime, error) {
	if err := CheckPath(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, err
	}
	// Sandboxes' roots are unprivileged host users: they may pass through
	// (not list) the state directory to reach their own subdirectory.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	if o.RunDir == "" {
		o.RunDir = DefaultRunDir
	}
	if o.IDBase == 0 {
		o.IDBase = DefaultIDBase
	}
	ids, err := newIDAllocator(o.IDBase, filepath.Join(o.RunDir, "idblocks"), dir)
	if err != nil {
		return nil, err
	}
	// Before anything touches the parent: another daemon's sandboxes may
	// live there.
	unlock, err := lockParent(o.RunDir, h.Parent(), dir)
	if err != nil {
		return nil, err
	}
	c := cleanup.Make(unlock)
	defer c.Clean()
	if err := h.Setup(); err != nil {
		return nil, err
	}
	if o.UserNS {
		if err := checkTraversable(dir); err != nil {
			return nil, err
		}
		if o.Layers != nil {
			// The layer store holds each sandbox's upper directory.
			if err := os.Chmod(o.Layers.Dir(), 0o711); err != nil {
				return nil, err
			}
			if err := checkTraversable(filepath.Join(o.Layers.Dir(), "x")); err != nil {
				return nil, err
			}
		}
	}
	exe, prog := o.Program, (*os.File)(nil)
	switch {
	case o.ProgramFile != nil:
		// Far above the descriptors a start hands to init: the forked
		// child moves those onto 0, 1, 2 and up before it executes exe,
		// and must not overwrite this one on the way.
		fd, err := unix.FcntlInt(o.ProgramFile.Fd(), unix.F_DUPFD_CLOEXEC, 1000)
		o.ProgramFile.Close()
		if err != nil {
			return nil, fmt.Errorf("the sandbox program: %w", err)
		}
		prog = os.NewFile(uintptr(fd), "warren-agent")
		exe = "/proc/self/fd/" + strconv.Itoa(fd)
	case exe == "":
		exe = "/proc/self/exe"
	case o.UserNS:
		// The sandbox's root, an unprivileged host user, executes it.
		if err := checkTraversable(exe); err != nil {
			return nil, err
		}
	}
	if o.MaskedPaths == nil {
		o.MaskedPaths = DefaultMaskedPaths
	}
	if o.ReadOnlyPaths == nil {
		o.ReadOnlyPaths = DefaultReadOnlyPaths
	}
	if prog == nil {
		var err error
		if prog, err = os.Open(exe); err != nil {
			return nil, fmt.Errorf("open the sandbox program: %w", err)
		}
	}
	// Every sandbox's user namespace takes its RLIMIT_MSGQUEUE and
	// RLIMIT_SIGPENDING maxima from this process at the clone: capped, they
	// bound each session's message queues and queued signals as a whole.
	if err := spec.CapRlimits(); err != nil {
		prog.Close()
		return nil, fmt.Errorf("cap the limits sandboxes inherit: %w", err)
	}
	var hostNS *os.File
	if o.UserNS {
		var err error
		if hostNS, err = hostDirsUserNS(exe); err != nil {
			prog.Close()
			return nil, err
		}
	}
	c.Release()
	return &Runtime{dir: dir, cgroups: h, exe: exe, prog: prog, opts: o, ids: ids, cpus: newCPUPlacer(), views: viewer{views: map[string]*sandboxView{}}, hostNS: hostNS, unlock: unlock, removing: map[string]bool{}}, nil
}

// Close waits for background removals and lets go of the sandbox program
// and the cgroup parent; running sandboxes keep theirs.
func (r *Runtime) Close() error {
	r.Wait()
	r.views.close()
	if r.hostNS != nil {
		r.hostNS.Close()
	}
	r.unlock()
	return r.prog.Close()
}

// checkTraversable makes sure an unprivileged user can pass through every
// directory above dir: a sandbox's root must reach its own state directory.
func checkTraversable(dir string) error {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("sandboxes' roots are unprivileged host users and must be able to pass through %s (mode %04o): give it o+x, for example mode 0711", d, fi.Mode().Perm())
		}
		if d == "/" {
			return nil
		}
	}
}

// Options returns the runtime's isolation settings.
func (r *Runtime) Options() Options { return r.opts }

// Cgroups returns the runtime's cgroup hierarchy.
func (r *Runtime) Cgroups() *cgroup.Hierarchy { return r.cgroups }

// Dir is where sandboxes keep their state.
func (r *Runtime) Dir() string { return r.dir }

var badPathChars = regexp.MustCompile(`[,:\\\x00\n]`)

// CheckPath refuses paths that cannot go into overlayfs mount options.
func CheckPath(p string) error {
	if badPathChars.MatchString(p) {
		return fmt.Errorf("path %q contains a character overlayfs cannot take (comma, colon, backslash)", p)
	}
	return nil
}

// Config describes one sandbox to start.
type Config struct {
	// Name is unique on this host; it names the state directory and cgroup.
	Name     string
	Hostname string
	// Lower are the image's read-only layers, topmost first.
	Lower []string
	// Overlays are host directories mounted as extra writable overlays
	// (the base image's /usr): each gets its own upper layer.
	Overlays []Overlay
	BaseDir  string
	Env      []string
	Shell    string
	Limits   cgroup.Limits
	// DiskBytes caps the writable layer (0: no cap). It needs Options.Layers.
	DiskBytes int64
	// User is who sandboxed processes run as (see spec.Sandbox.User).
	User string
	// BackgroundLogBytes bounds the background output log.
	BackgroundLogBytes int

	// Deferred starts the sandbox with its shell not started: that waits
	// for Claim, which also gives it its hostname and environment. A warm
	// pool's sandboxes start this way.
	Deferred bool

	// Binds are host directories mounted into the sandbox (a workspace),
	// idmapped like the layers: files owned by host ids 0-65535 belong to
	// the sandbox's ids 0-65535. They need a user namespace.
	Binds []Bind
}

// Overlay is a host directory shown at Target, writable per sandbox.
type Overlay struct {
	Source, Target string
	// Lower are more read-only layers above Source, topmost first.
	Lower []string
}

// Bind is a host directory shown at Target, shared with the host: writes
// land in Source.
type Bind struct {
	Source, Target string
	ReadOnly       bool
}

// sendLayers makes an idmapped mount of each layer, mapping the canonical
// ids of images, snapshots and workspaces onto the sandbox's user namespace
// (their root shows as the sandbox's root), and those listed in hostDirs,
// the host's own files, through hostNS, which maps none of their ids into
// the sandbox (see hostdirs.go). It sends them to the sandbox's init. Only
// the host's root may idmap the host's filesystems, so the daemon does it.
func sendLayers(pid int, sock *os.File, sources []string, readOnly, hostDirs map[int]bool, hostNS *os.File) error {
	userns, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the sandbox's user namespace: %w", err)
	}
	defer unix.Close(userns)
	fds := make([]int, 0, len(sources))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for i, src := range sources {
		fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("clone mount of %s: %w", src, err)
		}
		fds = append(fds, fd)
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOSUID, Userns_fd: uint64(userns)}
		if hostDirs[i] {
			attr.Userns_fd = uint64(hostNS.Fd())
		}
		if readOnly[i] {
			attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
		}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
			return fmt.Errorf("idmap %s: %w", src, err)
		}
	}
	if err := unix.Sendmsg(int(sock.Fd()), []byte{0}, unix.UnixRights(fds...), nil, 0); err != nil {
		return fmt.Errorf("send layers to the sandbox: %w", err)
	}
	return nil
}

// Sandbox is a running sandbox.
type Sandbox struct {
	name string
	dir  string
	cg   *cgroup.Session
	pid  int
	ids  spec.IDRange
	rt   *Runtime

	conn *agentproto.Conn

	pidfd *os.File
	done  chan struct{} // closed when PID 1 has exited and was reaped
	// adopted sandboxes were started by an earlier daemon: PID 1 is not
	// our child, so its end is seen on the pidfd but not reaped here.
	adopted bool

	mu      sync.Mutex
	exitErr error
}

// Start creates and starts a sandbox; on failure nothing of it remains.
// The steps, each undone in reverse if a later one fails: a block of host
// ids, the state directory and writable layers, the spec, the cgroup, init
// (forked into its namespaces and handed its layers), init's progress
// until it became the agent, and the agent's hello.
func (r *Runtime) Start(ctx context.Context, c *Config) (*Sandbox, error) {
	if err := checkName(c.Name); err != nil {
		return nil, err
	}
	ids, err := r.ids.get(c.Name)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrResourceExhausted, "%v", err)
	}
	cu := cleanup.Make(func() { r.ids.put(c.Name, ids) })
	defer cu.Clean()
	dir, layer, err := r.makeDirs(c, ids, &cu)
	if err != nil {
		return nil, err
	}
	// While init starts: it needs them only once it has its layers.
	given := r.giveLocalDirs(c, layer, ids)
	cu.Add(func() { _ = given() }) // a failed start waits for the copy; its error is moot then
	cu.Add(func() { r.cpus.release(c.Name) })
	sp, err := r.buildSpec(c, ids, dir, layer)
	if err != nil {
		return nil, err
	}
	if err := writeIDs(dir, ids); err != nil {
		return nil, err
	}
	cg, err := r.makeCgroup(c, ids, &cu)
	if err != nil {
		return nil, err
	}
	sb, status, err := r.spawnInit(sp, dir, ids, cg, &cu, given)
	if err != nil {
		return nil, err
	}
	defer status.Close()
	if err := sb.awaitInit(ctx, status, cg); err != nil {
		return nil, err
	}
	// A deferred sandbox is ready once its agent answers: a claim then
	// costs a hello, not the agent's start.
	if err := sb.connect(ctx, agentproto.Hello{Defer: c.Deferred}); err != nil {
		return nil, err
	}
	if v := sp.View; v.MemoryBytes > 0 || len(v.CPUs) > 0 {
		if err := r.views.watch(sb, uint64(v.MemoryBytes), v.CPUs); err != nil {
			return nil, err
		}
	}
	cu.Release()
	return sb, nil
}

// checkName refuses a sandbox name that is no plain file name.
func checkName(name string) error {
	if name == "" || filepath.Base(name) != name || name[0] == '.' {
		return fmt.Errorf("bad sandbox name %q", name)
	}
	return nil
}

// makeDirs creates the sandbox's state directory and its writable layers:
// in the size-limited layer store when there is one, else in the state
// directory. It returns the state directory and the directory that holds
// the writable layers. The daemon (host root) owns every directory but the
// overlays' upper and work directories: with a user namespace those belong
// to the sandbox's root (ids.HostID on the host), which mounts the
// overlays, and that is all it owns; the state and layer directories only
// let it pass (see passableBy). An escaped sandbox process can so neither
// replace the agent's socket in the state directory nor plant anything
// beside it, and another sandbox's cannot even reach them.
func (r *Runtime) makeDirs(c *Config, ids spec.IDRange, cu *cleanup.Cleanup) (dir, layer string, err error) {
	dir = filepath.Join(r.dir, c.Name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("create sandbox directory: %w", err)
	}
	// Not dir itself: a failed return sets it to "" before cu runs.
	sandboxDir := dir
	cu.Add(func() { os.RemoveAll(sandboxDir) })
	if err := r.passableBy(dir, ids); err != nil {
		return "", "", err
	}
	var owned []string
	mkdir := func(d string, own bool) error {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
		if own {
			owned = append(owned, d)
		}
		return nil
	}
	for _, d := range []string{"rootfs", "layers"} {
		if err := mkdir(filepath.Join(dir, d), false); err != nil {
			return "", "", err
		}
	}
	layer = dir
	if r.opts.Layers != nil {
		if layer, err = r.opts.Layers.Create(c.Name, c.DiskBytes); err != nil {
			return "", "", fmt.Errorf("create writable layer: %w", err)
		}
		cu.Add(func() { r.opts.Layers.Remove(c.Name) })
		if err := r.passableBy(layer, ids); err != nil {
			return "", "", err
		}
	} else if c.DiskBytes > 0 {
		return "", "", errdefs.New(errdefs.ErrInvalidArgument, "this daemon has no disk quota support; leave the disk limit unset")
	}
	for _, d := range []string{"upper", "work"} {
		if err := mkdir(filepath.Join(layer, d), true); err != nil {
			return "", "", err
		}
	}
	for i := range c.Overlays {
		od := overlayDir(layer, i)
		if err := os.Mkdir(od, 0o711); err != nil {
			return "", "", err
		}
		for _, d := range []string{od + "/upper", od + "/work"} {
			if err := mkdir(d, true); err != nil {
				return "", "", err
			}
		}
	}
	if r.opts.UserNS {
		for _, d := range owned {
			if err := os.Lchown(d, int(ids.HostID), int(ids.HostID)); err != nil {
				return "", "", fmt.Errorf("hand %s to the sandbox's root: %w", d, err)
			}
		}
	}
	return dir, layer, nil
}

// passableBy makes d, a directory of the daemon's, one that the sandbox's
// root (with a user namespace) may pass through and nobody else may: init
// reaches its mount points and writable layers through it, and an escaped
// process of another sandbox must not reach them (the layers' upper
// directories are 0755, as the sandbox's / is). Host root owns it, the
// block's first gid is its group, mode 0710.
func (r *Runtime) passableBy(d string, ids spec.IDRange) error {
	if !r.opts.UserNS {
		return os.Chmod(d, 0o700) // init passes as host root
	}
	if err := os.Lchown(d, 0, int(ids.HostID)); err != nil {
		return fmt.Errorf("hand %s to the sandbox's group: %w", d, err)
	}
	return os.Chmod(d, 0o710)
}

// overlayDir holds the writable layer of the i-th extra overlay.
func overlayDir(layer string, i int) string { return filepath.Join(layer, "ov"+strconv.Itoa(i)) }

// buildSpec is the spec init and agent start from, for a sandbox whose
// state lies in dir and writable layers in layer.
func (r *Runtime) buildSpec(c *Config, ids spec.IDRange, dir, layer string) (*spec.Sandbox, error) {
	sp := &spec.Sandbox{
		Version:  spec.Version,
		ID:       c.Name,
		Hostname: c.Hostname,
		Root: spec.Root{
			Lower:    c.Lower,
			Upper:    filepath.Join(layer, "upper"),
			Work:     filepath.Join(layer, "work"),
			Target:   filepath.Join(dir, "rootfs"),
			Volatile: true,
		},
		BaseDir:            c.BaseDir,
		Env:                c.Env,
		Shell:              c.Shell,
		Caps:               DefaultCaps,
		BackgroundLogBytes: c.BackgroundLogBytes,
		MaskedPaths:        r.opts.MaskedPaths,
		ReadOnlyPaths:      r.opts.ReadOnlyPaths,
		Seccomp:            r.opts.Seccomp,
		User:               c.User,
		View:               spec.View{MemoryBytes: c.Limits.MemoryBytes, CPUs: r.cpus.place(c.Name, c.Limits.CPUs)},
	}
	if r.opts.UserNS {
		sp.UserNS = &ids
	} else {
		sp.RunAs = &ids
	}
	for i, o := range c.Overlays {
		od := overlayDir(layer, i)
		sp.Mounts = append(sp.Mounts, spec.Mount{Kind: "overlay", Source: o.Source, Target: o.Target, Upper: od + "/upper", Work: od + "/work", Lower: o.Lower})
	}
	if len(c.Binds) > 0 && !r.opts.UserNS {
		return nil, errdefs.New(errdefs.ErrInvalidArgument, "host directories can be mounted into sandboxes only with user namespaces")
	}
	for _, b := range c.Binds {
		sp.Mounts = append(sp.Mounts, spec.Mount{Kind: "bind", Source: b.Source, Target: b.Target, ReadOnly: b.ReadOnly})
	}
	for _, p := range append(sp.Layers(), dir, layer) {
		if err := CheckPath(p); err != nil {
			return nil, err
		}
	}
	return sp, nil
}

// makeCgroup creates the sandbox's cgroup with its limits.
func (r *Runtime) makeCgroup(c *Config, ids spec.IDRange, cu *cleanup.Cleanup) (*cgroup.Session, error) {
	cg, err := r.cgroups.NewSession(c.Name, c.Limits)
	if err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	cu.Add(func() { cg.Kill(); cg.Destroy() })
	if r.opts.UserNS {
		// clone3(CLONE_INTO_CGROUP) by the agent is checked against its
		// own credentials: on v2 the workload is delegated to its root.
		if err := cg.Delegate(int(ids.HostID), int(ids.HostID)); err != nil {
			return nil, fmt.Errorf("delegate cgroup: %w", err)
		}
	}
	return cg, nil
}

// spawnInit forks `warren init` into the sandbox's new namespaces with
// the descriptors spec documents, watches it, and sends it its layers. It
// returns the read end of init's status pipe; the parent's copies of
// everything else the child got are closed when it returns.
func (r *Runtime) spawnInit(sp *spec.Sandbox, dir string, ids spec.IDRange, cg *cgroup.Session, cu *cleanup.Cleanup, given func() error) (_ *Sandbox, status *os.File, err error) {
	cgFiles, err := cg.Open()
	if err != nil {
		return nil, nil, err
	}
	defer cgFiles.Close()
	sp.Cgroup = spec.Cgroup{Version: r.cgroups.Version(), Hierarchies: len(cgFiles.AgentProcs)}
	specFile, err := specMemfd(sp)
	if err != nil {
		return nil, nil, err
	}
	defer specFile.Close()
	ln, err := listen(dir)
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	// Init's end closes in any case; ours goes on to the caller unless
	// something below fails.
	defer statusW.Close()
	own := cleanup.Make(func() { statusR.Close() })
	defer own.Clean()
	logFile, err := os.OpenFile(filepath.Join(dir, "agent.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	defer logFile.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, nil, err
	}
	defer null.Close()
	// The layers travel to a sandbox in a user namespace as idmapped
	// mounts over this socket.
	mountsR, mountsW := null, (*os.File)(nil)
	if r.opts.UserNS {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, nil, err
		}
		mountsR, mountsW = os.NewFile(uintptr(pair[1]), "mounts"), os.NewFile(uintptr(pair[0]), "mounts")
		defer mountsR.Close()
		defer mountsW.Close()
	}
	files := []uintptr{null.Fd(), logFile.Fd(), logFile.Fd(), specFile.Fd(), statusW.Fd(), ln.Fd(), mountsR.Fd()}
	for _, f := range cgFiles.All() {
		files = append(files, f.Fd())
	}
	files = append(files, r.prog.Fd()) // spec.ProgramFD
	pid, pidfd, err := r.forkInit(ids, files)
	if err != nil {
		return nil, nil, err
	}
	sb := &Sandbox{name: sp.ID, dir: dir, cg: cg, pid: pid, done: make(chan struct{}), ids: ids, rt: r}
	if err := sb.watch(pidfd); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil) // reap what was just killed
		return nil, nil, err
	}
	cu.Add(sb.kill)
	if r.opts.UserNS {
		sources, readOnly, hostDirs := sp.Layers(), map[int]bool{}, map[int]bool{}
		for i, m := range sp.Mounts {
			if m.ReadOnly {
				readOnly[len(sp.Root.Lower)+i] = true
			}
			// An overlay's source is a host directory (Config.Overlays);
			// a bind's is a workspace, with canonical ids.
			if m.Kind == "overlay" {
				hostDirs[len(sp.Root.Lower)+i] = true
			}
		}
		if err := given(); err != nil {
			return nil, nil, err
		}
		if err := sendLayers(pid, mountsW, sources, readOnly, hostDirs, r.hostNS); err != nil {
			return nil, nil, err
		}
	}
	own.Release()
	return sb, statusR, nil
}

// forkInit starts `warren init` with files as its descriptors 0, 1, 2...,
// in new mount, PID, UTS, IPC and network namespaces (and a user
// namespace, owned by ids, when the runtime uses them). It returns init's
// pid and a pidfd for it.
func (r *Runtime) forkInit(ids spec.IDRange, files []uintptr) (pid, pidfd int, err error) {
	pidfd = -1
	sys := &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWNET,
		Setsid:     true,
		PidFD:      &pidfd,
	}
	attr := &syscall.ProcAttr{Env: []string{}, Files: files, Sys: sys}
	if !r.opts.UserNS {
		if pid, err = syscall.ForkExec(r.exe, []string{"warren", "init"}, attr); err != nil {
			return 0, -1, fmt.Errorf("start sandbox init: %w", err)
		}
		return pid, pidfd, nil
	}
	// The user namespace comes first in the clone, so it owns every other
	// new namespace; init is its root (ids.HostID outside).
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(ids.HostID), Size: int(ids.Size)}}
	sys.Cloneflags |= unix.CLONE_NEWUSER
	sys.UidMappings, sys.GidMappings = m, m
	sys.GidMappingsEnableSetgroups = true
	sys.Credential = &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true}
	// The kernel charges per-user counters (inotify instances and
	// watches, message queue bytes, queued signals, processes) in a user
	// namespace up to its owner in the parent namespace, under the
	// parent's limits: the user namespace's owner is whoever created it.
	// Created by the daemon, every sandbox would bear on host root's
	// counters, and one session could take all of host root's inotify
	// instances. So the clone is made with the block's first id as the
	// effective uid and gid, on a thread of its own: credentials are per
	// thread in Linux, and the thread is never given back (the goroutine
	// ends locked, so the runtime ends the thread).
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := actAs(ids.HostID); err != nil {
			done <- fmt.Errorf("take the sandbox's ids to create its user namespace: %w", err)
			return
		}
		var err error
		pid, err = syscall.ForkExec(r.exe, []string{"warren", "init"}, attr)
		done <- err
	}()
	if err := <-done; err != nil {
		return 0, -1, fmt.Errorf("start sandbox init: %w", err)
	}
	return pid, pidfd, nil
}

// actAs makes the calling thread's effective uid and gid id, keeping its
// capabilities: a user namespace it creates is then owned by id, and it can
// still write that namespace's id maps and create the other namespaces.
// Raw system calls: Go's Setresuid would change every thread of the daemon.
// The real and saved ids stay 0, so the permitted capabilities survive the
// change; only the effective set is cleared, and is raised again.
func actAs(id uint32) error {
	keep := ^uintptr(0) // -1: leave as is
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, keep, uintptr(id), keep); e != 0 {
		return fmt.Errorf("setresgid: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, keep, uintptr(id), keep); e != 0 {
		return fmt.Errorf("setresuid: %w", e)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Effective, data[1].Effective = data[0].Permitted, data[1].Permitted
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// helloError keeps the class of an error the agent answered the hello with
// (an unknown user is the request's fault), and wraps anything else.
func helloError(err error) error {
	if errdefs.ClassOf(err) == errdefs.ErrInvalidArgument {
		return err
	}
	return fmt.Errorf("agent hello: %w", err)
}

func specMemfd(sp *spec.Sandbox) (*os.File, error) {
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	// Sealed: nothing can change the spec after the daemon wrote it.
	return spec.SealedMemfd("warren-spec", b, false)
}

// socketPath returns a path to the agent socket of the sandbox in dir that
// fits sockaddr_un: through /proc/self/fd of an open directory, so a long
// data directory does not matter. The caller keeps d open while using it.
func socketPath(dir string) (string, *os.File, error) {
	d, err := os.Open(dir)
	if err != nil {
		return "", nil, err
	}
	return "/proc/self/fd/" + strconv.Itoa(int(d.Fd())) + "/agent.sock", d, nil
}

// listen binds the agent's socket in the sandbox's directory on the host
// side: sandboxed code has no path to it. The returned file is the bound
// descriptor to pass to init, which listens on it.
func listen(dir string) (*os.File, error) {
	p, d, err := socketPath(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: p}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind agent socket: %w", err)
	}
	// Init makes it listen (see checkPeer).
	return os.NewFile(uintptr(fd), "agent-listener"), nil
}

// watch reaps PID 1 when it exits, without holding a thread while waiting:
// the pidfd becomes readable in the runtime's poller.
func (sb *Sandbox) watch(pidfd int) error {
	if pidfd < 0 {
		return errors.New("kernel gave no pidfd")
	}
	if err := unix.SetNonblock(pidfd, true); err != nil {
		unix.Close(pidfd)
		return err
	}
	sb.pidfd = os.NewFile(uintptr(pidfd), "pidfd")
	rc, err := sb.pidfd.SyscallConn()
	if err != nil {
		return err
	}
	go func() {
		var ws unix.WaitStatus
		var why string
		err := rc.Read(func(fd uintptr) bool {
			if sb.adopted {
				// A pidfd polls readable once the process has exited.
				n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
				return n > 0 || (err != nil && !errors.Is(err, unix.EINTR))
			}
			pid, err := unix.Wait4(sb.pid, &ws, unix.WNOHANG, nil)
			return pid == sb.pid || (err != nil && !errors.Is(err, unix.EINTR))
		})
		switch {
		case err != nil: // the pidfd was closed: Detach
			why = "sandbox was detached from this daemon"
		case sb.adopted:
			why = "sandbox exited"
		default:
			why = fmt.Sprintf("sandbox exited (%s)", describeWait(ws))
		}
		sb.mu.Lock()
		if sb.exitErr == nil {
			sb.exitErr = errors.New(why)
		}
		sb.mu.Unlock()
		close(sb.done)
	}()
	return nil
}

func describeWait(ws unix.WaitStatus) string {
	if ws.Signaled() {
		return "killed by " + unix.SignalName(ws.Signal())
	}
	return "status " + strconv.Itoa(ws.ExitStatus())
}

// awaitInit follows init's progress until it became the agent.
func (sb *Sandbox) awaitInit(ctx context.Context, status *os.File, cg *cgroup.Session) error {
	type result struct {
		msg []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var buf bytes.Buffer
		b := make([]byte, 4096)
		for {
			n, err := status.Read(b)
			buf.Write(b[:n])
			if n > 0 && buf.Len() == 1 && buf.Bytes()[0] == spec.StatusMoved {
				// init left S: on v2 the workload's controllers can be
				// enabled now, while init builds the root filesystem.
				if err := cg.Activate(); err != nil {
					ch <- result{err: fmt.Errorf("apply limits: %w", err)}
					return
				}
			}
			if err != nil {
				ch <- result{msg: buf.Bytes()}
				return
			}
		}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		msg := r.msg
		if len(msg) > 0 && msg[0] == spec.StatusMoved {
			msg = msg[1:]
		}
		if len(msg) == 0 {
			return nil // the status pipe closed on exec: the agent runs
		}
		if msg[0] == spec.StatusError {
			var f spec.InitFailure
			if json.Unmarshal(msg[1:], &f) == nil {
				return fmt.Errorf("sandbox init failed at %q: %s", f.Step, f.Error)
			}
		}
		return fmt.Errorf("sandbox init failed: %q", msg)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// connect dials the agent and says hello (see agentproto.Hello).
func (sb *Sandbox) connect(ctx context.Context, h agentproto.Hello) error {
	p, d, err := socketPath(sb.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	var dialer net.Dialer
	c, err := dialer.DialContext(ctx, "unix", p)
	if err != nil {
		return fmt.Errorf("connect to agent: %w", err)
	}
	if err := sb.checkPeer(c.(*net.UnixConn)); err != nil {
		c.Close()
		return err
	}
	sb.conn = agentproto.NewConn(c, nil)
	if err := sb.hello(ctx, h); err != nil {
		sb.conn.Close()
		return err
	}
	return nil
}

// checkPeer makes sure the agent's socket is the one PID 1 listens on:
// SO_PEERCRED names the process that called listen. A socket planted in its
// place by anyone but host root (a process of another sandbox that escaped,
// or of this one with a way out, even as the same uid) is refused before
// the daemon says a word to it.
func (sb *Sandbox) checkPeer(c *net.UnixConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("read the agent socket's credentials: %w", cerr)
	}
	switch {
	case int(cred.Pid) == sb.pid && (!sb.rt.opts.UserNS || cred.Uid == sb.ids.HostID):
		return nil
	case cred.Uid == 0:
		// Host root listened: a daemon from before init made the socket
		// listen, whose sandboxes are adopted across an upgrade. Only host
		// root can be uid 0 here (a sandbox's root is its block's uid),
		// and host root is trusted.
		return nil
	default:
		return fmt.Errorf("the agent socket of sandbox %s is not its PID 1's (pid %d uid %d listens, want pid %d): refusing it", sb.name, cred.Pid, cred.Uid, sb.pid)
	}
}

func (sb *Sandbox) hello(ctx context.Context, h agentproto.Hello) error {
	h.Version = agentproto.Version
	var rep agentproto.HelloReply
	s, err := sb.conn.Call(agentproto.OpHello, h, nil)
	if err == nil {
		_, err = sb.result(ctx, s, &rep)
	}
	if err != nil {
		return helloError(err)
	}
	return nil
}

// result waits for a call's reply, watching for the sandbox dying.
func (sb *Sandbox) result(ctx context.Context, s *agentproto.Stream, v any) ([]byte, error) {
	tail, err := s.Result(ctx, v)
	if err != nil {
		return nil, sb.callError(ctx, s, err)
	}
	return tail, nil
}

// callError turns a transport failure into a classified error.
func (sb *Sandbox) callError(ctx context.Context, s *agentproto.Stream, err error) error {
	if ctx.Err() != nil {
		if s != nil {
			s.Cancel()
		}
		return ctx.Err()
	}
	if errors.Is(err, agentproto.ErrClosed) {
		select {
		case <-sb.done:
			return errdefs.New(errdefs.ErrUnavailable, "the sandbox is gone: %v", sb.ExitErr())
		case <-time.After(100 * time.Millisecond):
		}
		return errdefs.New(errdefs.ErrUnavailable, "lost the connection to the sandbox's agent")
	}
	return err
}

// Name is the sandbox's unique name on this host.
func (sb *Sandbox) Name() string { return sb.name }

// Pid is the host pid of the sandbox's PID 1.
func (sb *Sandbox) Pid() int { return sb.pid }

// Done is closed once the sandbox's PID 1 has exited.
func (sb *Sandbox) Done() <-chan struct{} { return sb.done }

// ExitErr says why the sandbox ended.
func (sb *Sandbox) ExitErr() error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.exitErr
}

// Stats reads the workload's resource use, and the size of its writable
// layer when the layer store measures it.
func (sb *Sandbox) Stats() (Stats, error) {
	st, err := sb.cg.Stats()
	out := Stats{Stats: st}
	if l := sb.rt.opts.Layers; l != nil && err == nil {
		if n, err := l.Usage(sb.name); err == nil {
			out.DiskBytes = n
		}
	}
	return out, err
}

// Stats is a sandbox's resource use.
type Stats struct {
	cgroup.Stats
	DiskBytes int64
}

// kill ends PID 1; the kernel then kills every process of the namespace,
// and PID 1 is reaped only once they are all gone.
func (sb *Sandbox) kill() {
	if sb.pidfd != nil {
		_ = unix.PidfdSendSignal( // ESRCH: it is gone already; the wait below tells
			int(sb.pidfd.Fd()), unix.SIGKILL, nil, 0)
	}
	select {
	case <-sb.done:
	case <-time.After(10 * time.Second):
	}
	if sb.conn != nil {
		sb.conn.Close()
	}
	if sb.pidfd != nil {
		sb.pidfd.Close()
	}
}

// Destroy kills the sandbox and removes its cgroup and state directory.
func (sb *Sandbox) Destroy(ctx context.Context) error {
	sb.mu.Lock()
	if sb.exitErr == nil {
		sb.exitErr = errors.New("sandbox was deleted")
	}
	sb.mu.Unlock()
	sb.rt.views.forget(sb.name)
	sb.kill()
	var errs []error
	select {
	case <-sb.done:
	default:
		errs = append(errs, errors.New("sandbox PID 1 did not exit"))
		sb.cg.Kill()
	}
	if err := sb.cg.Destroy(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(append(errs, sb.removeFiles()...)...)
	}
	// Nothing runs in the sandbox any more and its cgroups are gone: its
	// writable layer (an unmount and a loop device, 3 to 4 ms here) and
	// its state directory go in the background, off the delete's path.
	// Runtime.Wait waits for them; what fails is left for Leftovers and
	// the reconciler.
	r := sb.rt
	r.rmu.Lock()
	r.removing[sb.name] = true
	r.rmu.Unlock()
	r.removals.Add(1)
	go func() {
		defer r.removals.Done()
		sb.removeFiles()
		r.rmu.Lock()
		delete(r.removing, sb.name)
		r.rmu.Unlock()
	}()
	return nil
}

// removeFiles removes a dead sandbox's writable layer and state directory,
// and frees its ids once nothing of it is left.
func (sb *Sandbox) removeFiles() []error {
	var errs []error
	if l := sb.rt.opts.Layers; l != nil {
		if err := l.Remove(sb.name); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			errs = append(errs, fmt.Errorf("remove writable layer: %w", err))
		}
	}
	if err := os.RemoveAll(sb.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove sandbox directory: %w", err))
	}
	sb.rt.cpus.release(sb.name)
	if len(errs) == 0 {
		// Its ids may go to another sandbox only once nothing of it is
		// left that they could reach.
		sb.rt.ids.put(sb.name, sb.ids)
	}
	return errs
}

// Wait waits for the removals Destroy left running in the background.
func (r *Runtime) Wait() { r.removals.Wait() }

// idsFile, in a sandbox's state directory, records its host id block so a
// later daemon can adopt it.
const idsFile = "ids.json"

func writeIDs(dir string, ids spec.IDRange) error {
	b, _ := json.Marshal(ids)
	return os.WriteFile(filepath.Join(dir, idsFile), b, 0o600)
}

// Adopt takes over a sandbox that an earlier daemon started and left
// running (a restart, or a crash of the daemon): pid is its PID 1 as the
// store recorded it. It checks that pid is still that sandbox's PID 1,
// reconnects to its agent and returns it as if Start had made it; its
// processes, files and shell state are untouched. A sandbox that is gone
// is ErrNotFound.
func (r *Runtime) Adopt(ctx context.Context, name string, pid int) (sb *Sandbox, err error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	dir := filepath.Join(r.dir, name)
	b, err := os.ReadFile(filepath.Join(dir, idsFile))
	if err != nil {
		return nil, errdefs.New(errdefs.ErrNotFound, "sandbox %s has no state to adopt: %v", name, err)
	}
	var ids spec.IDRange
	if err := json.Unmarshal(b, &ids); err != nil || ids.Size == 0 {
		return nil, fmt.Errorf("sandbox %s: bad %s: %q", name, idsFile, b)
	}
	if pid <= 1 {
		return nil, errdefs.New(errdefs.ErrNotFound, "sandbox %s has no recorded PID 1", name)
	}
	// The pidfd first, then the check: if pid was reused in between, the
	// pidfd names the process that was checked.
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, errdefs.New(errdefs.ErrNotFound, "sandbox %s: PID 1 (%d) is gone: %v", name, pid, err)
	}
	if err := checkInCgroup(pid, name); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := r.ids.claim(name, ids); err != nil {
		unix.Close(fd)
		return nil, err
	}
	sb = &Sandbox{name: name, dir: dir, cg: r.cgroups.OpenSession(name), pid: pid, done: make(chan struct{}),
		ids: ids, rt: r, adopted: parentOf(pid) != os.Getpid()}
	if err := sb.watch(fd); err != nil {
		r.ids.put(name, ids)
		return nil, err
	}
	// A daemon that died while it copied the sandbox's layers left it
	// frozen, and a frozen agent cannot answer the hello. A sandbox that
	// is not frozen stays as it is (and a host without a freezer has none).
	_ = sb.Thaw()
	if err := sb.connect(ctx, agentproto.Hello{}); err != nil {
		sb.pidfd.Close()
		r.ids.put(name, ids)
		return nil, err
	}
	r.cpus.adopt(name, pid)
	// A sandbox from before the view has no meminfo to keep: nothing to
	// watch. One whose file cannot be kept current keeps running with its
	// last view: an adoption is never refused for a view (the session's
	// processes and files are what matter).
	_ = r.views.watch(sb, 0, r.cpus.of(name))
	return sb, nil
}

// checkInCgroup makes sure pid is a process of the sandbox name: it sits in
// the sandbox's cgroup, where no other sandbox's process can be.
func checkInCgroup(pid int, name string) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return errdefs.New(errdefs.ErrNotFound, "sandbox %s: PID 1 (%d) is gone: %v", name, pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		// hierarchy-id:controllers:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[2], "/"), name) {
			return nil
		}
	}
	return errdefs.New(errdefs.ErrNotFound, "sandbox %s: pid %d is another process now", name, pid)
}

// Claim makes a sandbox started with Config.Deferred a session's: it gets
// the session's hostname, and its shell starts with env. On error the
// caller destroys the sandbox.
func (sb *Sandbox) Claim(ctx context.Context, hostname string, env []string) error {
	if err := sb.setHostname(hostname); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	return sb.hello(ctx, agentproto.Hello{Env: env})
}

// setHostname sets the hostname of the sandbox's UTS namespace from the
// outside: the agent has no CAP_SYS_ADMIN to do it. The calling thread
// joins the namespace and comes back; a thread that cannot come back is
// never unlocked, so the runtime ends it rather than reuse it.
func (sb *Sandbox) setHostname(name string) error {
	target, err := unix.Open(fmt.Sprintf("/proc/%d/ns/uts", sb.pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(target)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/uts", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer unix.Close(own)
		if err := unix.Setns(target, unix.CLONE_NEWUTS); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		err = unix.Sethostname([]byte(name))
		if berr := unix.Setns(own, unix.CLONE_NEWUTS); berr != nil {
			errc <- errors.Join(err, fmt.Errorf("return to the host's UTS namespace: %w", berr))
			return // still locked: the thread goes with the goroutine
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// parentOf returns pid's parent, or -1. A sandbox is our child when this
// process started it and detached it (a daemon restarted in-process): then
// it is still ours to reap.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return -1
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return ppid
}

// Detach lets go of a sandbox without stopping it, for a daemon that stops
// and leaves its sessions running: the next daemon adopts them.
func (sb *Sandbox) Detach() {
	sb.mu.Lock()
	if sb.exitErr == nil {
		sb.exitErr = errors.New("sandbox was detached from this daemon")
	}
	sb.mu.Unlock()
	sb.rt.views.forget(sb.name)
	if sb.conn != nil {
		sb.conn.Close()
	}
	if sb.pidfd != nil {
		sb.pidfd.Close()
	}
}

// Remove deletes what a sandbox named name left on the host (its cgroup and
// state directory), for sandboxes whose process is already gone, such as
// after a daemon crash.
func (r *Runtime) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	cg := r.cgroups.OpenSession(name)
	var errs []error
	if err := cg.Kill(); err != nil {
		errs = append(errs, err)
	}
	if err := cg.Destroy(); err != nil {
		errs = append(errs, err)
	}
	if l := r.opts.Layers; l != nil {
		if err := l.Remove(name); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	r.cpus.release(name)
	r.views.forget(name)
	// Its id block goes back with its state, as removeFiles does.
	var ids spec.IDRange
	b, rerr := os.ReadFile(filepath.Join(r.dir, name, idsFile))
	if err := os.RemoveAll(filepath.Join(r.dir, name)); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 && rerr == nil && json.Unmarshal(b, &ids) == nil && ids.Size != 0 {
		r.ids.put(name, ids)
	}
	return errors.Join(errs...)
}

// Leftovers lists sandbox names that have a state directory or a cgroup on
// this host.
func (r *Runtime) Leftovers() ([]string, error) {
	seen := map[string]bool{}
	ents, err := os.ReadDir(r.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range ents {
		seen[e.Name()] = true
	}
	cgs, err := r.cgroups.Sessions()
	if err != nil {
		return nil, err
	}
	for _, n := range cgs {
		seen[n] = true
	}
	if l := r.opts.Layers; l != nil {
		ls, err := l.Names()
		if err != nil {
			return nil, err
		}
		for _, n := range ls {
			seen[n] = true
		}
	}
	var names []string
	r.rmu.Lock()
	for n := range seen {
		if !r.removing[n] { // on its way out already
			names = append(names, n)
		}
	}
	r.rmu.Unlock()
	return names, nil
}

var _ io.Reader = (*agentproto.DataReader)(nil)
