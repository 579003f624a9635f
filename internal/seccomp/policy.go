package seccomp

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	profiles "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Action is what a filter returns for a syscall: a SECCOMP_RET_* action and
// its data, exactly the 32-bit value the program hands to the kernel.
type Action uint32

// The actions a policy may use. ActErrno builds the errno action.
const (
	// ActAllow runs the syscall (SECCOMP_RET_ALLOW).
	ActAllow Action = unix.SECCOMP_RET_ALLOW
	// ActKillThread kills the calling thread (SECCOMP_RET_KILL_THREAD).
	ActKillThread Action = unix.SECCOMP_RET_KILL_THREAD
	// ActKillProcess kills the whole process (SECCOMP_RET_KILL_PROCESS).
	ActKillProcess Action = unix.SECCOMP_RET_KILL_PROCESS
	// ActTrap sends SIGSYS to the thread (SECCOMP_RET_TRAP).
	ActTrap Action = unix.SECCOMP_RET_TRAP
	// ActLog runs the syscall and logs it (SECCOMP_RET_LOG).
	ActLog Action = unix.SECCOMP_RET_LOG
)

// maxErrno is the largest errno the kernel passes through from
// SECCOMP_RET_ERRNO (MAX_ERRNO); larger values are clamped by the kernel.
const maxErrno = 4095

// ActErrno returns the action that fails the syscall with errno without
// running it (SECCOMP_RET_ERRNO).
func ActErrno(errno unix.Errno) Action {
	return Action(unix.SECCOMP_RET_ERRNO | uint32(errno)&unix.SECCOMP_RET_DATA)
}

// String returns the action as "allow", "errno(EPERM)", "kill_process"…
func (a Action) String() string {
	switch {
	case a == ActAllow:
		return "allow"
	case a == ActKillThread:
		return "kill_thread"
	case a == ActKillProcess:
		return "kill_process"
	case a == ActLog:
		return "log"
	case a&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_TRAP:
		return fmt.Sprintf("trap(%d)", a&unix.SECCOMP_RET_DATA)
	case a&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO:
		e := unix.Errno(a & unix.SECCOMP_RET_DATA)
		if name := unix.ErrnoName(e); name != "" {
			return "errno(" + name + ")"
		}
		return fmt.Sprintf("errno(%d)", uint32(e))
	default:
		return fmt.Sprintf("action(%#x)", uint32(a))
	}
}

// Op is how a Cond compares a syscall argument (libseccomp's SCMP_CMP_*).
// Comparisons are unsigned.
type Op uint8

// The comparison operators.
const (
	OpEqual        Op = iota + 1 // arg == Value
	OpNotEqual                   // arg != Value
	OpLess                       // arg < Value
	OpLessEqual                  // arg <= Value
	OpGreater                    // arg > Value
	OpGreaterEqual               // arg >= Value
	OpMaskedEqual                // arg & Mask == Value
)

var opNames = map[Op]string{
	OpEqual: "==", OpNotEqual: "!=", OpLess: "<", OpLessEqual: "<=",
	OpGreater: ">", OpGreaterEqual: ">=", OpMaskedEqual: "&==",
}

// String returns the operator as Go would write it ("&==" for OpMaskedEqual).
func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Cond is one condition on a syscall argument.
type Cond struct {
	// Index is the argument's position, 0 to 5.
	Index uint8
	// Op is the comparison.
	Op Op
	// Value is the operand; for OpMaskedEqual, the value the masked
	// argument must equal.
	Value uint64
	// Mask is used by OpMaskedEqual only.
	Mask uint64
	// Low32 compares only the low 32 bits of the argument; Value and Mask
	// must then fit in 32 bits. It is right for arguments the kernel
	// declares as int or unsigned int: the kernel ignores their upper half,
	// so a filter must too, or garbage there lets a caller past a rule
	// (socket's family, ioctl's request).
	Low32 bool
}

