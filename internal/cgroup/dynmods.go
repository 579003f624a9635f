package cgroup

import (
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// Moving a process into a cgroup takes a global lock (the kernel's
// cgroup_threadgroup_rwsem) for writing. By default that lock is tuned for
// rare writers: the first write after a quiet spell waits for an RCU grace
// period, 5 to 20 ms on our 2-CPU VM, measured with nothing else running.
// Every sandbox start moves its init into its cgroups, so on a quiet host
// each create paid that wait. The cgroup2 mount option favordynmods (Linux
// 6.0) keeps the lock in the writer-friendly mode: migrations cost tens of
// microseconds, and forks and exits take a plain read lock instead of a
// per-CPU one. The lock is global, so the option on the cgroup2 mount also
// speeds migrations on a hybrid host's v1 hierarchies. cgroup v1 mounts
// cannot change it after boot (there, the kernel's cgroup_favordynmods=true
// boot parameter does).

// cgroup2 mount options a reconfiguration must repeat: it resets every flag
// it is not given.
var v2Flags = []string{"nsdelegate", "favordynmods", "memory_localevents", "memory_recursiveprot", "memory_hugetlb_accounting", "pids_localevents"}

// ErrNoCgroup2 means the host mounts no cgroup2 hierarchy at all.
var ErrNoCgroup2 = errors.New("no cgroup2 mount to set favordynmods on (on a v1-only host, boot with cgroup_favordynmods=true)")

// FavorsDynMods reports whether the host's cgroup2 mount has favordynmods,
// and where that mount is.
func FavorsDynMods() (point string, on bool, err error) {
	m, err := cgroup2Mount("/proc/self/mountinfo")
	if err != nil {
		return "", false, err
	}
	return m.point, slices.Contains(m.superOpts, "favordynmods"), nil
}

// cgroup2Mount finds the host's cgroup2 mount in mountinfo.
func cgroup2Mount(mountinfo string) (mount, error) {
	mounts, err := cgroupMounts(mountinfo)
	if err != nil {
		return mount{}, err
	}
	i := slices.IndexFunc(mounts, func(m mount) bool { return m.fstype == "cgroup2" })
	if i < 0 {
		return mount{}, ErrNoCgroup2
	}
	return mounts[i], nil
}

// FavorDynMods sets or clears favordynmods on the host's cgroup2 mount,
// keeping its other options. It reports the mount point and whether
// anything changed.
func FavorDynMods(on bool) (point string, changed bool, err error) {
	return favorDynMods("/proc/self/mountinfo", on)
}

func favorDynMods(mountinfo string, on bool) (string, bool, error) {
	m, err := cgroup2Mount(mountinfo)
	if err != nil {
		return "", false, err
	}
	if slices.Contains(m.superOpts, "favordynmods") == on {
		return m.point, false, nil
	}
	// fspick reconfigures the superblock alone; a mount(2) remount would
	// also reset the mount's own flags (nosuid, nodev, noexec).
	fd, err := unix.Fspick(unix.AT_FDCWD, m.point, unix.FSPICK_CLOEXEC|unix.FSPICK_NO_AUTOMOUNT)
	if err != nil {
		return m.point, false, fmt.Errorf("open %s for reconfiguration: %w", m.point, err)
	}
	defer unix.Close(fd)
	for _, f := range v2Flags {
		if f == "favordynmods" || !slices.Contains(m.superOpts, f) {
			continue
		}
		if err := unix.FsconfigSetFlag(fd, f); err != nil {
			return m.point, false, fmt.Errorf("keep %s on %s: %w", f, m.point, err)
		}
	}
	if on {
		if err := unix.FsconfigSetFlag(fd, "favordynmods"); err != nil {
			return m.point, false, fmt.Errorf("favordynmods on %s (needs Linux 6.0): %w", m.point, err)
		}
	}
	if err := unix.FsconfigReconfigure(fd); err != nil {
		return m.point, false, fmt.Errorf("reconfigure %s: %w", m.point, err)
	}
	return m.point, true, nil
}
