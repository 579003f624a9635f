package seccomp

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	profiles "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// keptCaps is the capability set warren's sandboxes keep: Docker's default
// without CAP_MKNOD, CAP_NET_RAW and CAP_AUDIT_WRITE.
var keptCaps = []int{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FSETID, unix.CAP_FOWNER,
	unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETFCAP, unix.CAP_SETPCAP,
	unix.CAP_NET_BIND_SERVICE, unix.CAP_SYS_CHROOT, unix.CAP_KILL,
}

// allCaps keeps every capability.
func allCaps() []int {
	var caps []int
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		caps = append(caps, c)
	}
	return caps
}

const (
	auditArchI386 = 0x40000003 // AUDIT_ARCH_I386
	x32Bit        = 0x40000000 // __X32_SYSCALL_BIT
	tcgets        = 0x5401
	addrNoRandom  = 0x0040000 // ADDR_NO_RANDOMIZE
)

func TestActionValues(t *testing.T) {
	// The values the kernel sees, pinned.
	for _, tc := range []struct {
		a    Action
		want uint32
		str  string
	}{
		{ActAllow, 0x7fff0000, "allow"},
		{ActErrno(unix.EPERM), 0x00050001, "errno(EPERM)"},
		{ActErrno(unix.ENOSYS), 0x00050026, "errno(ENOSYS)"},
		{ActKillProcess, 0x80000000, "kill_process"},
		{ActKillThread, 0, "kill_thread"},
	} {
		if uint32(tc.a) != tc.want {
			t.Errorf("%v = %#x, want %#x", tc.a, uint32(tc.a), tc.want)
		}
		if got := tc.a.String(); got != tc.str {
			t.Errorf("Action(%#x).String() = %q, want %q", uint32(tc.a), got, tc.str)
		}
	}
}

// policyCase is one syscall and the verdict the program must give.
type policyCase struct {
	name    string // test name
	syscall string // looked up in the arch's table, unless nr is set
	nr      *uint32
	arch    uint32 // 0 means the policy's
	args    [6]uint64
	want    Action
}

func nr(n uint32) *uint32 { return &n }

var (
	allow  = ActAllow
	eperm  = ActErrno(unix.EPERM)
	enosys = ActErrno(unix.ENOSYS)
)

