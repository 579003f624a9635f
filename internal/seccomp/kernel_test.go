package seccomp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// childEnv makes the test binary act as the child of the real-kernel tests
// (see TestMain): "filter" loads the default policy before its probes,
// "control" runs them unfiltered, "nonnp" tries Load without no_new_privs.
const childEnv = "WARREN_SECCOMP_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(childMain(mode))
	}
	os.Exit(m.Run())
}

// probe is one syscall the child makes.
type probe struct {
	name string
	nr   uintptr
	args [6]uintptr
	// ptyArg0 replaces args[0] with a pty master's descriptor.
	ptyArg0 bool
	// amd64 marks probes that only make sense on x86_64.
	amd64 bool
	// want is the errno expected under the filter, 0 for success.
	want unix.Errno
	// filtered says the filter answers (with want); otherwise the filter
	// allows the call and the kernel answers.
	filtered bool
	// differs says that without the filter, as root, the kernel answers
	// something other than want: the probe then proves the filter acts.
	differs bool
}

const (
	keyctlGetKeyringID    = 0
	keySpecSessionKeyring = ^uintptr(2) // -3
	// x32 numbers set __X32_SYSCALL_BIT.
	x32Getpid = 0x40000000 | 39
)

var probes = []probe{
	{name: "getpid", nr: unix.SYS_GETPID},
	{name: "read(-1)", nr: unix.SYS_READ, args: [6]uintptr{^uintptr(0)}, want: unix.EBADF},
	{name: "unshare(CLONE_NEWUSER)", nr: unix.SYS_UNSHARE, args: [6]uintptr{unix.CLONE_NEWUSER}, want: unix.EPERM, filtered: true, differs: true},
	{name: "mount(NULL, NULL, …)", nr: unix.SYS_MOUNT, want: unix.EPERM, filtered: true, differs: true},
	{name: "setns(-1, 0)", nr: unix.SYS_SETNS, args: [6]uintptr{^uintptr(0)}, want: unix.EPERM, filtered: true, differs: true},
	{name: "keyctl(KEYCTL_GET_KEYRING_ID)", nr: unix.SYS_KEYCTL, args: [6]uintptr{keyctlGetKeyringID, keySpecSessionKeyring}, want: unix.EPERM, filtered: true, differs: true},
	{name: "io_uring_setup(0, NULL)", nr: unix.SYS_IO_URING_SETUP, want: unix.EPERM, filtered: true},
	{name: "bpf(-1)", nr: unix.SYS_BPF, args: [6]uintptr{^uintptr(0)}, want: unix.EPERM, filtered: true, differs: true},
	{name: "userfaultfd(-1)", nr: unix.SYS_USERFAULTFD, args: [6]uintptr{^uintptr(0)}, want: unix.EPERM, filtered: true, differs: true},
	{name: "perf_event_open(NULL)", nr: unix.SYS_PERF_EVENT_OPEN, want: unix.EPERM, filtered: true, differs: true},
	{name: "open_by_handle_at(-1, NULL)", nr: unix.SYS_OPEN_BY_HANDLE_AT, args: [6]uintptr{^uintptr(0)}, want: unix.EPERM, filtered: true, differs: true},
	{name: "process_vm_readv(self, NULL, 0)", nr: unix.SYS_PROCESS_VM_READV, want: unix.EPERM, filtered: true, differs: true},
	// CLONE_FS makes the kernel refuse these with EINVAL, so nothing forks
	// if the filter lets them through.
	{name: "clone(CLONE_NEWUSER|CLONE_FS)", nr: unix.SYS_CLONE, args: [6]uintptr{unix.CLONE_NEWUSER | unix.CLONE_FS}, want: unix.EPERM, filtered: true, differs: true},
	{name: "clone(CLONE_NEWNS|CLONE_FS)", nr: unix.SYS_CLONE, args: [6]uintptr{unix.CLONE_NEWNS | unix.CLONE_FS}, want: unix.EPERM, filtered: true, differs: true},
	{name: "clone3(NULL, 0)", nr: unix.SYS_CLONE3, want: unix.ENOSYS, filtered: true, differs: true},
	{name: "socket(AF_VSOCK)", nr: unix.SYS_SOCKET, args: [6]uintptr{unix.AF_VSOCK, unix.SOCK_STREAM}, want: unix.EPERM, filtered: true, differs: true},
	{name: "socket(1<<32|AF_VSOCK)", nr: unix.SYS_SOCKET, args: [6]uintptr{1<<32 | unix.AF_VSOCK, unix.SOCK_STREAM}, want: unix.EPERM, filtered: true, differs: true},
	{name: "personality(0xffffffff)", nr: unix.SYS_PERSONALITY, args: [6]uintptr{0xffffffff}},
	{name: "personality(ADDR_NO_RANDOMIZE)", nr: unix.SYS_PERSONALITY, args: [6]uintptr{addrNoRandom}, want: unix.EPERM, filtered: true, differs: true},
	// With a NULL argument the kernel fails TIOCSTI with EFAULT once it
	// gets that far (as root), so nothing is injected without the filter.
	{name: "ioctl(pty, TIOCSTI, NULL)", nr: unix.SYS_IOCTL, ptyArg0: true, args: [6]uintptr{1: unix.TIOCSTI}, want: unix.EPERM, filtered: true, differs: true},
	{name: "ioctl(pty, 1<<32|TIOCSTI, NULL)", nr: unix.SYS_IOCTL, ptyArg0: true, args: [6]uintptr{1: 1<<32 | unix.TIOCSTI}, want: unix.EPERM, filtered: true, differs: true},
	{name: "ioctl(pty, TIOCLINUX, NULL)", nr: unix.SYS_IOCTL, ptyArg0: true, args: [6]uintptr{1: unix.TIOCLINUX}, want: unix.EPERM, filtered: true, differs: true},
	// EFAULT comes from the kernel, not the filter: the call got through.
	{name: "ioctl(pty, TCGETS, NULL)", nr: unix.SYS_IOCTL, ptyArg0: true, args: [6]uintptr{1: unix.TCGETS}, want: unix.EFAULT},
	{name: "x32 getpid", nr: x32Getpid, amd64: true, want: unix.EPERM, filtered: true, differs: true},
	{name: "syscall 1000", nr: 1000, want: unix.EPERM, filtered: true, differs: true},
}

