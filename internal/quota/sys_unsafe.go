package quota

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel ABI that golang.org/x/sys/unix (v0.49) does not wrap: the
// project-quota side of quotactl and the fsxattr ioctls. Values are from
// include/uapi/linux/quota.h, dqblk_xfs.h and fs.h; they are the same on
// every architecture.

const (
	// FS_IOC_FSGETXATTR and FS_IOC_FSSETXATTR: _IOR/_IOW('X', 31/32, struct fsxattr).
	fsIocFsGetXattr = 0x801c581f
	fsIocFsSetXattr = 0x401c5820

	// fsXflagProjInherit makes new entries of a directory take its project id.
	fsXflagProjInherit = 0x00000200

	prjQuota = 2 // PRJQUOTA

	qGetQuota   = 0x800007 // Q_GETQUOTA
	qSetQuota   = 0x800008 // Q_SETQUOTA
	qXGetQStatV = 0x5808   // Q_XGETQSTATV: XQM_CMD(8)

	qifBLimits = 1 // QIF_BLIMITS
	qifILimits = 4 // QIF_ILIMITS

	fsQStatVVersion1 = 1      // FS_QSTATV_VERSION1
	fsQuotaPdqEnfd   = 1 << 5 // FS_QUOTA_PDQ_ENFD: project limits are enforced
)

// fsxattr is struct fsxattr.
type fsxattr struct {
	Xflags     uint32
	Extsize    uint32
	Nextents   uint32
	Projid     uint32
	Cowextsize uint32
	Pad        [8]byte
}

// dqblk is struct if_dqblk. Block limits count 1 KiB blocks; curspace counts
// bytes.
type dqblk struct {
	Bhardlimit uint64
	Bsoftlimit uint64
	Curspace   uint64
	Ihardlimit uint64
	Isoftlimit uint64
	Curinodes  uint64
	Btime      uint64
	Itime      uint64
	Valid      uint32
	_          uint32
}

// quotaStatV is struct fs_quota_statv, of which only the flags are read.
type quotaStatV struct {
	Version   int8
	Pad1      uint8
	Flags     uint16
	Incoredqs uint32
	Files     [3][24]byte // user, group, project: struct fs_qfilestatv
	Limits    [3]int32
	Warns     [4]uint16
	Pad4      uint32
	Pad2      [7]uint64
}

func getFsxattr(fd int) (fsxattr, error) {
	var a fsxattr
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fsIocFsGetXattr, uintptr(unsafe.Pointer(&a)))
	if e != 0 {
		return a, e
	}
	return a, nil
}

func setFsxattr(fd int, a *fsxattr) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fsIocFsSetXattr, uintptr(unsafe.Pointer(a)))
	if e != 0 {
		return e
	}
	return nil
}

// quotactlFd is quotactl_fd(2) (Linux 5.14): quotactl addressed by any open
// file of the filesystem instead of its block device's path.
func quotactlFd(fd int, cmd int, id uint32, addr unsafe.Pointer) error {
	_, _, e := unix.Syscall6(unix.SYS_QUOTACTL_FD, uintptr(fd), uintptr(cmd), uintptr(id), uintptr(addr), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// qcmd is QCMD(cmd, PRJQUOTA).
func qcmd(cmd int) int { return cmd<<8 | prjQuota }

func getProjectQuota(fd int, id uint32) (dqblk, error) {
	var q dqblk
	err := quotactlFd(fd, qcmd(qGetQuota), id, unsafe.Pointer(&q))
	return q, err
}

func setProjectQuota(fd int, id uint32, q *dqblk) error {
	return quotactlFd(fd, qcmd(qSetQuota), id, unsafe.Pointer(q))
}

// projectQuotaEnforced reports whether the filesystem of fd enforces project
// quota limits (not only accounts them).
func projectQuotaEnforced(fd int) (bool, error) {
	s := quotaStatV{Version: fsQStatVVersion1}
	if err := quotactlFd(fd, qcmd(qXGetQStatV), 0, unsafe.Pointer(&s)); err != nil {
		return false, err
	}
	return s.Flags&fsQuotaPdqEnfd != 0, nil
}