// commonCases hold on both architectures.
var commonCases = []policyCase{
	{name: "read", syscall: "read", want: allow},
	{name: "write", syscall: "write", want: allow},
	{name: "openat", syscall: "openat", want: allow},
	{name: "execve", syscall: "execve", want: allow},
	{name: "getpid", syscall: "getpid", want: allow},
	{name: "exit_group", syscall: "exit_group", want: allow},
	{name: "ptrace", syscall: "ptrace", want: allow},
	{name: "chroot", syscall: "chroot", want: allow},

	{name: "clone fork", syscall: "clone", args: [6]uint64{uint64(unix.SIGCHLD)}, want: allow},
	{name: "clone thread", syscall: "clone", args: [6]uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID}, want: allow},
	{name: "clone high garbage", syscall: "clone", args: [6]uint64{0xffffffff00000000 | uint64(unix.SIGCHLD)}, want: allow},
	{name: "clone NEWUSER", syscall: "clone", args: [6]uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}, want: eperm},
	{name: "clone NEWNS", syscall: "clone", args: [6]uint64{unix.CLONE_NEWNS}, want: eperm},
	{name: "clone NEWNET", syscall: "clone", args: [6]uint64{unix.CLONE_NEWNET}, want: eperm},
	{name: "clone NEWCGROUP", syscall: "clone", args: [6]uint64{unix.CLONE_NEWCGROUP}, want: eperm},
	{name: "clone NEWUSER high garbage", syscall: "clone", args: [6]uint64{1<<40 | unix.CLONE_NEWUSER}, want: eperm},
	{name: "clone3", syscall: "clone3", want: enosys},

	{name: "mount", syscall: "mount", want: eperm},
	{name: "umount2", syscall: "umount2", want: eperm},
	{name: "pivot_root", syscall: "pivot_root", want: eperm},
	{name: "unshare", syscall: "unshare", args: [6]uint64{unix.CLONE_NEWUSER}, want: eperm},
	{name: "unshare 0", syscall: "unshare", want: eperm},
	{name: "setns", syscall: "setns", want: eperm},
	{name: "fsopen", syscall: "fsopen", want: eperm},
	{name: "open_tree", syscall: "open_tree", want: eperm},
	{name: "bpf", syscall: "bpf", want: eperm},
	{name: "io_uring_setup", syscall: "io_uring_setup", want: eperm},
	{name: "io_uring_enter", syscall: "io_uring_enter", want: eperm},
	{name: "io_uring_register", syscall: "io_uring_register", want: eperm},
	{name: "keyctl", syscall: "keyctl", want: eperm},
	{name: "add_key", syscall: "add_key", want: eperm},
	{name: "request_key", syscall: "request_key", want: eperm},
	{name: "perf_event_open", syscall: "perf_event_open", want: eperm},
	{name: "kexec_load", syscall: "kexec_load", want: eperm},
	{name: "kexec_file_load", syscall: "kexec_file_load", want: eperm},
	{name: "open_by_handle_at", syscall: "open_by_handle_at", want: eperm},
	{name: "name_to_handle_at", syscall: "name_to_handle_at", want: eperm},
	{name: "userfaultfd", syscall: "userfaultfd", want: eperm},
	{name: "process_vm_readv", syscall: "process_vm_readv", want: eperm},
	{name: "process_vm_writev", syscall: "process_vm_writev", want: eperm},
	{name: "init_module", syscall: "init_module", want: eperm},
	{name: "finit_module", syscall: "finit_module", want: eperm},
	{name: "delete_module", syscall: "delete_module", want: eperm},
	{name: "reboot", syscall: "reboot", want: eperm},
	{name: "syslog", syscall: "syslog", want: eperm},
	{name: "swapon", syscall: "swapon", want: eperm},
	{name: "acct", syscall: "acct", want: eperm},
	{name: "quotactl", syscall: "quotactl", want: eperm},
	{name: "fanotify_init", syscall: "fanotify_init", want: eperm},
	{name: "vhangup", syscall: "vhangup", want: eperm},
	{name: "sethostname", syscall: "sethostname", want: eperm},
	{name: "settimeofday", syscall: "settimeofday", want: eperm},
	{name: "kcmp", syscall: "kcmp", want: eperm},

	// Docker allows PER_LINUX (0), PER_LINUX32 (8), UNAME26, both, and
	// the query 0xffffffff.
	{name: "personality 0", syscall: "personality", args: [6]uint64{0}, want: allow},
	{name: "personality query", syscall: "personality", args: [6]uint64{0xffffffff}, want: allow},
	{name: "personality PER_LINUX32", syscall: "personality", args: [6]uint64{8}, want: allow},
	{name: "personality UNAME26", syscall: "personality", args: [6]uint64{0x20000}, want: allow},
	{name: "personality UNAME26|PER_LINUX32", syscall: "personality", args: [6]uint64{0x20008}, want: allow},
	{name: "personality ADDR_NO_RANDOMIZE", syscall: "personality", args: [6]uint64{addrNoRandom}, want: eperm},
	{name: "personality READ_IMPLIES_EXEC", syscall: "personality", args: [6]uint64{0x0400000}, want: eperm},
	{name: "personality 1", syscall: "personality", args: [6]uint64{1}, want: eperm},
	{name: "personality sign-extended query", syscall: "personality", args: [6]uint64{0xffffffffffffffff}, want: allow},
	{name: "personality high garbage ADDR_NO_RANDOMIZE", syscall: "personality", args: [6]uint64{1<<32 | addrNoRandom}, want: eperm},

	{name: "ioctl TCGETS", syscall: "ioctl", args: [6]uint64{0, tcgets}, want: allow},
	{name: "ioctl FIONREAD", syscall: "ioctl", args: [6]uint64{3, 0x541b}, want: allow},
	{name: "ioctl TIOCSTI", syscall: "ioctl", args: [6]uint64{0, 0x5412}, want: eperm},
	{name: "ioctl TIOCSTI high garbage", syscall: "ioctl", args: [6]uint64{0, 0xdead00000000_5412}, want: eperm},
	{name: "ioctl TIOCLINUX", syscall: "ioctl", args: [6]uint64{0, 0x541c}, want: eperm},
	{name: "ioctl TIOCLINUX high garbage", syscall: "ioctl", args: [6]uint64{0, 1<<32 | 0x541c}, want: eperm},

	{name: "socket AF_UNIX", syscall: "socket", args: [6]uint64{unix.AF_UNIX}, want: allow},
	{name: "socket AF_INET", syscall: "socket", args: [6]uint64{unix.AF_INET, unix.SOCK_STREAM}, want: allow},
	{name: "socket AF_INET6", syscall: "socket", args: [6]uint64{unix.AF_INET6}, want: allow},
	{name: "socket AF_NETLINK", syscall: "socket", args: [6]uint64{unix.AF_NETLINK}, want: allow},
	{name: "socket 39", syscall: "socket", args: [6]uint64{39}, want: allow},
	{name: "socket AF_KCM", syscall: "socket", args: [6]uint64{unix.AF_KCM}, want: allow},
	{name: "socket AF_ALG", syscall: "socket", args: [6]uint64{unix.AF_ALG}, want: eperm},
	{name: "socket AF_VSOCK", syscall: "socket", args: [6]uint64{unix.AF_VSOCK, unix.SOCK_STREAM}, want: eperm},
	{name: "socket AF_VSOCK high garbage", syscall: "socket", args: [6]uint64{1<<32 | unix.AF_VSOCK}, want: eperm},
	{name: "socket AF_ALG high garbage", syscall: "socket", args: [6]uint64{0xffffffff00000000 | unix.AF_ALG}, want: eperm},
	{name: "socket AF_INET high garbage", syscall: "socket", args: [6]uint64{1<<32 | unix.AF_INET}, want: allow},

	{name: "foreign arch i386", arch: auditArchI386, nr: nr(20), want: eperm}, // i386 getpid
	{name: "foreign arch i386 read", arch: auditArchI386, nr: nr(3), want: eperm},
	{name: "foreign arch arm", arch: unix.AUDIT_ARCH_ARM, nr: nr(20), want: eperm},
	{name: "unknown high number", nr: nr(1000), want: eperm},
	{name: "just above the table", nr: nr(600), want: eperm},
	{name: "x32 bit alone", nr: nr(x32Bit), want: eperm},
	{name: "number -1", nr: nr(0xffffffff), want: eperm},
}