// String returns the condition as "arg1 == 0x5412".
func (c Cond) String() string {
	s := fmt.Sprintf("arg%d", c.Index)
	if c.Low32 {
		s = "uint32(" + s + ")"
	}
	if c.Op == OpMaskedEqual {
		return fmt.Sprintf("%s & %#x == %#x", s, c.Mask, c.Value)
	}
	return fmt.Sprintf("%s %v %#x", s, c.Op, c.Value)
}

// Rule gives an action to the calls of a syscall whose arguments meet all
// its conditions.
type Rule struct {
	// Action is returned when the rule matches.
	Action Action
	// Args are ANDed; a rule without conditions always matches.
	Args []Cond
}

// Syscall is the rules of one syscall.
type Syscall struct {
	// Name is the syscall's name, as in the kernel's tables.
	Name string
	// Nr is the syscall's number on the policy's architecture.
	Nr uint32
	// Rules are tried in order and the first that matches decides; if none
	// does, the policy's default action applies. Rules with the same action
	// are thus ORed.
	Rules []Rule
}

// Policy is a seccomp policy for one architecture, ready to compile. It is a
// plain value: build it with DefaultPolicy, inspect it, and compile it with
// Compile.
type Policy struct {
	// Arch is the GOARCH the policy is for ("amd64" or "arm64").
	Arch string
	// Default is the action for syscalls no rule matches, for numbers the
	// architecture does not have, and for other architectures and ABIs
	// (i386 via int 0x80, x32).
	Default Action
	// Syscalls lists the syscalls that have rules, sorted by number, each
	// once.
	Syscalls []Syscall
	// Unknown lists, sorted, the names the profile gives that Arch has no
	// number for (Docker's profile names the syscalls of every
	// architecture). They get the default action.
	Unknown []string
}

// Options select what the policy allows.
type Options struct {
	// Arch is the GOARCH to build the policy for; "" means runtime.GOARCH.
	Arch string
	// Caps are the numbers (unix.CAP_*) of the capabilities the sandbox's
	// processes keep in their bounding set. Profile rules that include
	// capabilities apply only if all of them are kept; rules that exclude
	// capabilities are dropped if any is kept.
	Caps []int
	// Kernel is the kernel release MinKernel conditions are evaluated
	// against ("6.1.0-18-amd64" or just "6.1"); "" means the running
	// kernel.
	Kernel string
	// AllowClone3 allows clone3 instead of failing it with ENOSYS.
	//
	// A filter cannot inspect clone3's flags: they are in a struct in the
	// caller's memory, which seccomp does not read. With clone3 failing with
	// ENOSYS, libcs fall back to clone, whose flags are a register the
	// filter checks for CLONE_NEW*. Allowing clone3 therefore allows
	// creating namespaces as far as the kernel permits, so warren sets this
	// only when the kernel itself refuses: the sandbox runs in a user
	// namespace without CAP_SYS_ADMIN over it and with nested namespace
	// creation disabled (user.max_*_namespaces set to 0 in it).
	AllowClone3 bool
}

// Stats counts what a policy allows, for logs and warren doctor.
type Stats struct {
	// Allowed counts syscalls allowed whatever their arguments.
	Allowed int
	// Conditional counts syscalls allowed for some argument values only.
	Conditional int
	// Refused counts syscalls listed with an errno or kill action only (the
	// explicit denials and clone3's ENOSYS); every other syscall gets the
	// default action too.
	Refused int
}

// Stats counts the policy's syscalls by what they allow.
func (p *Policy) Stats() Stats {
	var s Stats
	for _, sc := range p.Syscalls {
		switch {
		case len(sc.Rules) > 0 && sc.Rules[0].Action == ActAllow && len(sc.Rules[0].Args) == 0:
			s.Allowed++
		case slices.ContainsFunc(sc.Rules, func(r Rule) bool { return r.Action == ActAllow }):
			s.Conditional++
		default:
			s.Refused++
		}
	}
	return s
}

