package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/spec"
)

// Host directories (the base image's /usr) are the host's files: a sandbox
// must use them as an unprivileged host user would, never as their owner.
// Mapped onto the sandbox's namespace like an image layer, host root's files
// would be its root's, and a 0600 root file under /usr/local would read
// from any root session. So they are idmapped through a user namespace that
// maps no id of theirs into any sandbox: every file shows as nobody,
// nogroup, only its "other" permission bits apply (sandboxed root's
// CAP_DAC_OVERRIDE holds only over ids its namespace maps), and a setuid
// file's owner is nobody the sandbox can become.
//
// Overlayfs copies a lower file up only when the sandbox's namespace maps
// its owner, so such files can be read and executed but not changed in
// place (EOVERFLOW), and directories of theirs get no new entries
// (EACCES). So that a session may still install into /usr/local, its
// writable layer starts with copies of the host's /usr/local directories
// (see localDirs), the session root's: new files there land in
// the session's layer as before.

// hostIDNobody is the one id hostDirsUserNS maps, host nobody to itself: an
// id no sandbox's namespace maps, so its files show as nobody too.
const hostIDNobody = 65534

// hostDirsUserNS returns a user namespace for idmapping host directories:
// one per runtime, kept by its descriptor. A namespace needs a process to be
// made: exe (the sandbox program) is started in a new one as init and, with
// /dev/null for its spec and status (spec.FDSpec, spec.FDStatus), fails at
// once; its namespace is opened while it is a zombie
// (a zombie keeps its credentials, and with them its user namespace, until
// it is reaped) and it is reaped then. No ptrace: Yama's strictest mode
// forbids even PTRACE_TRACEME.
func hostDirsUserNS(exe string) (*os.File, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	n := null.Fd()
	m := []syscall.SysProcIDMap{{ContainerID: hostIDNobody, HostID: hostIDNobody, Size: 1}}
	pid, err := syscall.ForkExec(exe, []string{"warren", "init"}, &syscall.ProcAttr{
		Env:   []string{},
		Files: []uintptr{n, n, n, n, n},
		Sys:   &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER, UidMappings: m, GidMappings: m},
	})
	if err != nil {
		return nil, fmt.Errorf("create the user namespace for host directories: %w", err)
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	var ws unix.WaitStatus
	for {
		if _, werr := unix.Wait4(pid, &ws, 0, nil); !errors.Is(werr, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open the user namespace for host directories: %w", err)
	}
	return os.NewFile(uintptr(fd), "hostdirs-userns"), nil
}

// giveLocalDirs runs localDirs for each of c's overlays in the background,
// into their writable layers under layer (with a user namespace only:
// without one, host directories are bound read-only for an unprivileged
// host user). The returned function waits for it.
func (r *Runtime) giveLocalDirs(c *Config, layer string, ids spec.IDRange) func() error {
	if !r.opts.UserNS || len(c.Overlays) == 0 {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() {
		for i, o := range c.Overlays {
			if err := localDirs(o.Source, overlayDir(layer, i)+"/upper", ids); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return sync.OnceValue(func() error { return <-done })
}

// localDirs gives a session's writable layer of the host directory src the
// directories its root may add files to: the host's src/local, the
// directories below it and those below src/local/lib, with their modes,
// owned by the session's root (ids.HostID). Symbolic links and anything else are left to
// the host's copy.
func localDirs(src, upper string, ids spec.IDRange) error {
	for _, d := range scanLocal(src) {
		dst := filepath.Join(upper, d.rel)
		if err := os.Mkdir(dst, d.mode); err != nil {
			return fmt.Errorf("give the session %s: %w", filepath.Join(src, d.rel), err)
		}
		// Mkdir's mode is cut by the umask (and never sets the sticky bit).
		if d.mode&^os.ModePerm != 0 || d.mode&^localUmask != d.mode {
			if err := os.Chmod(dst, d.mode); err != nil {
				return err
			}
		}
		if err := os.Lchown(dst, int(ids.HostID), int(ids.HostID)); err != nil {
			return err
		}
	}
	return nil
}

type localDir struct {
	rel  string
	mode os.FileMode
}

// localUmask is the umask's effect on Mkdir's mode: it is read (and put
// back) once, as Go gives no way to read it without setting it.
var localUmask = func() os.FileMode {
	old := unix.Umask(0o22)
	unix.Umask(old)
	return os.ModePerm &^ os.FileMode(old)
}()

// scanLocal lists src/local, its directories and those of src/local/lib,
// parents first. A create of a base-image session needs it; the host's /usr/local
// changes rarely, so a scan serves for localScanAge.
func scanLocal(src string) []localDir {
	localMu.Lock()
	defer localMu.Unlock()
	if c, ok := localCache[src]; ok && time.Since(c.at) < localScanAge {
		return c.dirs
	}
	var dirs []localDir
	var walk func(rel string, depth int)
	walk = func(rel string, depth int) {
		fi, err := os.Lstat(filepath.Join(src, rel))
		if err != nil || !fi.IsDir() {
			return // gone, or not a directory: nothing to give
		}
		dirs = append(dirs, localDir{rel, fi.Mode().Perm() | fi.Mode()&os.ModeSticky})
		// Two levels only below lib (lib/node_modules for npm -g,
		// lib/python3.N): every directory costs each create a mkdir and a
		// chown, and /usr/local/go alone has a dozen below it.
		if depth == 2 || depth == 1 && rel != "local/lib" {
			return
		}
		ents, _ := os.ReadDir(filepath.Join(src, rel))
		for _, e := range ents {
			if e.IsDir() {
				walk(filepath.Join(rel, e.Name()), depth+1)
			}
		}
	}
	walk("local", 0)
	localCache[src] = localScan{dirs: dirs, at: time.Now()}
	return dirs
}

type localScan struct {
	dirs []localDir
	at   time.Time
}

const localScanAge = 10 * time.Second

var (
	localMu    sync.Mutex
	localCache = map[string]localScan{}
)