// amd64Cases hold on x86_64 only.
var amd64Cases = []policyCase{
	{name: "open", syscall: "open", want: allow},
	{name: "arch_prctl", syscall: "arch_prctl", want: allow},
	{name: "iopl", syscall: "iopl", want: eperm},
	{name: "ioperm", syscall: "ioperm", want: eperm},
	{name: "x32 read", nr: nr(x32Bit | 0), want: eperm},
	{name: "x32 getpid", nr: nr(x32Bit | 39), want: eperm},
	{name: "x32 ioctl", nr: nr(x32Bit | 514), want: eperm}, // x32's own ioctl number
	{name: "x32 execve", nr: nr(x32Bit | 520), want: eperm},
	{name: "aarch64 arch on x86_64", arch: unix.AUDIT_ARCH_AARCH64, nr: nr(172), want: eperm},
}

// arm64Cases hold on aarch64 only.
var arm64Cases = []policyCase{
	{name: "x86_64 arch on aarch64", arch: unix.AUDIT_ARCH_X86_64, nr: nr(39), want: eperm},
	{name: "high bit", nr: nr(x32Bit | 172), want: eperm},
}

func compileDefault(t testing.TB, opts Options) (*Policy, []unix.SockFilter) {
	t.Helper()
	p, err := DefaultPolicy(opts)
	if err != nil {
		t.Fatalf("DefaultPolicy(%+v): %v", opts, err)
	}
	prog, err := Compile(p)
	if err != nil {
		t.Fatalf("Compile(%s): %v", p.Arch, err)
	}
	return p, prog
}