// Allowed returns the names of the syscalls the policy allows for at least
// some arguments, sorted.
func (p *Policy) Allowed() []string {
	var names []string
	for _, sc := range p.Syscalls {
		if slices.ContainsFunc(sc.Rules, func(r Rule) bool { return r.Action == ActAllow }) {
			names = append(names, sc.Name)
		}
	}
	sort.Strings(names)
	return names
}

// Lookup returns the rules of the named syscall, and false if the policy
// has none (the syscall then gets the default action).
func (p *Policy) Lookup(name string) (Syscall, bool) {
	i := slices.IndexFunc(p.Syscalls, func(sc Syscall) bool { return sc.Name == name })
	if i < 0 {
		return Syscall{}, false
	}
	return p.Syscalls[i], true
}

// denied are the syscalls warren refuses with EPERM whatever Docker's
// profile and the kept capabilities say. Names an architecture lacks are
// skipped.
var denied = []string{
	// io_uring: a large kernel attack surface with a history of privilege
	// escalations, and its operations are not seen by seccomp.
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// Kernel attack surface with no use in a sandbox: eBPF, perf, and
	// userfaultfd (used to win races in kernel exploits).
	"bpf", "perf_event_open", "userfaultfd",
	// The kernel keyring is not namespaced.
	"keyctl", "add_key", "request_key",
	// Replacing the running kernel.
	"kexec_load", "kexec_file_load",
	// File handles open files by inode, around path-based confinement
	// (Docker's "shocker" escape).
	"open_by_handle_at", "name_to_handle_at",
	// Mounts and namespaces: init fixed the sandbox's layout before exec.
	"mount", "umount2", "pivot_root", "unshare", "setns",
	"move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	// Kernel modules.
	"init_module", "finit_module", "delete_module",
	// Host-wide state.
	"acct", "swapon", "swapoff", "reboot", "syslog", "vhangup",
	"lookup_dcookie", "quotactl", "quotactl_fd", "fanotify_init",
	// Raw I/O port access.
	"iopl", "ioperm",
	// Reading and writing other processes' memory.
	"process_vm_readv", "process_vm_writev",
}

// cloneNewFlags are the namespace flags clone may not carry (as in Docker's
// profile without CAP_SYS_ADMIN).
const cloneNewFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

// args32 lists, per syscall, the arguments the kernel declares as int or
// unsigned int and truncates to 32 bits. Conditions on them compare the low
// 32 bits only (Cond.Low32). libseccomp, and so Docker, compares all 64
// bits: socket(0x100000028, …) passes Docker's "family > AF_VSOCK" rule and
// the kernel then creates an AF_VSOCK socket.
var args32 = map[string][]uint8{
	"socket":      {0}, // int family
	"personality": {0}, // unsigned int personality
	"ioctl":       {1}, // unsigned int cmd
}

// DefaultPolicy returns warren's policy: Docker's default profile evaluated
// for one architecture, the kept capabilities and the kernel, then tightened
// as the package documentation lists.
func DefaultPolicy(opts Options) (*Policy, error) {
	arch, err := lookupArch(opts.Arch)
	if err != nil {
		return nil, err
	}
	p, err := fromProfile(profiles.DefaultProfile(), arch, opts)
	if err != nil {
		return nil, fmt.Errorf("seccomp: Docker's default profile: %w", err)
	}
	rules := map[string][]Rule{}
	for _, sc := range p.Syscalls {
		rules[sc.Name] = sc.Rules
	}

	eperm := ActErrno(unix.EPERM)
	for _, name := range denied {
		rules[name] = []Rule{{Action: eperm}}
	}
	// Docker drops the namespace check on clone when CAP_SYS_ADMIN is kept;
	// warren keeps it, as it denies unshare and setns whatever the caps.
	rules["clone"] = []Rule{{Action: ActAllow, Args: []Cond{{Index: 0, Op: OpMaskedEqual, Mask: cloneNewFlags, Value: 0}}}}
	if opts.AllowClone3 {
		rules["clone3"] = []Rule{{Action: ActAllow}}
	} else {
		rules["clone3"] = []Rule{{Action: ActErrno(unix.ENOSYS)}}
	}
	// TIOCSTI pushes input into a terminal, so into a shell outside the
	// sandbox that shares it; TIOCLINUX can read and write the console.
	if r, ok := rules["ioctl"]; ok {
		deny := []Rule{
			{Action: eperm, Args: []Cond{{Index: 1, Op: OpEqual, Value: uint64(arch.tiocsti), Low32: true}}},
			{Action: eperm, Args: []Cond{{Index: 1, Op: OpEqual, Value: uint64(arch.tioclinux), Low32: true}}},
		}
		rules["ioctl"] = append(deny, r...)
	}

	p.Syscalls = p.Syscalls[:0]
	for name, r := range rules {
		nr, ok := arch.sysnum[name]
		if !ok {
			continue // a tightening for a syscall this arch lacks
		}
		p.Syscalls = append(p.Syscalls, Syscall{Name: name, Nr: nr, Rules: r})
	}
	sortSyscalls(p.Syscalls)
	return p, nil
}

