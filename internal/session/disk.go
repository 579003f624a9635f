package session

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// The default free-space floor of the data directory: 1 GiB, or 5% of the
// filesystem where that is smaller.
const (
	defaultMinFreeBytes   = 1 << 30
	defaultMinFreePercent = 5
)

// DiskSpace is the state of the filesystem that holds the sandboxes' state
// (the data directory's).
type DiskSpace struct {
	Path string
	// Free is what unprivileged writers may still use, Total the size.
	Free, Total uint64
	// Min is the floor below which no session is created; 0 when the check
	// is off.
	Min uint64
}

// Disk reads the space of the filesystem that holds the sandboxes' state.
func (m *Manager) Disk() (DiskSpace, error) {
	d := DiskSpace{Path: m.rt.StateDir()}
	var st unix.Statfs_t
	if err := unix.Statfs(d.Path, &st); err != nil {
		return d, errdefs.New(errdefs.ErrUnavailable, "read the free space of %s: %w", d.Path, err)
	}
	d.Free = st.Bavail * uint64(st.Bsize)
	d.Total = st.Blocks * uint64(st.Bsize)
	d.Min = minFree(m.cfg.MinFreeDiskMB, d.Total)
	return d, nil
}

// minFree is the floor of free space for Config.MinFreeDiskMB on a
// filesystem of total bytes; 0 when the check is off.
func minFree(mb int64, total uint64) uint64 {
	switch {
	case mb > 0:
		return uint64(mb) << 20
	case mb == 0:
		return min(defaultMinFreeBytes, total*defaultMinFreePercent/100)
	}
	return 0
}

// CheckDisk fails with ErrUnavailable when the data directory's filesystem
// has less free space than Config.MinFreeDiskMB asks to keep. New sessions
// are refused then; running ones carry on.
func (m *Manager) CheckDisk() error {
	d, err := m.Disk()
	if err != nil {
		return err
	}
	if d.Min > 0 && d.Free < d.Min {
		return errdefs.New(errdefs.ErrUnavailable,
			"the disk is nearly full: the data directory's filesystem (%s) has %s free, less than the %s the daemon keeps free (--min-free-disk-mb); no new sessions until space is freed",
			d.Path, mib(d.Free), mib(d.Min))
	}
	return nil
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
