package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// OpaqueXattr marks a directory of a layer that hides the directories of
// the same path in the layers below it (overlayfs with userxattr).
const OpaqueXattr = "user.overlay.opaque"

const (
	aclAccess  = "system.posix_acl_access"
	aclDefault = "system.posix_acl_default"
	maxXattr   = 64 << 10
)

// keepXattr says whether a layer keeps the xattr name, and whether its
// value holds ids (a POSIX ACL).
func keepXattr(name string) (keep, acl bool) {
	switch {
	case name == OpaqueXattr:
		return true, false
	case strings.HasPrefix(name, "user.overlay."):
		return false, false // overlayfs's bookkeeping of the source
	case strings.HasPrefix(name, "user."):
		return true, false
	case name == aclAccess || name == aclDefault:
		return true, true
	}
	return false, false
}

// listXattrs returns the names of fd's xattrs.
func listXattrs(fd int) ([]string, error) {
	size, err := unix.Flistxattr(fd, nil)
	if err != nil {
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		return nil, err
	}
	if size == 0 {
		return nil, nil
	}
	buf := make([]byte, size)
	n, err := unix.Flistxattr(fd, buf)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range strings.Split(string(buf[:n]), "\x00") {
		if s != "" {
			names = append(names, s)
		}
	}
	return names, nil
}

func getXattr(fd int, name string) ([]byte, error) {
	size, err := unix.Fgetxattr(fd, name, nil)
	if err != nil {
		return nil, err
	}
	if size > maxXattr {
		return nil, fmt.Errorf("xattr %s: %d bytes", name, size)
	}
	buf := make([]byte, size)
	n, err := unix.Fgetxattr(fd, name, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// readXattrs returns the xattrs of fd that a layer keeps, ACLs re-based
// with id.
func readXattrs(fd int, id func(uint32) int) (map[string][]byte, error) {
	names, err := listXattrs(fd)
	if err != nil {
		return nil, fmt.Errorf("list xattrs: %w", err)
	}
	var out map[string][]byte
	for _, name := range names {
		keep, acl := keepXattr(name)
		if !keep {
			continue
		}
		v, err := getXattr(fd, name)
		if errors.Is(err, unix.ENODATA) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read xattr %s: %w", name, err)
		}
		if acl {
			if v, err = rebaseACL(v, id); err != nil {
				return nil, err
			}
		}
		if out == nil {
			out = map[string][]byte{}
		}
		out[name] = v
	}
	return out, nil
}

// copyXattrs copies the xattrs of src that a layer keeps to dst.
func copyXattrs(dst, src int, id func(uint32) int) error {
	xs, err := readXattrs(src, id)
	if err != nil {
		return err
	}
	return setXattrs(dst, xs)
}

func setXattrs(fd int, xs map[string][]byte) error {
	for name, v := range xs {
		if err := unix.Fsetxattr(fd, name, v, 0); err != nil {
			return fmt.Errorf("set xattr %s: %w", name, err)
		}
	}
	return nil
}

// POSIX ACL xattr layout: a little-endian u32 version (2), then entries of
// u16 tag, u16 permissions and u32 id.
const (
	aclVersion = 2
	aclUser    = 0x02
	aclGroup   = 0x08
)

// rebaseACL maps the ids of the named users and groups of an ACL with id.
func rebaseACL(v []byte, id func(uint32) int) ([]byte, error) {
	if len(v) < 4 || (len(v)-4)%8 != 0 || binary.LittleEndian.Uint32(v) != aclVersion {
		return nil, errors.New("malformed POSIX ACL")
	}
	out := append([]byte(nil), v...)
	for off := 4; off < len(out); off += 8 {
		tag := binary.LittleEndian.Uint16(out[off:])
		if tag == aclUser || tag == aclGroup {
			binary.LittleEndian.PutUint32(out[off+4:], uint32(id(binary.LittleEndian.Uint32(out[off+4:]))))
		}
	}
	return out, nil
}
