package seccomp

import (
	"fmt"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"
)

// archInfo is what the policy and the compiler need to know about one
// architecture.
type archInfo struct {
	// goarch is the GOARCH name, also the name Docker's profile uses in
	// Includes.Arches and Excludes.Arches (libseccomp's name for it).
	goarch string
	// audit is the AUDIT_ARCH_* value the kernel reports in
	// seccomp_data.arch for the native ABI.
	audit uint32
	// foreignNrBit, when not zero, marks syscall numbers of another ABI that
	// the kernel reports with the same audit arch: x32 on x86_64 sets
	// __X32_SYSCALL_BIT in the number and still reports AUDIT_ARCH_X86_64.
	// The filter denies every number at or above it.
	foreignNrBit uint32
	// sysnum maps syscall names to numbers (generated, see mksysnum).
	sysnum map[string]uint32
	// ioctl request numbers denied by the policy. The kernel reads ioctl's
	// request as an unsigned int, and the two values are the same on every
	// architecture warren supports (asm-generic/ioctls.h); they are per arch
	// here because they are not the same everywhere (e.g. powerpc, mips).
	tiocsti, tioclinux uint32
}

// arches lists the architectures warren compiles filters for. Both are
// little-endian, which the compiler relies on when it loads the two halves
// of a 64-bit argument.
var arches = []archInfo{
	{
		goarch:       "amd64",
		audit:        unix.AUDIT_ARCH_X86_64,
		foreignNrBit: 0x40000000, // __X32_SYSCALL_BIT
		sysnum:       sysnumX8664,
		tiocsti:      0x5412,
		tioclinux:    0x541c,
	},
	{
		goarch:    "arm64",
		audit:     unix.AUDIT_ARCH_AARCH64,
		sysnum:    sysnumAArch64,
		tiocsti:   0x5412,
		tioclinux: 0x541c,
	},
}

// Arches returns the GOARCH names of the architectures Compile supports.
func Arches() []string {
	var names []string
	for _, a := range arches {
		names = append(names, a.goarch)
	}
	return names
}

// lookupArch returns the description of goarch; "" means runtime.GOARCH.
func lookupArch(goarch string) (*archInfo, error) {
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	i := slices.IndexFunc(arches, func(a archInfo) bool { return a.goarch == goarch })
	if i < 0 {
		return nil, fmt.Errorf("seccomp: unsupported architecture %q (supported: %v)", goarch, Arches())
	}
	return &arches[i], nil
}
