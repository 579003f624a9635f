// Package seccomp provides warren's seccomp policy, a pure-Go compiler from
// that policy to a classic BPF program, and a loader for the program.
//
// The daemon builds the policy with DefaultPolicy, compiles it once with
// Compile, and ships the program to the sandbox's init with Encode; init
// decodes it (Decode) and installs it with Load as the last step before it
// execs, with no_new_privs set. The package must stay pure Go: no cgo, no
// libseccomp. Its only unsafe code is in load_linux_unsafe.go.
//
// # The policy
//
// The base is Docker's default profile (github.com/moby/profiles/seccomp),
// evaluated as moby evaluates it for a container: rules whose Includes name
// an architecture, capabilities or a minimum kernel apply only on that
// architecture, if all those capabilities are kept (Options.Caps) and on
// that kernel or newer; rules whose Excludes match are dropped. The default
// action is Docker's: fail with EPERM.
//
// Warren then tightens it. Each of these is a deviation from Docker's
// profile:
//
//   - Only the native ABI of one architecture is allowed: x86_64 on amd64,
//     aarch64 on arm64. Docker also allows the sub-architectures (i386 and
//     x32 on x86_64, arm on aarch64) with their own tables. Here any other
//     seccomp_data.arch gets the default action (EPERM), and so does every
//     x86_64 syscall number with __X32_SYSCALL_BIT (0x40000000) set, since
//     x32 calls arrive with the x86_64 audit arch.
//   - These fail with EPERM whatever the profile and the kept capabilities
//     say: io_uring_setup, io_uring_enter, io_uring_register, bpf,
//     perf_event_open, userfaultfd, keyctl, add_key, request_key,
//     kexec_load, kexec_file_load, open_by_handle_at, name_to_handle_at,
//     mount, umount2, pivot_root, unshare, setns, move_mount,
//     open_tree, fsopen, fsconfig, fsmount, fspick, mount_setattr,
//     init_module, finit_module, delete_module, acct, swapon, swapoff,
//     reboot, syslog, vhangup, lookup_dcookie, quotactl, quotactl_fd,
//     fanotify_init, iopl, ioperm, process_vm_readv and process_vm_writev.
//     With Docker's default capabilities this changes name_to_handle_at
//     (Docker allows it) and process_vm_readv/writev (Docker allows them
//     on kernels 4.8 and newer, with ptrace); the others Docker allows only
//     with a capability (CAP_SYS_ADMIN, CAP_BPF, CAP_SYS_MODULE…) or not at
//     all. ptrace itself stays as Docker has it: allowed on 4.8 and newer.
//     Sandboxed processes run in their own PID namespace without
//     CAP_SYS_PTRACE, so they can trace only their own processes.
//   - ioctl fails with EPERM for the requests TIOCSTI (push input into a
//     terminal) and TIOCLINUX; Docker allows every ioctl.
//   - clone is allowed only without CLONE_NEW* flags even when
//     CAP_SYS_ADMIN is kept; Docker then allows every clone.
//   - clone3 fails with ENOSYS, as in Docker without CAP_SYS_ADMIN, so that
//     libcs fall back to clone, whose flags the filter can see; with
//     CAP_SYS_ADMIN kept Docker allows it. Options.AllowClone3 allows it
//     (see there for when that is safe).
//   - Conditions on arguments the kernel reads as 32-bit values (socket's
//     family, personality's argument, ioctl's request) compare the low 32
//     bits only. libseccomp compares all 64, so under Docker's profile
//     socket(0x100000028, …) passes the rule "family > AF_VSOCK" and the
//     kernel, truncating to int, creates an AF_VSOCK socket. Here it is
//     refused. For personality this also allows personality(-1) from
//     callers that sign-extend (Docker refuses it), which the kernel reads
//     as the query 0xffffffff that Docker allows.
//   - The profile's "architectures" list and flags are ignored: the filter
//     is built for Options.Arch and installed with TSYNC only.
//
// socket and personality otherwise follow Docker: every address family but
// AF_ALG and AF_VSOCK, and the personalities 0, PER_LINUX32 (8),
// UNAME26 (0x20000), both (0x20008) and the query 0xffffffff.
//
// # The program
//
// Compile emits: a check of seccomp_data.arch, a check for x32 numbers on
// x86_64, a binary search over the sorted syscall numbers, and for each
// syscall with argument conditions its rules in order (a 64-bit condition
// tests the two 32-bit halves). With warren's capabilities the program has
// 529 instructions on amd64 and 485 on arm64 (the kernel takes up to 4096),
// and a syscall without argument rules runs through at most 19 of them.
//
// The syscall tables are generated from golang.org/x/sys/unix's
// zsysnum_linux_{amd64,arm64}.go by internal/mksysnum. They are named after
// the audit architectures (zsysnum_x86_64.go, zsysnum_aarch64.go) rather
// than GOARCH so that both build everywhere and the tests check both.
package seccomp

//go:generate go run ./internal/mksysnum
