// Package nsinit is the code of `warren init`: the first program in a new
// sandbox. The daemon starts it in new PID, mount, UTS, IPC and network
// namespaces; it joins the session's cgroup, enters a cgroup namespace,
// assembles the root filesystem, pivots into it, drops privileges and then
// replaces itself with the agent.
//
// Everything that must hold for the whole agent process (the cgroup
// namespace, capabilities, no_new_privs, later seccomp) is applied to the one
// OS thread that finally calls execve, so the new program inherits exactly
// that thread's state and no other thread's (see STACK.md, "Hardening applied
// per thread").
//
// It must stay small: no goroutines of its own, no net/http, no database.
package nsinit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/procview"
	"github.com/warrenhq/warren/internal/seccomp"
	"github.com/warrenhq/warren/internal/spec"
)

// Main runs init. It never returns: it execs the agent or exits 1.
func Main() {
	// The main goroutine stays on the main thread; every per-thread change
	// below lands on it and it is the thread that execs the agent.
	runtime.LockOSThread()
	status := os.NewFile(spec.FDStatus, "status")
	if err := run(status); err != nil {
		f, _ := err.(*stepError)
		fail := spec.InitFailure{Error: err.Error()}
		if f != nil {
			fail.Step, fail.Error = f.step, f.err.Error()
		}
		b, _ := json.Marshal(fail)
		_, _ = status.Write( // the daemon sees the exit if the report is lost
			append([]byte{spec.StatusError}, b...))
		os.Exit(1)
	}
}

type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }

func step(name string, err error) error {
	if err == nil {
		return nil
	}
	return &stepError{name, err}
}

func run(status *os.File) error {
	s, err := spec.Read()
	if err != nil {
		return step("read spec", err)
	}
	// Only the descriptors the spec names cross into the sandbox: anything
	// else the daemon holds without close-on-exec (a descriptor its own
	// parent left it, `exec 200<dir` in a shell) would stay open in the
	// agent, where the file API runs, and reach the host. They close at the
	// exec; closing them now could take one the Go runtime opened.
	if err := closeStrays(s.LastFD()); err != nil {
		return step("close inherited descriptors", err)
	}
	// The agent's program, opened by the daemon (see spec.ProgramFD). The
	// agent runs from it through /proc/self/fd.
	exe := s.ProgramFD()
	if _, err := unix.FcntlInt(uintptr(exe), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return step("find the agent's program", err)
	}
	ld, err := dynamicLoader(exe)
	if err != nil {
		return step("read own executable", err)
	}
	if err := joinCgroups(s); err != nil {
		return err
	}
	if _, err := status.Write([]byte{spec.StatusMoved}); err != nil {
		return step("report cgroup placement", err)
	}
	layers, err := stageLayers(s)
	if err != nil {
		return err
	}
	if err := setupRoot(s, layers, ld); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
		return step("set hostname", err)
	}
	if err := loopbackUp(); err != nil {
		return step("bring up lo", err)
	}
	// The daemon bound the agent's socket; init makes it listen, so the
	// socket's credentials (SO_PEERCRED, taken at listen) name PID 1: the
	// daemon refuses a socket any other process listens on.
	if err := unix.Listen(spec.FDListener, 8); err != nil {
		return step("listen on the agent socket", err)
	}
	// The status pipe ends with the exec: the daemon reads EOF as "agent
	// started". Everything else the agent needs is inherited.
	if _, err := unix.FcntlInt(uintptr(spec.FDStatus), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return step("mark status pipe close-on-exec", err)
	}
	if err := spec.CapRlimits(); err != nil {
		return step("cap queued signals and message queues", err)
	}
	if err := dropPrivileges(s.Caps); err != nil {
		return step("drop privileges", err)
	}
	// Seccomp goes on last: after it nothing but the exec happens here.
	if len(s.Seccomp) > 0 {
		prog, err := seccomp.Decode(s.Seccomp)
		if err != nil {
			return step("decode seccomp filter", err)
		}
		if err := seccomp.Load(prog); err != nil {
			return step("load seccomp filter", err)
		}
	}
	prog, argv := "/proc/self/fd/"+strconv.Itoa(exe), []string{"warren", "agent"}
	if ld != nil {
		// The interpreter opens the program by path after the exec, so
		// its descriptor must survive the exec.
		if err := unix.Dup2(exe, spec.FDExe); err != nil {
			return step("pass own executable", err)
		}
		prog, argv = ld.argv("/proc/self/fd/"+strconv.Itoa(spec.FDExe), argv)
	}
	// One P: the agent waits on pipes and sockets, and every P costs an
	// idle agent memory (per-P caches, more threads); 220 KiB less per
	// session on our CI VM. The agent's children get their environment
	// from the spec, never this one.
	err = syscall.Exec(prog, argv, []string{"GOMAXPROCS=1"})
	return step("exec agent", err)
}

