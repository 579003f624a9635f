package quota

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// loopMajor is the block major number of every loop device.
const loopMajor = 7

// waitLoop bounds the wait for a loop device to free itself after the
// unmount of its filesystem.
const waitLoop = 2 * time.Second

// mountImage attaches image to a free loop device with LO_FLAGS_AUTOCLEAR and
// mounts its ext4 filesystem on target. It returns the device's path. The
// mount holds the only reference to the device, so unmounting the filesystem
// frees it; nothing has to detach it.
func mountImage(image, target, data string) (dev string, err error) {
	// A process forked meanwhile would hold the loop device open until it
	// execs, and the device would outlive its unmount for that long.
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	img, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer img.Close()
	loop, dev, err := attachLoop(img)
	if err != nil {
		return "", fmt.Errorf("attach %s to a loop device: %w", image, err)
	}
	// Closing the device before the mount holds it would clear it (autoclear
	// fires on the last close), so it stays open until the mount is done.
	defer loop.Close()
	if err := unix.Mount(dev, target, "ext4", unix.MS_NODEV|unix.MS_NOSUID, data); err != nil {
		return "", fmt.Errorf("mount %s (%s) on %s with %q: %w", dev, image, target, data, err)
	}
	return dev, nil
}

// attachLoop binds img to a free loop device and returns the open device.
// LOOP_CTL_GET_FREE and the configuration are two steps, so another process
// can take the device in between: that shows as EBUSY and we ask again.
func attachLoop(img *os.File) (*os.File, string, error) {
	// LOOP_CTL_GET_FREE hands every concurrent caller the same device and
	// only one of them binds it: a burst of parallel creates (50 here)
	// could lose more rounds than the retries below. Within this process
	// the callers take turns; other processes are what the retries are for.
	attachMu.Lock()
	defer attachMu.Unlock()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, "", err
	}
	defer ctl.Close()
	for range 16 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, "", fmt.Errorf("LOOP_CTL_GET_FREE: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		loop, err := openLoopDevice(dev)
		if err != nil {
			return nil, "", err
		}
		err = configureLoop(loop, img)
		if errors.Is(err, unix.EBUSY) {
			loop.Close()
			continue
		}
		if err != nil {
			loop.Close()
			return nil, "", fmt.Errorf("configure %s: %w", dev, err)
		}
		return loop, dev, nil
	}
	return nil, "", errors.New("every free loop device was taken before we could bind it")
}

// openLoopDevice opens a loop device that LOOP_CTL_GET_FREE may have just
// created: devtmpfs shows the node at once, udev can take a moment.
var attachMu sync.Mutex

func openLoopDevice(dev string) (*os.File, error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		f, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err == nil || !errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			return f, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// configureLoop binds img to the loop device with autoclear and direct I/O
// (so the image's blocks are not cached twice, once above and once below the
// loop device). It falls back to buffered I/O where the backing filesystem
// cannot do direct I/O, and to LOOP_SET_FD + LOOP_SET_STATUS64 on kernels
// older than 5.8, which lack LOOP_CONFIGURE.
func configureLoop(loop, img *os.File) error {
	cfg := unix.LoopConfig{Fd: uint32(img.Fd())}
	copy(cfg.Info.File_name[:unix.LO_NAME_SIZE-1], img.Name())
	cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR | unix.LO_FLAGS_DIRECT_IO
	err := unix.IoctlLoopConfigure(int(loop.Fd()), &cfg)
	if errors.Is(err, unix.EINVAL) {
		cfg.Info.Flags &^= unix.LO_FLAGS_DIRECT_IO
		err = unix.IoctlLoopConfigure(int(loop.Fd()), &cfg)
	}
	if !errors.Is(err, unix.ENOTTY) {
		return err
	}
	if err := unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_SET_FD, int(img.Fd())); err != nil {
		return err
	}
	if err := unix.IoctlLoopSetStatus64(int(loop.Fd()), &cfg.Info); err != nil {
		_ = unix.IoctlSetInt( // undo; the error returned is the first one
			int(loop.Fd()), unix.LOOP_CLR_FD, 0)
		return err
	}
	return nil
}

// loopBackedBy reports whether the filesystem mounted on dir is an image
// file's loop device, and returns the device. It compares the loop device's
// backing inode with image, so a renamed or re-created file does not match.
func loopBackedBy(dir, image string) (dev string, ok bool, err error) {
	var st, parent, img unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "", false, err
	}
	if err := unix.Stat(filepath.Dir(dir), &parent); err != nil {
		return "", false, err
	}
	if st.Dev == parent.Dev || unix.Major(st.Dev) != loopMajor {
		return "", false, nil
	}
	if err := unix.Stat(image, &img); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return "", false, nil
		}
		return "", false, err
	}
	dev = "/dev/loop" + strconv.Itoa(int(unix.Minor(st.Dev)))
	f, err := os.Open(dev)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	info, err := unix.IoctlLoopGetStatus64(int(f.Fd()))
	if err != nil {
		return "", false, fmt.Errorf("LOOP_GET_STATUS64 on %s: %w", dev, err)
	}
	return dev, info.Device == img.Dev && info.Inode == img.Ino, nil
}

// isMountPoint reports whether dir is the root of a mount of a different
// filesystem than its parent's (what every mount of ours is).
func isMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}

// unmount unmounts the filesystem on target without MNT_DETACH: a busy
// filesystem is an error, never a mount that lingers out of sight. EBUSY is
// retried for a moment: a process forked by another goroutine holds copies
// of the daemon's descriptors (close-on-exec or not) until it execs, and one
// of them may be a file in this filesystem.
func unmount(target string) error {
	deadline := time.Now().Add(500 * time.Millisecond)
	for {
		err := unix.Unmount(target, 0)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EBUSY) && time.Now().Before(deadline):
			time.Sleep(5 * time.Millisecond)
		default:
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
}

// waitLoopFree waits until the loop device dev is unbound. Its autoclear
// fires when the last reference goes, which is normally inside umount(2); a
// copy of the mount in another mount namespace (a sandbox being set up), or
// an open descriptor of the device, keeps it bound.
func waitLoopFree(dev string, timeout time.Duration) error {
	backing := "/sys/block/" + filepath.Base(dev) + "/loop/backing_file"
	deadline := time.Now().Add(timeout)
	for {
		_, err := os.Stat(backing)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			name, _ := os.ReadFile(backing)
			return fmt.Errorf("%s is still bound to %s after the unmount: something else holds it (a mount in another mount namespace or an open descriptor); it frees itself when released", dev, strings.TrimSpace(string(name)))
		}
		time.Sleep(2 * time.Millisecond)
	}
}