func checkCases(t *testing.T, goarch string, opts Options, cases []policyCase) {
	t.Helper()
	opts.Arch = goarch
	p, prog := compileDefault(t, opts)
	vm := newVM(t, prog)
	arch, _ := lookupArch(goarch)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := call{arch: tc.arch, args: tc.args}
			if c.arch == 0 {
				c.arch = arch.audit
			}
			if tc.nr != nil {
				c.nr = *tc.nr
			} else {
				n, ok := arch.sysnum[tc.syscall]
				if !ok {
					t.Fatalf("%s has no syscall %s", goarch, tc.syscall)
				}
				c.nr = n
			}
			if got := run(t, vm, c); got != tc.want {
				t.Errorf("%s: %s(%#x) = %v (%#x), want %v (%#x)", goarch, tc.syscall, tc.args, got, uint32(got), tc.want, uint32(tc.want))
			}
			if got := verdict(p, c); got != tc.want {
				t.Errorf("%s: policy verdict for %s(%#x) = %v, want %v", goarch, tc.syscall, tc.args, got, tc.want)
			}
		})
	}
}

func TestDefaultPolicyVerdicts(t *testing.T) {
	opts := Options{Caps: keptCaps, Kernel: "6.1.0-18-amd64"}
	t.Run("amd64", func(t *testing.T) {
		checkCases(t, "amd64", opts, append(slices.Clone(commonCases), amd64Cases...))
	})
	t.Run("arm64", func(t *testing.T) {
		checkCases(t, "arm64", opts, append(slices.Clone(commonCases), arm64Cases...))
	})
}

func TestDefaultPolicyOptions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  Options
		cases []policyCase
	}{{
		name: "AllowClone3",
		opts: Options{Caps: keptCaps, Kernel: "6.1", AllowClone3: true},
		cases: []policyCase{
			{name: "clone3", syscall: "clone3", want: allow},
			{name: "clone NEWUSER", syscall: "clone", args: [6]uint64{unix.CLONE_NEWUSER}, want: eperm},
		},
	}, {
		// Docker allows ptrace and process_vm_* from 4.8 on.
		name: "old kernel",
		opts: Options{Caps: keptCaps, Kernel: "4.4.0-210-generic"},
		cases: []policyCase{
			{name: "ptrace", syscall: "ptrace", want: eperm},
			{name: "read", syscall: "read", want: allow},
		},
	}, {
		name: "kernel 4.8",
		opts: Options{Caps: keptCaps, Kernel: "4.8"},
		cases: []policyCase{
			{name: "ptrace", syscall: "ptrace", want: allow},
			{name: "process_vm_readv", syscall: "process_vm_readv", want: eperm},
		},
	}, {
		name: "no capabilities",
		opts: Options{Kernel: "6.1"},
		cases: []policyCase{
			{name: "chroot", syscall: "chroot", want: eperm},
			{name: "read", syscall: "read", want: allow},
		},
	}, {
		// Everything Docker would open up with capabilities stays shut
		// where warren tightens.
		name: "every capability",
		opts: Options{Caps: allCaps(), Kernel: "6.1"},
		cases: []policyCase{
			{name: "sethostname", syscall: "sethostname", want: allow},
			{name: "kcmp", syscall: "kcmp", want: allow},
			{name: "settimeofday", syscall: "settimeofday", want: allow},
			{name: "mount", syscall: "mount", want: eperm},
			{name: "unshare", syscall: "unshare", want: eperm},
			{name: "setns", syscall: "setns", want: eperm},
			{name: "bpf", syscall: "bpf", want: eperm},
			{name: "perf_event_open", syscall: "perf_event_open", want: eperm},
			{name: "open_by_handle_at", syscall: "open_by_handle_at", want: eperm},
			{name: "init_module", syscall: "init_module", want: eperm},
			{name: "reboot", syscall: "reboot", want: eperm},
			{name: "syslog", syscall: "syslog", want: eperm},
			{name: "process_vm_readv", syscall: "process_vm_readv", want: eperm},
			{name: "clone NEWUSER", syscall: "clone", args: [6]uint64{unix.CLONE_NEWUSER}, want: eperm},
			{name: "clone fork", syscall: "clone", args: [6]uint64{uint64(unix.SIGCHLD)}, want: allow},
			{name: "clone3", syscall: "clone3", want: enosys},
			{name: "ioctl TIOCSTI", syscall: "ioctl", args: [6]uint64{0, 0x5412}, want: eperm},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			for _, goarch := range Arches() {
				t.Run(goarch, func(t *testing.T) { checkCases(t, goarch, tc.opts, tc.cases) })
			}
		})
	}
}