// closeStrays marks every descriptor above last close-on-exec, so the exec
// of the agent closes them (close_range, Linux 5.11; /proc/self/fd before
// that).
func closeStrays(last int) error {
	err := unix.CloseRange(uint(last+1), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil && fd > last {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && err != unix.EBADF {
				return err
			}
		}
	}
	return nil
}

// joinCgroups moves init into S, roots a new cgroup namespace there (on this
// thread only; the exec carries it to the agent), then moves into S/agent.
func joinCgroups(s *spec.Sandbox) error {
	c := s.Cgroup
	for i := range c.Hierarchies {
		if err := writeFD(c.SessionProcsFD(i), "0"); err != nil {
			return step("join session cgroup", err)
		}
	}
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return step("enter cgroup namespace", err)
	}
	for i := range c.Hierarchies {
		if err := writeFD(c.AgentProcsFD(i), "0"); err != nil {
			return step("join agent cgroup", err)
		}
		unix.Close(c.SessionProcsFD(i))
		unix.Close(c.AgentProcsFD(i))
	}
	return nil
}

func writeFD(fd int, v string) error {
	_, err := unix.Pwrite(fd, []byte(v), 0)
	return err
}

// stageLayers gathers every layer of the sandbox under a private tmpfs in
// its state directory, in spec order (spec.Sandbox.Layers),
// and the writable layer as "w". With a user namespace the read-only layers
// arrive from the daemon as idmapped mounts (init cannot read the image's
// files as host root); without one they are bound read-only. The overlays are
// then mounted from there with relative paths, so their options, which
// sandboxed code can read in /proc/self/mountinfo, name no host path.
func stageLayers(s *spec.Sandbox) ([]string, error) {
	want := len(s.Layers())
	stage := stageDir(s)
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, step("make mounts private", err)
	}
	// The stage is also the sandbox's one small tmpfs (see scratchDirs).
	if err := unix.Mount("tmpfs", stage, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=700,size="+scratchSize); err != nil {
		return nil, step("mount layer staging tmpfs", err)
	}
	for _, d := range scratchDirs {
		if err := os.Mkdir(filepath.Join(stage, d.name), d.mode); err != nil {
			return nil, step("create scratch "+d.name, err)
		}
		// Mkdir's mode is cut by the umask.
		if err := os.Chmod(filepath.Join(stage, d.name), d.mode); err != nil {
			return nil, step("create scratch "+d.name, err)
		}
	}
	names := make([]string, want)
	for i := range names {
		names[i] = strconv.Itoa(i)
		if err := os.Mkdir(filepath.Join(stage, names[i]), 0o700); err != nil {
			return nil, step("stage layer", err)
		}
	}
	if s.UserNS != nil {
		buf := make([]byte, 8)
		oob := make([]byte, unix.CmsgSpace(4*want))
		_, oobn, _, _, err := unix.Recvmsg(spec.FDMounts, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != nil {
			return nil, step("receive layer mounts", err)
		}
		unix.Close(spec.FDMounts)
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			return nil, step("receive layer mounts", fmt.Errorf("bad control message: %v", err))
		}
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != want {
			return nil, step("receive layer mounts", fmt.Errorf("got %d mounts, want %d: %v", len(fds), want, err))
		}
		for i, fd := range fds {
			if err := unix.MoveMount(fd, "", unix.AT_FDCWD, filepath.Join(stage, names[i]), unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
				return nil, step("attach layer", err)
			}
			unix.Close(fd)
		}
	} else {
		for i, src := range s.Layers() {
			if err := bind(src, filepath.Join(stage, names[i]), true, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
				return nil, step("bind layer", err)
			}
		}
	}
	w := filepath.Join(stage, "w")
	if err := os.Mkdir(w, 0o700); err != nil {
		return nil, step("stage writable layer", err)
	}
	if err := bind(writableDir(s), w, false, 0); err != nil {
		return nil, step("bind writable layer", err)
	}
	return names, nil
}

