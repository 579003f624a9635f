// Package spec is the configuration blob the daemon hands to a sandbox's init
// and agent, and the descriptor numbers they find it and their other
// resources at. Behaviour of `warren init` and `warren agent` is driven only by
// these descriptors, never by flags a user might pass.
package spec

import (
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Caps on two per-user resources of a sandbox (RLIMIT_MSGQUEUE,
// RLIMIT_SIGPENDING). The kernel counts both per user at every level of
// user namespaces: a process's own limit bounds its user's count inside the
// sandbox, and the limit its namespace's creator had when it cloned it
// bounds the whole sandbox, as its owner, on the host. Both are set to these
// caps, so neither depends on the limits the daemon happened to start with
// (`ulimit -q unlimited` would otherwise reach every session).
const (
	// MsgQueueBytes is the kernel's default: ten queues of the default
	// size (10 messages of 8 KiB).
	MsgQueueBytes = 819200
	// SigPending queued signals of 80-odd bytes each: well under 1 MiB.
	SigPending = 8192
)

// CapRlimits lowers this process's RLIMIT_MSGQUEUE and RLIMIT_SIGPENDING,
// soft and hard, to MsgQueueBytes and SigPending where they are higher.
// Sandbox init calls it before it execs the agent (every sandboxed process
// inherits them); the daemon calls it before it clones sandboxes, whose
// namespaces take their per-namespace maxima from it.
func CapRlimits() error {
	for _, l := range []struct {
		res int
		max uint64
	}{{unix.RLIMIT_MSGQUEUE, MsgQueueBytes}, {unix.RLIMIT_SIGPENDING, SigPending}} {
		var r unix.Rlimit
		if err := unix.Getrlimit(l.res, &r); err != nil {
			return err
		}
		if r.Cur <= l.max && r.Max <= l.max {
			continue
		}
		r.Cur, r.Max = min(r.Cur, l.max), min(r.Max, l.max)
		if err := unix.Setrlimit(l.res, &r); err != nil {
			return err
		}
	}
	return nil
}

// Version of the blob; init and agent refuse another.
const Version = 1

// Descriptor numbers in the sandbox's init and agent.
const (
	FDSpec     = 3 // the JSON Sandbox, in a sealed memfd (init and agent)
	FDStatus   = 4 // pipe to the daemon: init's progress and errors; closed when the agent starts
	FDListener = 5 // the agent's socket, bound on the host side; init makes it listen
	FDMounts   = 6 // socket on which init receives idmapped layer mounts (user namespace only)
	FDCgroup   = 7 // first cgroup descriptor; see Cgroup for the layout
	// FDExe is the warren binary, open for a dynamically linked agent that
	// starts through the ELF interpreter; the agent closes it first thing.
	FDExe = 100
	// FDMeminfo is the file bound read-only over the sandbox's
	// /proc/meminfo, open for writing: init creates it, the agent keeps it
	// open, and the daemon opens it anew through /proc/<pid>/fd to keep it
	// current (see View). No path inside the sandbox leads to it writable.
	FDMeminfo = 101
	// FDStat is the same for /proc/stat, when the sandbox has its own CPUs.
	FDStat = 102
)

// Status messages init writes to FDStatus; the daemon reads them. They live
// here, beside the descriptor they travel on, so that the daemon's side
// (package sandbox) needs nothing of init's code.
const (
	StatusMoved = 'M' // init left S for S/agent; v2 limits may now be enabled
	StatusError = 'E' // followed by a JSON InitFailure and EOF
)

// InitFailure is what init reports on FDStatus when a step fails.
type InitFailure struct {
	Step  string `json:"step"`
	Error string `json:"error"`
}

// Sandbox describes one sandbox.
type Sandbox struct {
	Version  int    `json:"version"`
	ID       string `json:"id"`
	Hostname string `json:"hostname"`

	Root   Root    `json:"root"`
	Mounts []Mount `json:"mounts,omitempty"`

	// BaseDir is the session's cwd at creation, inside the sandbox. It is
	// created if missing, and relative file paths resolve against it.
	BaseDir string   `json:"base_dir"`
	Env     []string `json:"env"`
	// Shell is the session shell inside the sandbox; empty picks /bin/bash,
	// else /bin/sh.
	Shell string `json:"shell,omitempty"`

	// Caps are the capability numbers the sandbox keeps.
	Caps []int `json:"caps"`

	// UserNS is set when the sandbox runs in its own user namespace (the
	// default): its root is HostID on the host. Then the image's layers and
	// host directories arrive as idmapped mounts on FDMounts, in the order
	// of Root.Lower, every Mount's Source, then every Mount's Lower (see
	// Layers), and Root.Lower holds only their count.
	UserNS *IDRange `json:"userns,omitempty"`
	// RunAs is the uid and gid of every process the agent starts when
	// there is no user namespace: then sandboxed code is an unprivileged
	// host user, not root.
	RunAs *IDRange `json:"run_as,omitempty"`
	// MaskedPaths are hidden (files under /dev/null, directories under an
	// empty read-only tmpfs); ReadOnlyPaths are made read-only. Both are
	// paths inside the sandbox; missing ones are skipped.
	MaskedPaths   []string `json:"masked_paths,omitempty"`
	ReadOnlyPaths []string `json:"read_only_paths,omitempty"`
	// Seccomp is the compiled filter, installed right before the agent is
	// exec'd (8 bytes per instruction), or empty for none.
	Seccomp []byte `json:"seccomp,omitempty"`

	Cgroup Cgroup `json:"cgroup"`

	// BackgroundLogBytes bounds the ring buffer of output written by
	// background processes after their command returned.
	BackgroundLogBytes int `json:"background_log_bytes"`
	// User is who sandboxed processes run as: "" or "root", a name from the
	// image's /etc/passwd, "uid" or "uid:gid". Resolved inside the sandbox.
	User string `json:"user,omitempty"`

	// View is what the sandbox's /proc and /sys say about its memory and
	// CPUs: its own limits, not the host's.
	View View `json:"view"`
}

// View is the sandbox's view of its limits, in the manner of LXCFS.
type View struct {
	// MemoryBytes is the workload's memory limit: /proc/meminfo shows it
	// as MemTotal and the workload's use below it (init writes it with no
	// use, the daemon keeps it current from the workload's memory cgroup).
	// 0 leaves the host's /proc/meminfo.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// CPUs are the host CPUs the sandbox's processes run on (its CPU
	// affinity, what nproc, os.process_cpu_count() and the JVM count), and
	// the only ones /proc/cpuinfo, /sys/devices/system/cpu/online and
	// /proc/stat list (what sysconf(_SC_NPROCESSORS_ONLN), os.cpu_count()
	// and Node's os.cpus() count; the daemon keeps /proc/stat current).
	// Empty leaves all of them.
	CPUs []int `json:"cpus,omitempty"`
}

// IDRange is a block of host ids: sandbox id 0 is HostID on the host.
type IDRange struct {
	HostID uint32 `json:"host_id"`
	Size   uint32 `json:"size"`
}

// Root is the overlay that becomes the sandbox's /.
type Root struct {
	Lower    []string `json:"lower"` // host paths, topmost first
	Upper    string   `json:"upper"`
	Work     string   `json:"work"`
	Target   string   `json:"target"`   // host directory the overlay is mounted on (in the sandbox's mount namespace only)
	Volatile bool     `json:"volatile"` // skip syncs of the upper layer; it never outlives a host crash anyway
}

// Mount is an extra mount inside the new root.
type Mount struct {
	Kind     string `json:"kind"`   // "overlay" or "bind"
	Source   string `json:"source"` // host path: the bind source or the overlay's lower dir
	Target   string `json:"target"` // path inside the sandbox
	Upper    string `json:"upper,omitempty"`
	Work     string `json:"work,omitempty"`
	ReadOnly bool   `json:"read_only,omitempty"`
	// Lower are more read-only layers of an overlay, above Source, topmost
	// first (a snapshot's changes to Target). With a user namespace they
	// travel as idmapped mounts on FDMounts after every Mount's Source.
	Lower []string `json:"lower,omitempty"`
}

// Layers lists the sandbox's read-only layers in the order init stages
// them (and receives them on FDMounts): Root.Lower, every Mount's Source,
// then every Mount's Lower.
func (s *Sandbox) Layers() []string {
	out := append([]string{}, s.Root.Lower...)
	for _, m := range s.Mounts {
		out = append(out, m.Source)
	}
	for _, m := range s.Mounts {
		out = append(out, m.Lower...)
	}
	return out
}

// Cgroup says how many cgroup descriptors follow FDCgroup: Hierarchies
// session-procs files, then as many agent-procs files, then on v1 as many
// workload tasks files or on v2 one workload directory.
type Cgroup struct {
	Version     int `json:"version"`
	Hierarchies int `json:"hierarchies"`
}

// SessionProcsFD returns the descriptor of S/cgroup.procs in hierarchy i.
func (c Cgroup) SessionProcsFD(i int) int { return FDCgroup + i }

// AgentProcsFD returns the descriptor of S/agent/cgroup.procs in hierarchy i.
func (c Cgroup) AgentProcsFD(i int) int { return FDCgroup + c.Hierarchies + i }

// WorkloadFD returns the descriptor of S/workload/tasks in hierarchy i (v1),
// or of the S/workload directory (v2, i == 0).
func (c Cgroup) WorkloadFD(i int) int { return FDCgroup + 2*c.Hierarchies + i }

// WorkloadFDs is the number of workload descriptors.
func (c Cgroup) WorkloadFDs() int {
	if c.Version == 2 {
		return 1
	}
	return c.Hierarchies
}

// LastFD is the highest cgroup descriptor.
func (c Cgroup) LastFD() int { return FDCgroup + 2*c.Hierarchies + c.WorkloadFDs() - 1 }

// ProgramFD is the program init execs as the agent (the file the daemon
// started init from), opened by the daemon, after the cgroup descriptors.
// Init must not open it by a path of its own: a file on the host's tree as
// the sandbox's mount namespace copied it would, as the agent's executable,
// keep that whole copy (every host mount, hundreds on a busy host) alive
// after the pivot detached it.
func (s *Sandbox) ProgramFD() int { return s.Cgroup.LastFD() + 1 }

// LastFD is the highest descriptor the sandbox inherits.
func (s *Sandbox) LastFD() int { return s.ProgramFD() }

// Read decodes the blob from fd FDSpec (read from offset 0, so both init and
// agent can read it).
func Read() (*Sandbox, error) {
	// Read with pread on the bare descriptor: an *os.File would close
	// FDSpec when the garbage collector finalizes it, long after its owner
	// closed or passed it on and the number went to something else (the
	// agent's listening socket, for one).
	var b []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Pread(FDSpec, buf, int64(len(b)))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read spec: %w", err)
		}
		if n == 0 {
			break
		}
		b = append(b, buf[:n]...)
		if len(b) > 1<<24 {
			return nil, fmt.Errorf("read spec: larger than 16 MiB")
		}
	}
	var s Sandbox
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	if s.Version != Version {
		return nil, fmt.Errorf("spec version %d, want %d", s.Version, Version)
	}
	return &s, nil
}