func TestDefaultPolicyErrors(t *testing.T) {
	for _, opts := range []Options{
		{Arch: "riscv64"},
		{Arch: "amd64", Kernel: "banana"},
	} {
		if _, err := DefaultPolicy(opts); err == nil {
			t.Errorf("DefaultPolicy(%+v) succeeded, want an error", opts)
		}
	}
}

func TestDefaultPolicyRunningKernel(t *testing.T) {
	p, err := DefaultPolicy(Options{Caps: keptCaps})
	if err != nil {
		t.Fatalf("DefaultPolicy: %v", err)
	}
	if _, ok := p.Lookup("ptrace"); !ok {
		t.Errorf("ptrace not in the policy on this kernel (4.8 or newer expected)")
	}
}

func TestPolicyStats(t *testing.T) {
	p, prog := compileDefault(t, Options{Arch: "amd64", Caps: keptCaps, Kernel: "6.1"})
	s := p.Stats()
	t.Logf("amd64: %+v, %d allowed names, %d unknown names, %d instructions", s, len(p.Allowed()), len(p.Unknown), len(prog))
	if s.Allowed < 250 || s.Conditional != 4 {
		t.Errorf("Stats() = %+v, want about 300 allowed and 4 conditional (clone, ioctl, personality, socket)", s)
	}
	if got, want := len(p.Allowed()), s.Allowed+s.Conditional; got != want {
		t.Errorf("len(Allowed()) = %d, want %d", got, want)
	}
	for _, name := range []string{"read", "clone", "ioctl", "socket", "personality"} {
		if !slices.Contains(p.Allowed(), name) {
			t.Errorf("Allowed() lacks %s", name)
		}
	}
	for _, name := range []string{"mount", "clone3", "keyctl"} {
		if slices.Contains(p.Allowed(), name) {
			t.Errorf("Allowed() has %s", name)
		}
	}
	// x86_64 lacks the names of other architectures' calls.
	for _, name := range []string{"socketcall", "_llseek", "arm_fadvise64_64"} {
		if _, ok := p.Lookup(name); ok {
			t.Errorf("Lookup(%q) found a syscall on amd64", name)
		}
	}
	if !slices.Contains(p.Unknown, "socketcall") {
		t.Errorf("Unknown lacks socketcall")
	}
}

// TestPolicyNames checks that every syscall in the policies is named in the
// architecture's table with its number, and that the tightening list names
// only real syscalls.
func TestPolicyNames(t *testing.T) {
	for _, goarch := range Arches() {
		arch, _ := lookupArch(goarch)
		p, _ := compileDefault(t, Options{Arch: goarch, Caps: allCaps(), Kernel: "6.1", AllowClone3: true})
		for _, sc := range p.Syscalls {
			if n, ok := arch.sysnum[sc.Name]; !ok || n != sc.Nr {
				t.Errorf("%s: policy has %s as %d, table has %d (%v)", goarch, sc.Name, sc.Nr, n, ok)
			}
		}
		for _, name := range []string{"read", "write", "openat", "execve", "clone", "mmap", "futex", "exit_group", "rt_sigreturn", "newfstatat", "epoll_pwait"} {
			if _, ok := p.Lookup(name); !ok {
				t.Errorf("%s: %s not in the policy", goarch, name)
			}
		}
	}
	for _, name := range denied {
		if _, ok := sysnumX8664[name]; !ok {
			if _, ok := sysnumAArch64[name]; !ok {
				t.Errorf("denied lists %q, a syscall of no supported architecture", name)
			}
		}
	}
}