// scratchDirs live in the layer stage's tmpfs and are bound into the
// sandbox: /dev, /dev/shm and /run, and an empty directory that masks parts
// of /proc and /sys. One tmpfs instead of one per place, because every
// filesystem instance costs memory in every memory cgroup on the host: the
// kernel sizes each cgroup's shrinker table by the most filesystems that
// ever existed at once (about 1 KiB per 64 of them, per memory cgroup), so
// a thousand sandboxes with ten instances each made every new memory
// cgroup about 150 KiB dearer. They share one size limit.
var scratchDirs = []struct {
	name string
	mode os.FileMode
}{
	{"dev", 0o755},
	{"shm", 0o777 | os.ModeSticky},
	{"run", 0o755},
	{"empty", 0o555},
}

// scratchSize bounds them together: /dev/shm and /run had 64 MiB each.
const scratchSize = "131136k"

func scratch(s *spec.Sandbox, name string) string { return filepath.Join(stageDir(s), name) }

// writableDir holds the writable layers: Root.Upper, Root.Work and each
// overlay's upper and work directory.
func writableDir(s *spec.Sandbox) string { return filepath.Dir(s.Root.Upper) }

// staged returns the relative name of a writable-layer path under the stage.
func staged(s *spec.Sandbox, p string) string {
	rel, err := filepath.Rel(writableDir(s), p)
	if err != nil {
		return p
	}
	return filepath.Join("w", rel)
}

// stageDir is where the layers are attached before the overlay takes them.
func stageDir(s *spec.Sandbox) string { return filepath.Join(filepath.Dir(s.Root.Target), "layers") }

