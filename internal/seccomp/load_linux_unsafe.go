package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Load installs prog as a seccomp filter on every thread of the calling
// process (SECCOMP_FILTER_FLAG_TSYNC): a Go process runs on several threads,
// and a filter installed on one of them only would leave the others free.
//
// Preconditions: no_new_privs is set (prctl(PR_SET_NO_NEW_PRIVS)); Load
// checks it and fails otherwise, even for a caller with CAP_SYS_ADMIN. The
// caller is about to execve on this thread, its goroutine locked to it:
// after Load every syscall of the process goes through the filter, so
// nothing the policy refuses may be needed in between.
func Load(prog []unix.SockFilter) error {
	if err := validate(prog); err != nil {
		return fmt.Errorf("seccomp: load: %w", err)
	}
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("seccomp: load: prctl(PR_GET_NO_NEW_PRIVS): %w", err)
	}
	if nnp != 1 {
		return errors.New("seccomp: load: no_new_privs is not set on this thread")
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("seccomp: load: seccomp(SECCOMP_SET_MODE_FILTER, TSYNC): %w", errno)
	}
	if r != 0 {
		// With TSYNC the kernel returns the id of a thread it could not
		// synchronize (one with a diverging filter) and installs nothing.
		return fmt.Errorf("seccomp: load: thread %d could not be synchronized", r)
	}
	return nil
}
