// Package sparse copies files without filling their holes: snapshots copy
// writable layers with it, and the layer store copies its formatted
// filesystem images (a few hundred KiB of data in a sparse gigabyte).
package sparse

import (
	"errors"

	"golang.org/x/sys/unix"
)

// smallFile is the size up to which a file is copied with one read and
// one write: cheaper than looking for holes and splicing.
const smallFile = 64 << 10

// Copy copies size bytes of src to dst, keeping holes: only the data
// extents are copied (copy_file_range where the filesystems allow it). It
// returns the bytes copied.
func Copy(dst, src int, size int64) (int64, error) {
	if size == 0 {
		return 0, nil
	}
	if size <= smallFile {
		return copyRangeSlow(dst, src, 0, size)
	}
	var copied int64
	off := int64(0)
	for off < size {
		data, err := unix.Seek(src, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return copied, err
		}
		hole, err := unix.Seek(src, data, unix.SEEK_HOLE)
		if err != nil {
			return copied, err
		}
		hole = min(hole, size)
		n, err := copyRange(dst, src, data, hole-data)
		copied += n
		if err != nil {
			return copied, err
		}
		off = hole
	}
	if off >= size {
		return copied, nil
	}
	// A hole at the end: the file's length.
	return copied, unix.Ftruncate(dst, size)
}

// copyRange copies n bytes at off from src to the same offset of dst.
func copyRange(dst, src int, off, n int64) (int64, error) {
	var done int64
	for done < n {
		roff, woff := off+done, off+done
		m, err := unix.CopyFileRange(src, &roff, dst, &woff, int(min(n-done, 1<<30)), 0)
		if err != nil {
			if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
				k, err := copyRangeSlow(dst, src, off+done, n-done)
				return done + k, err
			}
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return done, err
		}
		if m == 0 {
			break // the file shrank
		}
		done += int64(m)
	}
	return done, nil
}

func copyRangeSlow(dst, src int, off, n int64) (int64, error) {
	buf := make([]byte, min(n, 1<<20))
	var done int64
	for done < n {
		k, err := unix.Pread(src, buf[:min(int64(len(buf)), n-done)], off+done)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return done, err
		}
		if k == 0 {
			break
		}
		if _, err := unix.Pwrite(dst, buf[:k], off+done); err != nil {
			return done, err
		}
		done += int64(k)
	}
	return done, nil
}