// setupRoot assembles the sandbox's root filesystem and pivots into it.
// layers, with a user namespace, are the attached idmapped layers in spec
// order; without one the spec's host paths are used directly.
func setupRoot(s *spec.Sandbox, layers []string, ld *loader) error {
	// Nothing we mount may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return step("make mounts private", err)
	}
	r := s.Root
	lower, sources := layers[:len(r.Lower)], layers[len(r.Lower):len(r.Lower)+len(s.Mounts)]
	more := layers[len(r.Lower)+len(s.Mounts):] // the Mounts' Lower, in order
	extra := ""
	if s.UserNS != nil {
		// Overlay's own metadata goes to user.* xattrs: trusted.* needs
		// privileges over the host's filesystem that a user namespace
		// lacks.
		extra = ",userxattr"
	}
	// Paths in the options are relative to the stage.
	if err := unix.Chdir(stageDir(s)); err != nil {
		return step("enter layer staging", err)
	}
	opts := "lowerdir=" + strings.Join(lower, ":") + ",upperdir=" + staged(s, r.Upper) + ",workdir=" + staged(s, r.Work) + extra
	if r.Volatile {
		opts += ",volatile"
	}
	// nodev: a device node created in the writable layer is inert; the only
	// devices are the ones bound into /dev below.
	if err := unix.Mount("overlay", r.Target, "overlay", unix.MS_NODEV, opts); err != nil {
		return step("mount root overlay", fmt.Errorf("%w (options %s)", err, opts))
	}
	root := r.Target
	for i, m := range s.Mounts {
		m.Source, m.Upper, m.Work = sources[i], staged(s, m.Upper), staged(s, m.Work)
		m.Lower, more = more[:len(m.Lower)], more[len(m.Lower):]
		if err := extraMount(root, m, extra); err != nil {
			return err
		}
	}
	if err := unix.Chdir("/"); err != nil {
		return step("leave layer staging", err)
	}
	if err := mountProc(root); err != nil {
		return err
	}
	if err := mountDev(s, root); err != nil {
		return err
	}
	if err := mkdirMount("sysfs", root, "/sys", "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	if err := bindDir(scratch(s, "run"), root, "/run", false, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return err
	}
	if err := setupView(s, root); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(root, "run/warren"), 0o700); err != nil {
		return step("create /run/warren", err)
	}
	if ld != nil {
		if err := ld.bind(root); err != nil {
			return err
		}
	}
	if s.UserNS != nil {
		// No user namespace may be nested in the sandbox's: it would hand
		// sandboxed code a fresh full set of capabilities over new
		// namespaces, and with them much more of the kernel to attack.
		if err := os.WriteFile(filepath.Join(root, "proc/sys/user/max_user_namespaces"), []byte("0"), 0); err != nil {
			return step("forbid nested user namespaces", err)
		}
		if err := userLimits(root); err != nil {
			return err
		}
	}
	if err := maskPaths(root, scratch(s, "empty"), s.MaskedPaths, s.ReadOnlyPaths); err != nil {
		return err
	}
	// The overlays hold their layers and the binds the scratch tmpfs:
	// the stage goes, so nothing but those binds reaches its directories.
	if err := unix.Unmount(stageDir(s), unix.MNT_DETACH); err != nil {
		return step("detach layer staging", err)
	}
	if s.BaseDir != "" {
		base := inRoot(root, s.BaseDir)
		if err := os.MkdirAll(base, 0o755); err != nil {
			return step("create base directory "+s.BaseDir, err)
		}
		if s.RunAs != nil {
			if err := os.Chown(base, int(s.RunAs.HostID), int(s.RunAs.HostID)); err != nil {
				return step("hand the base directory to the sandbox user", err)
			}
		}
	}
	// pivot_root(".", ".") stacks the old root under the new one; detaching
	// it leaves only the sandbox's tree (runc's technique, no put_old dir).
	if err := unix.Chdir(root); err != nil {
		return step("enter new root", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return step("pivot_root", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return step("detach old root", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return step("chdir /", err)
	}
	return nil
}

// maskPaths hides and write-protects parts of /proc and /sys as Docker
// does: files are covered by /dev/null, directories by a read-only bind of
// the empty directory empty (reachable by no other path once the stage is
// detached, so nothing can ever write into it), and read-only paths are
// bind-remounted read-only. Paths that do not exist on this kernel are
// skipped.
func maskPaths(root, empty string, masked, readOnly []string) error {
	for _, p := range masked {
		dst := inRoot(root, p)
		fi, err := os.Lstat(dst)
		if err != nil {
			continue
		}
		if fi.IsDir() {
			err = bind(empty, dst, true, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC)
		} else {
			err = unix.Mount(filepath.Join(root, "dev/null"), dst, "", unix.MS_BIND, "")
		}
		if err != nil {
			return step("mask "+p, err)
		}
	}
	for _, p := range readOnly {
		dst := inRoot(root, p)
		if _, err := os.Lstat(dst); err != nil {
			continue
		}
		if err := bind(dst, dst, true, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
			return step("make "+p+" read-only", err)
		}
	}
	return nil
}

func inRoot(root, p string) string { return filepath.Join(root, filepath.Clean("/"+p)) }

func mkdirMount(source, root, target, fstype string, flags uintptr, data string) error {
	dst := inRoot(root, target)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return step("create "+target, err)
	}
	if err := unix.Mount(source, dst, fstype, flags, data); err != nil {
		return step("mount "+target, err)
	}
	return nil
}

// bindDir binds the directory src on target in root, creating target.
func bindDir(src, root, target string, readOnly bool, flags uintptr) error {
	dst := inRoot(root, target)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return step("create "+target, err)
	}
	if err := bind(src, dst, readOnly, flags); err != nil {
		return step("mount "+target, err)
	}
	return nil
}

