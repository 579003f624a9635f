package spec

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// SealedMemfd returns a memfd named name holding b, sealed so that nothing
// can change, grow or shrink it any more. With exec it is meant to be
// executed: created with MFD_EXEC where the kernel knows the flag (Linux
// 6.3), which fails where vm.memfd_noexec forbids executable memfds.
func SealedMemfd(name string, b []byte, exec bool) (*os.File, error) {
	flags := unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	fd, err := unix.MemfdCreate(name, flags|execFlag(exec))
	if errors.Is(err, unix.EINVAL) && exec {
		fd, err = unix.MemfdCreate(name, flags) // a kernel before MFD_EXEC
	}
	if err != nil {
		return nil, fmt.Errorf("memfd %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	for rest := b; len(rest) > 0; {
		n, err := unix.Write(fd, rest)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("write memfd %s: %w", name, err)
		}
		rest = rest[n:]
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		f.Close()
		return nil, fmt.Errorf("seal memfd %s: %w", name, err)
	}
	return f, nil
}

func execFlag(exec bool) int {
	if exec {
		return unix.MFD_EXEC
	}
	return 0
}