func sortSyscalls(s []Syscall) {
	sort.Slice(s, func(i, j int) bool { return s[i].Nr < s[j].Nr })
}

// fromProfile evaluates a moby profile for arch and opts, as moby's
// setupSeccomp does for runtime.GOARCH and a container's bounding set, and
// resolves the names to numbers.
func fromProfile(prof *profiles.Seccomp, arch *archInfo, opts Options) (*Policy, error) {
	if len(prof.LinuxSeccomp.Syscalls) != 0 {
		return nil, errors.New("the LinuxSeccomp.Syscalls field must be empty")
	}
	kernel, err := resolveKernel(opts.Kernel)
	if err != nil {
		return nil, err
	}
	kept := map[int]bool{}
	for _, c := range opts.Caps {
		kept[c] = true
	}
	def, err := convertAction(prof.DefaultAction, prof.DefaultErrnoRet)
	if err != nil {
		return nil, fmt.Errorf("default action: %w", err)
	}

	rules := map[string][]Rule{}
	unknown := map[string]bool{}
	for i, call := range prof.Syscalls {
		names := call.Names
		if call.Name != "" {
			if len(call.Names) != 0 {
				return nil, fmt.Errorf("rule %d: both name and names are set", i)
			}
			names = []string{call.Name}
		}
		ok, err := applies(call, arch.goarch, kept, kernel)
		if err != nil {
			return nil, fmt.Errorf("rule %d (%s): %w", i, strings.Join(names, ","), err)
		}
		if !ok {
			continue
		}
		action, err := convertAction(call.Action, call.ErrnoRet)
		if err != nil {
			return nil, fmt.Errorf("rule %d (%s): %w", i, strings.Join(names, ","), err)
		}
		for _, name := range names {
			conds, err := convertArgs(call.Args, args32[name])
			if err != nil {
				return nil, fmt.Errorf("rule %d (%s): %w", i, name, err)
			}
			if _, ok := arch.sysnum[name]; !ok {
				unknown[name] = true
				continue
			}
			rules[name] = append(rules[name], Rule{Action: action, Args: conds})
		}
	}

	p := &Policy{Arch: arch.goarch, Default: def}
	for name, r := range rules {
		r, err := normalize(r)
		if err != nil {
			return nil, fmt.Errorf("syscall %s: %w", name, err)
		}
		p.Syscalls = append(p.Syscalls, Syscall{Name: name, Nr: arch.sysnum[name], Rules: r})
	}
	sortSyscalls(p.Syscalls)
	for name := range unknown {
		p.Unknown = append(p.Unknown, name)
	}
	sort.Strings(p.Unknown)
	return p, nil
}

func resolveKernel(release string) (kernelVersion, error) {
	if release == "" {
		return runningKernel()
	}
	return parseKernel(release)
}