func extraMount(root string, m spec.Mount, extraOpts string) error {
	dst := inRoot(root, m.Target)
	switch m.Kind {
	case "overlay":
		// Relative paths: the caller is in the layer stage.
		opts := "lowerdir=" + strings.Join(append(slices.Clone(m.Lower), m.Source), ":") + ",upperdir=" + m.Upper + ",workdir=" + m.Work + ",volatile" + extraOpts
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return step("create "+m.Target, err)
		}
		if err := unix.Mount("overlay", dst, "overlay", unix.MS_NODEV, opts); err != nil {
			return step("mount overlay on "+m.Target, err)
		}
	case "bind":
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return step("create "+m.Target, err)
		}
		if err := bind(m.Source, dst, m.ReadOnly, unix.MS_NODEV|unix.MS_NOSUID); err != nil {
			return step("bind "+m.Target, err)
		}
	default:
		return step("mount "+m.Target, fmt.Errorf("unknown mount kind %q", m.Kind))
	}
	return nil
}

// bind bind-mounts src on dst; flags and read-only need a remount to apply.
func bind(src, dst string, readOnly bool, flags uintptr) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	if flags != 0 {
		return unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|flags, "")
	}
	return nil
}

func mountProc(root string) error {
	return mkdirMount("proc", root, "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}

// devices are bound from the host's /dev: the complete list a sandbox sees.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

func mountDev(s *spec.Sandbox, root string) error {
	dev := inRoot(root, "/dev")
	// nodev: the devices are binds of the host's nodes, each its own mount.
	if err := bindDir(scratch(s, "dev"), root, "/dev", false, unix.MS_NOSUID|unix.MS_NOEXEC|unix.MS_NODEV); err != nil {
		return err
	}
	for _, d := range devices {
		p := filepath.Join(dev, d)
		if err := os.WriteFile(p, nil, 0o666); err != nil {
			return step("create /dev/"+d, err)
		}
		if err := bind("/dev/"+d, p, false, unix.MS_NOSUID|unix.MS_NOEXEC); err != nil {
			return step("bind /dev/"+d, err)
		}
	}
	if err := mkdirMount("devpts", root, "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5"); err != nil {
		return err
	}
	if err := bindDir(scratch(s, "shm"), root, "/dev/shm", false, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
		return err
	}
	links := [][2]string{{"pts/ptmx", "ptmx"}, {"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}}
	for _, l := range links {
		if err := os.Symlink(l[0], filepath.Join(dev, l[1])); err != nil {
			return step("link /dev/"+l[1], err)
		}
	}
	return nil
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// dropPrivileges cuts this thread's capabilities to keep (bounding,
// effective and permitted sets; inheritable and ambient cleared) and sets
// no_new_privs. The exec that follows hands exactly this state to the agent.
//
// Preconditions: called on the thread that will exec, after every
// privileged step.
func dropPrivileges(keep []int) error {
	last, err := lastCap()
	if err != nil {
		return err
	}
	var mask [2]uint32
	keepSet := map[int]bool{}
	for _, c := range keep {
		if c < 0 || c > last {
			return fmt.Errorf("capability %d is unknown to this kernel", c)
		}
		keepSet[c] = true
		mask[c/32] |= 1 << (c % 32)
	}
	for c := 0; c <= last; c++ {
		if !keepSet[c] {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
				return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
			}
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	// The inheritable set stays empty, as Docker's since CVE-2022-24769:
	// it survives setuid and execve, so a non-root program with file
	// inheritable capabilities would get the set back. Root's programs do
	// not need it (execve as root gives them the bounding set).
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: mask[0], Permitted: mask[0]},
		{Effective: mask[1], Permitted: mask[1]},
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("set capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	return nil
}

func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// setupView shows the sandbox its own limits where programs look for the
// machine's size (spec.View): /proc/cpuinfo, /sys/devices/system/cpu/online
// and /proc/stat list only the sandbox's CPUs, the thread that execs the agent is pinned to
// them (every process of the sandbox inherits the affinity), and
// /proc/meminfo says the workload's memory limit and use. The files live in
// the scratch tmpfs and are bound read-only. The agent holds the files of
// /proc/meminfo and /proc/stat open as spec.FDMeminfo and spec.FDStat, the
// only writable way to them, through which the daemon keeps them current.
func setupView(s *spec.Sandbox, root string) error {
	v := s.View
	if len(v.CPUs) > 0 {
		host, err := os.ReadFile(inRoot(root, "/proc/cpuinfo"))
		if err != nil {
			return step("read /proc/cpuinfo", err)
		}
		f, err := viewFile(s, root, "cpuinfo", "/proc/cpuinfo", procview.CPUInfo(host, v.CPUs))
		if err != nil {
			return err
		}
		f.Close()
		f, err = viewFile(s, root, "online", "/sys/devices/system/cpu/online", []byte(procview.CPUList(v.CPUs)))
		if err != nil {
			return err
		}
		f.Close()
		stat, err := os.ReadFile(inRoot(root, "/proc/stat"))
		if err != nil {
			return step("read /proc/stat", err)
		}
		f, err = viewFile(s, root, "stat", "/proc/stat", procview.Stat(stat, v.CPUs))
		if err != nil {
			return err
		}
		err = unix.Dup2(int(f.Fd()), spec.FDStat) // as FDMeminfo below
		f.Close()
		if err != nil {
			return step("pass /proc/stat to the agent", err)
		}
		var set unix.CPUSet
		for _, c := range v.CPUs {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return step("pin to CPUs "+strings.TrimSpace(procview.CPUList(v.CPUs)), err)
		}
	}
	if v.MemoryBytes > 0 {
		// Nothing runs yet, and on cgroup v2 the workload's memory files
		// may not exist before the daemon enabled the controller: the
		// daemon writes the first real figures when the agent is up.
		b := procview.Meminfo(uint64(v.MemoryBytes), 0, procview.MemStat{})
		f, err := viewFile(s, root, "meminfo", "/proc/meminfo", b)
		if err != nil {
			return err
		}
		defer f.Close()
		// Dup2 clears close-on-exec: the agent inherits it.
		if err := unix.Dup2(int(f.Fd()), spec.FDMeminfo); err != nil {
			return step("pass /proc/meminfo to the agent", err)
		}
	}
	return nil
}

// viewFile writes b to the scratch file name and binds it read-only over
// target in root. It returns the file, open for writing.
func viewFile(s *spec.Sandbox, root, name, target string, b []byte) (*os.File, error) {
	f, err := os.OpenFile(scratch(s, name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return nil, step("create "+target, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, step("write "+target, err)
	}
	if err := bind(f.Name(), inRoot(root, target), true, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
		f.Close()
		return nil, step("mount "+target, err)
	}
	return f, nil
}

// userLimits gives each user of the sandbox's namespace the host's per-user
// inotify limits. The kernel charges a user's inotify instances and watches
// at every level of user namespaces up to the host: the sandbox's users
// against these per-namespace limits (unlimited in a new namespace), and
// all of them together, as the namespace's owner (the session's own host
// uid), against the host's per-user ones. So the session as a whole gets
// what one host user gets, and no user inside more.
func userLimits(root string) error {
	for _, l := range [][2]string{
		{"proc/sys/fs/inotify/max_user_instances", "proc/sys/user/max_inotify_instances"},
		{"proc/sys/fs/inotify/max_user_watches", "proc/sys/user/max_inotify_watches"},
	} {
		b, err := os.ReadFile(filepath.Join(root, l[0]))
		if err != nil {
			return step("read /"+l[0], err)
		}
		if err := os.WriteFile(filepath.Join(root, l[1]), b, 0); err != nil {
			return step("set /"+l[1], err)
		}
	}
	return nil
}