// TestProfileEvaluation checks moby's Includes/Excludes semantics on a
// synthetic profile.
func TestProfileEvaluation(t *testing.T) {
	errno := uint(unix.EACCES)
	allowRule := func(names []string, in, ex *profiles.Filter) *profiles.Syscall {
		return &profiles.Syscall{LinuxSyscall: specs.LinuxSyscall{Names: names, Action: specs.ActAllow}, Includes: in, Excludes: ex}
	}
	prof := &profiles.Seccomp{
		LinuxSeccomp: specs.LinuxSeccomp{DefaultAction: specs.ActErrno},
		Syscalls: []*profiles.Syscall{
			allowRule([]string{"read", "socketcall"}, nil, nil),
			allowRule([]string{"write"}, &profiles.Filter{Arches: []string{"arm64"}}, nil),
			allowRule([]string{"getpid"}, nil, &profiles.Filter{Arches: []string{"arm64"}}),
			allowRule([]string{"chroot"}, &profiles.Filter{Caps: []string{"CAP_SYS_CHROOT", "CAP_SYS_ADMIN"}}, nil),
			allowRule([]string{"chdir"}, &profiles.Filter{Caps: []string{"CAP_SYS_CHROOT"}}, nil),
			allowRule([]string{"fchdir"}, nil, &profiles.Filter{Caps: []string{"CAP_SYS_ADMIN", "CAP_SYS_CHROOT"}}),
			allowRule([]string{"getppid"}, nil, &profiles.Filter{Caps: []string{"CAP_SYS_ADMIN"}}),
			allowRule([]string{"ptrace"}, &profiles.Filter{MinKernel: &profiles.KernelVersion{Kernel: 5, Major: 11}}, nil),
			allowRule([]string{"kcmp"}, &profiles.Filter{MinKernel: &profiles.KernelVersion{Kernel: 5, Major: 10}}, nil),
			allowRule([]string{"uname"}, nil, &profiles.Filter{MinKernel: &profiles.KernelVersion{Kernel: 5, Major: 10}}),
			{LinuxSyscall: specs.LinuxSyscall{Names: []string{"mkdir"}, Action: specs.ActErrno, ErrnoRet: &errno}},
			{Name: "rmdir", LinuxSyscall: specs.LinuxSyscall{Action: specs.ActErrno}},
			{LinuxSyscall: specs.LinuxSyscall{Names: []string{"socket"}, Action: specs.ActAllow,
				Args: []specs.LinuxSeccompArg{{Index: 0, Value: 2, Op: specs.OpEqualTo}}}},
			{LinuxSyscall: specs.LinuxSyscall{Names: []string{"socket"}, Action: specs.ActAllow,
				Args: []specs.LinuxSeccompArg{{Index: 0, Value: 2, Op: specs.OpEqualTo}}}}, // a duplicate
			{LinuxSyscall: specs.LinuxSyscall{Names: []string{"clone"}, Action: specs.ActAllow,
				Args: []specs.LinuxSeccompArg{{Index: 0, Value: 0xff, ValueTwo: 0x11, Op: specs.OpMaskedEqual}, {Index: 1, Value: 7, Op: specs.OpLessThan}}}},
			{LinuxSyscall: specs.LinuxSyscall{Names: []string{"getuid"}, Action: specs.ActAllow,
				Args: []specs.LinuxSeccompArg{{Index: 0, Value: 2, Op: specs.OpEqualTo}}}},
			allowRule([]string{"getuid"}, nil, nil), // makes the one above redundant
		},
	}
	arch, _ := lookupArch("amd64")
	p, err := fromProfile(prof, arch, Options{Caps: []int{unix.CAP_SYS_CHROOT}, Kernel: "5.10.0-1"})
	if err != nil {
		t.Fatalf("fromProfile: %v", err)
	}
	got := map[string][]Rule{}
	for _, sc := range p.Syscalls {
		got[sc.Name] = sc.Rules
	}
	plain := []Rule{{Action: ActAllow}}
	want := map[string][]Rule{
		"read":    plain,
		"getpid":  plain,
		"getppid": plain,
		"chdir":   plain,
		"kcmp":    plain,
		"getuid":  plain,
		"mkdir":   {{Action: ActErrno(unix.EACCES)}},
		"rmdir":   {{Action: ActErrno(unix.EPERM)}},
		"socket":  {{Action: ActAllow, Args: []Cond{{Index: 0, Op: OpEqual, Value: 2, Low32: true}}}},
		"clone": {{Action: ActAllow, Args: []Cond{
			{Index: 0, Op: OpMaskedEqual, Mask: 0xff, Value: 0x11},
			{Index: 1, Op: OpLess, Value: 7},
		}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fromProfile rules (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"socketcall"}, p.Unknown); diff != "" {
		t.Errorf("Unknown (-want +got):\n%s", diff)
	}
	if p.Default != ActErrno(unix.EPERM) {
		t.Errorf("Default = %v, want errno(EPERM)", p.Default)
	}
}

func TestProfileEvaluationErrors(t *testing.T) {
	arch, _ := lookupArch("amd64")
	for _, tc := range []struct {
		name string
		call profiles.Syscall
		want string
	}{
		{"name and names", profiles.Syscall{Name: "read", LinuxSyscall: specs.LinuxSyscall{Names: []string{"write"}, Action: specs.ActAllow}}, "both name and names"},
		{"unknown capability", profiles.Syscall{LinuxSyscall: specs.LinuxSyscall{Names: []string{"read"}, Action: specs.ActAllow},
			Includes: &profiles.Filter{Caps: []string{"CAP_WIZARDRY"}}}, "unknown capability"},
		{"unknown excluded capability", profiles.Syscall{LinuxSyscall: specs.LinuxSyscall{Names: []string{"read"}, Action: specs.ActAllow},
			Excludes: &profiles.Filter{Caps: []string{"CAP_WIZARDRY"}}}, "unknown capability"},
		{"notify", profiles.Syscall{LinuxSyscall: specs.LinuxSyscall{Names: []string{"read"}, Action: specs.ActNotify}}, "unsupported action"},
		{"errno too big", profiles.Syscall{LinuxSyscall: specs.LinuxSyscall{Names: []string{"read"}, Action: specs.ActErrno, ErrnoRet: new(uint(70000))}}, "out of range"},
		{"index", profiles.Syscall{LinuxSyscall: specs.LinuxSyscall{Names: []string{"read"}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 6, Op: specs.OpEqualTo}}}}, "index 6"},
		{"operator", profiles.Syscall{LinuxSyscall: specs.LinuxSyscall{Names: []string{"read"}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 0, Op: "SCMP_CMP_FOO"}}}}, "unsupported operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prof := &profiles.Seccomp{LinuxSeccomp: specs.LinuxSeccomp{DefaultAction: specs.ActErrno}, Syscalls: []*profiles.Syscall{&tc.call}}
			_, err := fromProfile(prof, arch, Options{Kernel: "6.1"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("fromProfile: error %v, want one containing %q", err, tc.want)
			}
		})
	}

	// Two actions for one syscall are refused rather than ordered.
	prof := &profiles.Seccomp{
		LinuxSeccomp: specs.LinuxSeccomp{DefaultAction: specs.ActErrno},
		Syscalls: []*profiles.Syscall{
			{LinuxSyscall: specs.LinuxSyscall{Names: []string{"read"}, Action: specs.ActAllow}},
			{LinuxSyscall: specs.LinuxSyscall{Names: []string{"read"}, Action: specs.ActErrno}},
		},
	}
	if _, err := fromProfile(prof, arch, Options{Kernel: "6.1"}); err == nil || !strings.Contains(err.Error(), "conflicting actions") {
		t.Errorf("fromProfile with conflicting actions: error %v, want conflicting actions", err)
	}
}
