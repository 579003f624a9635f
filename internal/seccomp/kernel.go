package seccomp

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// kernelVersion is a kernel's version and major revision ("6.1" of
// "6.1.0-18-amd64"), the precision of Docker's MinKernel conditions.
type kernelVersion struct {
	major, minor uint64
}

func (k kernelVersion) atLeast(major, minor uint64) bool {
	return k.major > major || (k.major == major && k.minor >= minor)
}

// parseKernel parses a release as uname -r prints it, ignoring what follows
// the version and major revision, as moby's profile code does.
func parseKernel(release string) (kernelVersion, error) {
	var k kernelVersion
	if _, err := fmt.Sscanf(release, "%d.%d", &k.major, &k.minor); err != nil {
		return kernelVersion{}, fmt.Errorf("seccomp: parse kernel release %q: %w", release, err)
	}
	return k, nil
}

// runningKernel returns the version of the running kernel.
func runningKernel() (kernelVersion, error) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return kernelVersion{}, fmt.Errorf("seccomp: uname: %w", err)
	}
	return parseKernel(unix.ByteSliceToString(uts.Release[:]))
}