// probeResult is what the child reports about one probe.
type probeResult struct {
	Name    string
	Nr      uint64
	Args    [6]uint64
	Ret     uint64
	Errno   int
	Skipped string `json:",omitempty"`
}

// taskStatus is the seccomp state of one thread of the child.
type taskStatus struct {
	TID, Seccomp, Filters, NoNewPrivs string
}

// childReport is the child's output.
type childReport struct {
	Pid    int
	Probes []probeResult
	Tasks  []taskStatus
	Err    string `json:",omitempty"`
}

// threadsBefore and threadsAfter are how many extra threads the child
// starts before and after it loads the filter.
const threadsBefore, threadsAfter = 3, 3

func childMain(mode string) int {
	runtime.LockOSThread()
	rep := childReport{Pid: os.Getpid()}
	if err := child(mode, &rep); err != nil {
		rep.Err = err.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(&rep); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startThreads starts n goroutines that each hold an OS thread of their
// own until the process exits.
func startThreads(n int) {
	ready := make(chan struct{})
	for range n {
		go func() {
			runtime.LockOSThread()
			ready <- struct{}{}
			select {}
		}()
	}
	for range n {
		<-ready
	}
}

func child(mode string, rep *childReport) error {
	p, err := DefaultPolicy(Options{Caps: keptCaps})
	if err != nil {
		return err
	}
	prog, err := Compile(p)
	if err != nil {
		return err
	}
	pty := -1
	if fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0); err == nil {
		pty = fd
	}
	startThreads(threadsBefore)

	switch mode {
	case "filter":
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
		}
		if err := Load(prog); err != nil {
			return err
		}
	case "nonnp":
		return Load(prog)
	case "control":
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	startThreads(threadsAfter)

	for _, pr := range probes {
		res := probeResult{Name: pr.name}
		args := pr.args
		switch {
		case pr.amd64 && runtime.GOARCH != "amd64":
			res.Skipped = "not amd64"
		case pr.ptyArg0 && pty < 0:
			res.Skipped = "no /dev/ptmx"
		}
		if res.Skipped == "" {
			if pr.ptyArg0 {
				args[0] = uintptr(pty)
			}
			r, _, errno := unix.Syscall6(pr.nr, args[0], args[1], args[2], args[3], args[4], args[5])
			res.Ret, res.Errno = uint64(r), int(errno)
		}
		res.Nr = uint64(pr.nr)
		for i, a := range args {
			res.Args[i] = uint64(a)
		}
		rep.Probes = append(rep.Probes, res)
	}

	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		return err
	}
	for _, path := range tasks {
		st, err := readStatus(path)
		if err != nil {
			return err
		}
		rep.Tasks = append(rep.Tasks, taskStatus{
			TID: filepath.Base(filepath.Dir(path)), Seccomp: st["Seccomp"], Filters: st["Seccomp_filters"], NoNewPrivs: st["NoNewPrivs"],
		})
	}
	return nil
}

// readStatus returns the fields of a /proc status file.
func readStatus(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fields := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	return fields, sc.Err()
}

// runChild re-executes the test binary in mode and returns its report.
func runChild(t *testing.T, mode string) childReport {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child %s: %v\nstderr:\n%s", mode, err, stderr.String())
	}
	var rep childReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("child %s: decode report %q: %v", mode, out, err)
	}
	return rep
}

