package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

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
// writable layer starts with the top two levels of the host's /usr/local
// directories (see localDirs), the session root's: new files there land in
// the session's layer as before.

// hostIDNobody is the one id hostDirsUserNS maps, host nobody to itself: an
// id no sandbox's namespace maps, so its files show as nobody too.
const hostIDNobody = 65534

// hostDirsUserNS returns a user namespace for idmapping host directories:
// one per runtime, kept by its descriptor. The namespace needs a process to
// be made: a child is cloned into it and stopped by ptrace at its execve
// before it runs an instruction, and killed once its namespace is open.
func hostDirsUserNS() (*os.File, error) {
	// The tracer is the thread that forked.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	m := []syscall.SysProcIDMap{{ContainerID: hostIDNobody, HostID: hostIDNobody, Size: 1}}
	pid, err := syscall.ForkExec("/proc/self/exe", []string{"warren-idmap"}, &syscall.ProcAttr{
		Env: []string{},
		Sys: &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER, UidMappings: m, GidMappings: m, Ptrace: true, Pdeathsig: unix.SIGKILL},
	})
	if err != nil {
		return nil, fmt.Errorf("create the user namespace for host directories: %w", err)
	}
	defer func() {
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		for {
			if _, err := unix.Wait4(pid, &ws, 0, nil); !errors.Is(err, unix.EINTR) {
				break
			}
		}
	}()
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
		return nil, fmt.Errorf("create the user namespace for host directories: the child did not stop at its exec (%v, status %v)", err, ws)
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the user namespace for host directories: %w", err)
	}
	return os.NewFile(uintptr(fd), "hostdirs-userns"), nil
}

// localDirs gives a session's writable layer of the host directory src the
// directories its root may add files to: the host's src/local and the
// directories up to two levels below it, with their modes, owned by the
// session's root (ids.HostID). Symbolic links and anything else are left to
// the host's copy.
func localDirs(src, upper string, ids spec.IDRange) error {
	var walk func(rel string, depth int) error
	walk = func(rel string, depth int) error {
		fi, err := os.Lstat(filepath.Join(src, rel))
		if err != nil || !fi.IsDir() {
			return nil // gone, or not a directory: nothing to give
		}
		dst := filepath.Join(upper, rel)
		if err := os.Mkdir(dst, fi.Mode().Perm()); err != nil {
			return err
		}
		// Mkdir's mode is cut by the umask.
		if err := os.Chmod(dst, fi.Mode().Perm()|fi.Mode()&os.ModeSticky); err != nil {
			return err
		}
		if err := os.Lchown(dst, int(ids.HostID), int(ids.HostID)); err != nil {
			return err
		}
		if depth == 2 {
			return nil
		}
		ents, err := os.ReadDir(filepath.Join(src, rel))
		if err != nil {
			return nil
		}
		for _, e := range ents {
			if e.IsDir() {
				if err := walk(filepath.Join(rel, e.Name()), depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("local", 0); err != nil {
		return fmt.Errorf("give the session %s/local: %w", src, err)
	}
	return nil
}