// applies reports whether a profile rule's Includes and Excludes select it,
// with moby's semantics.
func applies(call *profiles.Syscall, goarch string, kept map[int]bool, kernel kernelVersion) (bool, error) {
	if ex := call.Excludes; ex != nil {
		if slices.Contains(ex.Arches, goarch) {
			return false, nil
		}
		for _, name := range ex.Caps {
			c, ok := capNumbers[name]
			if !ok {
				return false, fmt.Errorf("unknown capability %q", name)
			}
			if kept[c] {
				return false, nil
			}
		}
		if mk := ex.MinKernel; mk != nil && kernel.atLeast(mk.Kernel, mk.Major) {
			return false, nil
		}
	}
	if in := call.Includes; in != nil {
		if len(in.Arches) > 0 && !slices.Contains(in.Arches, goarch) {
			return false, nil
		}
		for _, name := range in.Caps {
			c, ok := capNumbers[name]
			if !ok {
				return false, fmt.Errorf("unknown capability %q", name)
			}
			if !kept[c] {
				return false, nil
			}
		}
		if mk := in.MinKernel; mk != nil && !kernel.atLeast(mk.Kernel, mk.Major) {
			return false, nil
		}
	}
	return true, nil
}

// convertAction maps a runtime-spec action to an Action. A missing errno
// means EPERM, as in runc.
func convertAction(a specs.LinuxSeccompAction, errnoRet *uint) (Action, error) {
	switch a {
	case specs.ActAllow:
		return ActAllow, nil
	case specs.ActErrno:
		if errnoRet == nil {
			return ActErrno(unix.EPERM), nil
		}
		if *errnoRet > maxErrno {
			return 0, fmt.Errorf("errno %d out of range", *errnoRet)
		}
		return ActErrno(unix.Errno(*errnoRet)), nil
	case specs.ActKill, specs.ActKillThread:
		return ActKillThread, nil
	case specs.ActKillProcess:
		return ActKillProcess, nil
	case specs.ActTrap:
		return ActTrap, nil
	case specs.ActLog:
		return ActLog, nil
	default:
		return 0, fmt.Errorf("unsupported action %q", a)
	}
}

var specOps = map[specs.LinuxSeccompOperator]Op{
	specs.OpEqualTo:      OpEqual,
	specs.OpNotEqual:     OpNotEqual,
	specs.OpLessThan:     OpLess,
	specs.OpLessEqual:    OpLessEqual,
	specs.OpGreaterThan:  OpGreater,
	specs.OpGreaterEqual: OpGreaterEqual,
	specs.OpMaskedEqual:  OpMaskedEqual,
}

// convertArgs maps runtime-spec argument conditions to Conds; low32 lists
// the indexes the kernel reads as 32-bit values.
func convertArgs(args []specs.LinuxSeccompArg, low32 []uint8) ([]Cond, error) {
	var conds []Cond
	for _, a := range args {
		op, ok := specOps[a.Op]
		if !ok {
			return nil, fmt.Errorf("unsupported operator %q", a.Op)
		}
		if a.Index > 5 {
			return nil, fmt.Errorf("argument index %d out of range", a.Index)
		}
		c := Cond{Index: uint8(a.Index), Op: op, Value: a.Value, Low32: slices.Contains(low32, uint8(a.Index))}
		if op == OpMaskedEqual {
			// libseccomp's SCMP_CMP_MASKED_EQ: datum_a is the mask.
			c.Mask, c.Value = a.Value, a.ValueTwo
		}
		conds = append(conds, c)
	}
	return conds, nil
}

// normalize checks that a syscall's rules from the profile agree on the
// action, drops duplicates, and collapses them to one rule when one has no
// conditions (the others are then implied).
func normalize(rules []Rule) ([]Rule, error) {
	for _, r := range rules {
		if r.Action != rules[0].Action {
			return nil, fmt.Errorf("conflicting actions %v and %v", rules[0].Action, r.Action)
		}
	}
	var out []Rule
	for _, r := range rules {
		if len(r.Args) == 0 {
			return []Rule{{Action: r.Action}}, nil
		}
		if !slices.ContainsFunc(out, func(o Rule) bool { return slices.Equal(o.Args, r.Args) }) {
			out = append(out, r)
		}
	}
	return out, nil
}