// requireSeccomp skips unless this kernel and architecture can run the
// real-kernel tests, and returns the test process's own status.
func requireSeccomp(t *testing.T) map[string]string {
	t.Helper()
	if _, err := lookupArch(""); err != nil {
		t.Skip(err)
	}
	st, err := readStatus("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if _, ok := st["Seccomp"]; !ok {
		t.Skip("kernel without CONFIG_SECCOMP")
	}
	return st
}

// TestKernelFilter loads the default policy in a child process on the real
// kernel and checks what its syscalls get, and that every thread of the
// child, started before or after the load, is filtered.
func TestKernelFilter(t *testing.T) {
	self := requireSeccomp(t)
	rep := runChild(t, "filter")
	if rep.Err != "" {
		t.Fatalf("child: %s", rep.Err)
	}

	p, err := DefaultPolicy(Options{Caps: keptCaps})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	vm := newVM(t, prog)
	arch, _ := lookupArch("")
	for i, res := range rep.Probes {
		pr := probes[i]
		if res.Skipped != "" {
			t.Logf("%s: skipped: %s", pr.name, res.Skipped)
			continue
		}
		if got := unix.Errno(res.Errno); got != pr.want {
			t.Errorf("%s under the filter: errno %d (%v), want %d (%v)", pr.name, got, got, pr.want, pr.want)
		}
		// The userspace VM must agree with the kernel on the same input.
		want := ActAllow
		if pr.filtered {
			want = ActErrno(pr.want)
		}
		if got := run(t, vm, call{arch: arch.audit, nr: uint32(res.Nr), args: res.Args}); got != want {
			t.Errorf("%s: the VM says %v, the kernel behaved as %v", pr.name, got, want)
		}
	}
	if got := rep.Probes[0]; got.Ret != uint64(rep.Pid) {
		t.Errorf("getpid() = %d, want %d", got.Ret, rep.Pid)
	}

	// Every thread carries the filter: Seccomp 2 (filter mode), one more
	// filter than this process has, and no_new_privs (which TSYNC sets on
	// the other threads).
	wantFilters := "1"
	if n := self["Seccomp_filters"]; n != "" && n != "0" {
		var k int
		fmt.Sscan(n, &k)
		wantFilters = fmt.Sprint(k + 1)
	}
	t.Logf("child has %d threads", len(rep.Tasks))
	if len(rep.Tasks) < 1+threadsBefore+threadsAfter {
		t.Errorf("child has %d threads, want at least %d", len(rep.Tasks), 1+threadsBefore+threadsAfter)
	}
	for _, ts := range rep.Tasks {
		want := taskStatus{TID: ts.TID, Seccomp: "2", Filters: wantFilters, NoNewPrivs: "1"}
		if self["Seccomp_filters"] == "" {
			want.Filters = "" // kernels before 5.9 do not show it
		}
		if ts != want {
			t.Errorf("thread %s: %+v, want %+v", ts.TID, ts, want)
		}
	}
}

// TestKernelControl runs the probes without the filter, to show that the
// answers TestKernelFilter checks come from the filter and not from the
// kernel or the environment.
func TestKernelControl(t *testing.T) {
	self := requireSeccomp(t)
	if os.Geteuid() != 0 || self["Seccomp"] != "0" {
		t.Skip("needs root outside any seccomp filter")
	}
	rep := runChild(t, "control")
	if rep.Err != "" {
		t.Fatalf("child: %s", rep.Err)
	}
	for i, res := range rep.Probes {
		pr := probes[i]
		got := unix.Errno(res.Errno)
		t.Logf("%s without the filter: errno %d (%v)", pr.name, got, got)
		if pr.differs && res.Skipped == "" && got == pr.want {
			t.Errorf("%s without the filter: errno %v, the same as under it", pr.name, got)
		}
	}
	for _, ts := range rep.Tasks {
		if ts.Seccomp != "0" {
			t.Errorf("thread %s: Seccomp %s without a filter", ts.TID, ts.Seccomp)
		}
	}
}

// TestLoadNeedsNoNewPrivs checks that Load refuses to run without
// no_new_privs, even as root.
func TestLoadNeedsNoNewPrivs(t *testing.T) {
	self := requireSeccomp(t)
	if self["NoNewPrivs"] == "1" {
		t.Skip("no_new_privs is already set on this process")
	}
	rep := runChild(t, "nonnp")
	if !strings.Contains(rep.Err, "no_new_privs is not set") {
		t.Errorf("Load without no_new_privs: error %q, want no_new_privs is not set", rep.Err)
	}
}

func TestLoadRejectsInvalid(t *testing.T) {
	// Validation fails before any syscall, so this is safe in the test
	// process itself.
	for _, prog := range [][]unix.SockFilter{nil, {{Code: opLoadAbs}}} {
		if err := Load(prog); err == nil {
			t.Errorf("Load(%v) succeeded", prog)
		}
	}
}
