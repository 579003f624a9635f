package sandbox

import (
	"fmt"
	"github.com/warrenhq/warren/internal/seccomp"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// ProbeUserNS checks that sandboxes can run in user namespaces here: a
// process can be started in a new user namespace with a mapped block of ids,
// and a directory on the filesystem of dir (the images) can be idmapped into
// it. It returns nil or the reason it cannot.
func ProbeUserNS(dir string) error {
	prog := "/proc/self/exe"
	args := []string{"warren", "version"}
	if _, err := os.Stat("/bin/true"); err == nil {
		prog, args = "/bin/true", []string{"true"}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: DefaultIDBase, Size: 1}}
	// The child waits on the pipe so its namespace lives while we idmap.
	pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", "read x"}, &syscall.ProcAttr{
		Files: []uintptr{r.Fd(), 0, 0},
		Sys:   &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER, UidMappings: m, GidMappings: m},
	})
	if err != nil {
		// Maybe no /bin/sh: fall back to a plain clone test.
		pid, err = syscall.ForkExec(prog, args, &syscall.ProcAttr{
			Sys: &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER, UidMappings: m, GidMappings: m},
		})
		if err != nil {
			w.Close()
			return fmt.Errorf("cannot create a user namespace: %w", err)
		}
	}
	defer func() {
		w.Close()
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil) // reap the probe; it has been told to exit
	}()
	userns, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open a user namespace: %w", err)
	}
	defer unix.Close(userns)
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone a mount of %s: %w", dir, err)
	}
	defer unix.Close(fd)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns)}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return fmt.Errorf("the filesystem of %s cannot be idmapped (Linux 5.12+ and a filesystem with idmapped mounts, such as ext4, xfs or btrfs): %w", dir, err)
	}
	return nil
}

// Seccomp compiles the filter for sandboxes on this host: Docker's default
// profile for the kept capabilities, tightened (see package seccomp).
// clone3 is allowed only where the agent needs it (cgroup v2 places children
// with CLONE_INTO_CGROUP) and the sandbox has a user namespace in which no
// further user namespace can be made, so clone3's namespace flags are
// useless to sandboxed code.
func Seccomp(userns bool, cgroupVersion int) ([]byte, *seccomp.Policy, error) {
	pol, err := seccomp.DefaultPolicy(seccomp.Options{Caps: DefaultCaps, AllowClone3: userns && cgroupVersion == 2})
	if err != nil {
		return nil, nil, err
	}
	prog, err := seccomp.Compile(pol)
	if err != nil {
		return nil, nil, err
	}
	return seccomp.Encode(prog), pol, nil
}
