package seccomp_test

import (
	"fmt"
	"log"

	"github.com/warrenhq/warren/internal/seccomp"
	"golang.org/x/sys/unix"
)

// The daemon compiles the policy once and ships the program to init, which
// decodes it and loads it right before it execs.
func Example() {
	p, err := seccomp.DefaultPolicy(seccomp.Options{
		Arch:   "amd64",
		Caps:   []int{unix.CAP_CHOWN, unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_KILL},
		Kernel: "6.1",
	})
	if err != nil {
		log.Fatal(err)
	}
	prog, err := seccomp.Compile(p)
	if err != nil {
		log.Fatal(err)
	}
	blob := seccomp.Encode(prog)

	// In init, with no_new_privs set and the thread locked:
	prog, err = seccomp.Decode(blob)
	if err != nil {
		log.Fatal(err)
	}
	// seccomp.Load(prog), then execve.

	s := p.Stats()
	fmt.Printf("%d syscalls allowed, %d of them for some arguments only; clone3 is %v\n",
		s.Allowed+s.Conditional, s.Conditional, must(p.Lookup("clone3")).Rules[0].Action)
	// Output: 305 syscalls allowed, 4 of them for some arguments only; clone3 is errno(ENOSYS)
}

func must(sc seccomp.Syscall, ok bool) seccomp.Syscall {
	if !ok {
		log.Fatal("not found")
	}
	return sc
}
