package seccomp

import (
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSysnumNative spot-checks the generated table of the architecture the
// test runs on against x/sys's constants.
func TestSysnumNative(t *testing.T) {
	arch, err := lookupArch("")
	if err != nil {
		t.Skipf("no table for %s", runtime.GOARCH)
	}
	for name, want := range map[string]uintptr{
		"read": unix.SYS_READ, "write": unix.SYS_WRITE, "openat": unix.SYS_OPENAT, "execve": unix.SYS_EXECVE,
		"getpid": unix.SYS_GETPID, "clone": unix.SYS_CLONE, "clone3": unix.SYS_CLONE3, "ioctl": unix.SYS_IOCTL,
		"socket": unix.SYS_SOCKET, "personality": unix.SYS_PERSONALITY, "mount": unix.SYS_MOUNT,
		"unshare": unix.SYS_UNSHARE, "io_uring_setup": unix.SYS_IO_URING_SETUP, "keyctl": unix.SYS_KEYCTL,
		"seccomp": unix.SYS_SECCOMP, "newfstatat": unix.SYS_NEWFSTATAT, "exit_group": unix.SYS_EXIT_GROUP,
	} {
		if got, ok := arch.sysnum[name]; !ok || uintptr(got) != want {
			t.Errorf("%s table: %s = %d (%v), want %d", arch.goarch, name, got, ok, want)
		}
	}
	if got, want := arch.tiocsti, uint32(unix.TIOCSTI); got != want {
		t.Errorf("%s: TIOCSTI = %#x, want %#x", arch.goarch, got, want)
	}
	if got, want := arch.tioclinux, uint32(unix.TIOCLINUX); got != want {
		t.Errorf("%s: TIOCLINUX = %#x, want %#x", arch.goarch, got, want)
	}
}

// TestSysnumTables checks what both tables must have.
func TestSysnumTables(t *testing.T) {
	for _, a := range arches {
		if len(a.sysnum) < 300 {
			t.Errorf("%s: %d syscalls, want 300 or more", a.goarch, len(a.sysnum))
		}
		seen := map[uint32]string{}
		for name, n := range a.sysnum {
			if other, ok := seen[n]; ok {
				t.Errorf("%s: %s and %s are both %d", a.goarch, name, other, n)
			}
			seen[n] = name
			if a.foreignNrBit != 0 && n >= a.foreignNrBit {
				t.Errorf("%s: %s = %#x is in the foreign ABI range", a.goarch, name, n)
			}
		}
	}
	// Numbers from the kernel's tables, independent of x/sys.
	for _, tc := range []struct {
		goarch string
		name   string
		nr     uint32
	}{
		{"amd64", "read", 0}, {"amd64", "getpid", 39}, {"amd64", "clone", 56}, {"amd64", "execve", 59},
		{"amd64", "clone3", 435}, {"amd64", "io_uring_setup", 425},
		{"arm64", "read", 63}, {"arm64", "getpid", 172}, {"arm64", "clone", 220}, {"arm64", "execve", 221},
		{"arm64", "clone3", 435}, {"arm64", "newfstatat", 79}, {"arm64", "mmap", 222},
	} {
		a, _ := lookupArch(tc.goarch)
		if got, ok := a.sysnum[tc.name]; !ok || got != tc.nr {
			t.Errorf("%s: %s = %d (%v), want %d", tc.goarch, tc.name, got, ok, tc.nr)
		}
	}
	for name, a := range map[string]string{"open": "arm64", "iopl": "arm64", "arch_specific_syscall": "arm64", "socketcall": "amd64"} {
		arch, _ := lookupArch(a)
		if _, ok := arch.sysnum[name]; ok {
			t.Errorf("%s has %s", a, name)
		}
	}
}

// TestSysnumGenerated checks that the committed tables are what
// internal/mksysnum generates from the x/sys version in go.mod.
func TestSysnumGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the generator")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go tool")
	}
	out, err := exec.Command("go", "run", "./internal/mksysnum", "-check").CombinedOutput()
	if err != nil {
		t.Errorf("go run ./internal/mksysnum -check: %v\n%s", err, out)
	}
}
