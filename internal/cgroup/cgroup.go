// Package cgroup places sandboxes in cgroups and limits them, on cgroup v1
// (hybrid hosts like our CI machine) and v2 (most production hosts) behind one
// API, so no other package branches on the version.
//
// Every session gets a cgroup S under warren's parent with two leaves:
//
//	S/agent     the sandbox's PID 1 (the agent); not limited by the workload's
//	            pids or CPU limits, so a fork bomb or a CPU hog in the sandbox
//	            can never starve or crash the agent (a Go program dies when it
//	            cannot create a thread).
//	S/workload  every process the agent starts; carries the session's limits.
//
// S itself caps the sum (workload limits plus a small allowance for the
// agent). The sandbox's cgroup namespace is rooted at S, so processes see
// /workload and /agent, never the host's hierarchy. On v1 the memory
// hierarchy has no S/agent: the agent stays in S there (see leaves).
//
// The package only writes cgroupfs files; it never starts processes.
package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Limits are the hard limits of a session's workload. Zero means no limit.
type Limits struct {
	MemoryBytes int64
	Pids        int64
	CPUs        float64
}

// Stats are a workload's resource use.
type Stats struct {
	MemoryBytes uint64
	Pids        uint64
	CPUSeconds  float64
	OOMKills    uint64
}

// Agent allowances added on top of the workload's limits at the S level.
const (
	AgentMemoryBytes = 64 << 20
	AgentPids        = 128
)

// v1 controllers: the first three are required, the rest are used when
// present.
var (
	v1Required = []string{"memory", "pids", "cpu"}
	v1Optional = []string{"cpuacct", "freezer"}
	v2Wanted   = []string{"memory", "pids", "cpu"}
)

// Hierarchy is the host's cgroup layout and warren's parent in it.
type Hierarchy struct {
	version int
	root    string            // v2: the unified mount point
	mounts  map[string]string // v1: controller -> mount point
	// base (v2) is the delegated cgroup warren's parent lives below,
	// relative to root ("" for the root itself; see delegation). leaf is
	// the child of base the daemon moves itself into in Setup ("" when it
	// already runs in one). stuck is a delegated cgroup the daemon runs in
	// directly and does not nest in.
	base, leaf, stuck string
	parent            string // warren's parent, relative to the root(s) or to base
}

// DaemonLeaf is the cgroup a daemon started at the root of a container's
// cgroup namespace moves itself (and whatever else runs there) into, so
// that the namespace's root holds no process and can hand controllers to
// the sessions' parent: cgroup v2 puts processes in leaves only ("no
// internal processes"). The name matches what the unit in packaging/ asks
// systemd 254+ for with DelegateSubgroup=daemon.
const DaemonLeaf = "daemon"

// Detect reads /proc/self/mountinfo and returns the host's hierarchy with
// warren's cgroups under parent (a relative path such as "warren").
func Detect(parent string) (*Hierarchy, error) {
	if err := checkParent(parent); err != nil {
		return nil, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		h := NewV2("/sys/fs/cgroup", parent)
		own, err := ownCgroup("/proc/self/cgroup")
		if err != nil {
			return nil, err
		}
		h.base, h.leaf, h.stuck = delegation(h.root, own)
		if h.base != "" && (parent == DaemonLeaf || strings.HasPrefix(parent, DaemonLeaf+"/")) {
			return nil, fmt.Errorf("cgroup parent %q is the daemon's own leaf in the delegated cgroup %s; choose another name", parent, h.base)
		}
		return h, nil
	}
	mounts, err := v1Mounts("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	for _, c := range v1Required {
		if mounts[c] == "" {
			return nil, fmt.Errorf("cgroup v1 controller %q is not mounted; warren needs memory, pids and cpu to enforce limits", c)
		}
	}
	return NewV1(mounts, parent), nil
}

// ownCgroup returns this process's cgroup v2 path from /proc/self/cgroup
// (the "0::" line), as seen from its cgroup namespace.
func ownCgroup(procCgroup string) (string, error) {
	b, err := os.ReadFile(procCgroup)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s has no cgroup v2 entry", procCgroup)
}

// delegation finds the subtree a service manager handed to the daemon,
// whose process is in own (a path below the v2 mount root). It returns the
// cgroup to nest warren's parent in (relative to root; "" for the root, as
// before: a daemon run by hand, or by a manager that delegates nothing), the
// leaf to move into first ("" for none), and, when the daemon runs directly
// in a delegated cgroup that it must not nest in, that cgroup.
//
// A cgroup is delegated when it carries systemd's trusted.delegate (or, for
// a user manager, user.delegate) extended attribute, set by Delegate=yes.
//
//   - Below a delegated cgroup D (systemd 254+ with DelegateSubgroup=daemon
//     starts the daemon in D/daemon): the parent nests in D.
//   - Directly in D (Delegate=yes without DelegateSubgroup=): the parent
//     stays at the root. Nesting would have to enable controllers in D for
//     the sessions below it, and cgroup v2 then refuses any process in D
//     ("no internal processes"): the next start of the unit, which systemd
//     puts in D, would fail with EBUSY while kept sessions live there, so a
//     restart could never adopt them. Returned as stuck, for doctor to say.
//   - The root of a cgroup namespace that is not the hierarchy's root (a
//     container with a private cgroup namespace): its owner gave the whole
//     namespace away, and a new container starts in a fresh one, so the
//     daemon moves into a leaf and the parent nests beside it.
//
// Only the real root cgroup may hold processes and enable controllers for
// children at once; it has no cgroup.type.
func delegation(root, own string) (base, leaf, stuck string) {
	if own == "/" {
		if exists(filepath.Join(root, "cgroup.type")) {
			return "/", DaemonLeaf, ""
		}
		return "", "", ""
	}
	if !strings.HasPrefix(own, "/") || strings.HasPrefix(own, "/..") {
		// Outside our cgroup namespace's view: nothing to nest into.
		return "", "", ""
	}
	for p := own; p != "/"; p = filepath.Dir(p) {
		if delegated(filepath.Join(root, p)) {
			if p == own {
				return "", "", p
			}
			return p, "", ""
		}
	}
	return "", "", ""
}

func delegated(dir string) bool {
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		buf := make([]byte, 8)
		n, err := unix.Getxattr(dir, attr, buf)
		if err == nil && strings.TrimSpace(string(buf[:n])) == "1" {
			return true
		}
	}
	return false
}

func checkParent(parent string) error {
	if parent == "" || filepath.IsAbs(parent) || parent != filepath.Clean(parent) || strings.HasPrefix(parent, "..") {
		return fmt.Errorf("cgroup parent %q must be a clean relative path", parent)
	}
	return nil
}

// NewV1 returns a v1 hierarchy over the given controller mount points.
func NewV1(mounts map[string]string, parent string) *Hierarchy {
	return &Hierarchy{version: 1, mounts: mounts, parent: parent}
}

// NewV2 returns a v2 hierarchy mounted at root.
func NewV2(root, parent string) *Hierarchy {
	return &Hierarchy{version: 2, root: root, parent: parent}
}

func v1Mounts(mountinfo string) (map[string]string, error) {
	all, err := cgroupMounts(mountinfo)
	if err != nil {
		return nil, err
	}
	mounts := map[string]string{}
	for _, m := range all {
		if m.fstype != "cgroup" {
			continue
		}
		for _, opt := range m.superOpts {
			if slices.Contains(v1Required, opt) || slices.Contains(v1Optional, opt) {
				if _, seen := mounts[opt]; !seen {
					mounts[opt] = m.point
				}
			}
		}
	}
	return mounts, nil
}

// mount is a cgroup or cgroup2 mount from mountinfo.
type mount struct {
	point, fstype string
	superOpts     []string
}

func cgroupMounts(mountinfo string) ([]mount, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+3 >= len(fields) || (fields[sep+1] != "cgroup" && fields[sep+1] != "cgroup2") {
			continue
		}
		mounts = append(mounts, mount{point: fields[4], fstype: fields[sep+1], superOpts: strings.Split(fields[sep+3], ",")})
	}
	return mounts, sc.Err()
}

// Version is 1 or 2.
func (h *Hierarchy) Version() int { return h.version }

// Dirs are warren's parent cgroup directories, one per hierarchy: where
// sessions' cgroups are made.
func (h *Hierarchy) Dirs() []string { return h.dirs("") }

// Delegated returns, on v2, the delegated cgroup warren's parent nests in
// (relative to the mount root; "" when it does not nest), the leaf the
// daemon moves into first ("" for none), and a delegated cgroup the daemon
// runs in directly without nesting in it ("" for none; see delegation).
func (h *Hierarchy) Delegated() (base, leaf, stuck string) { return h.base, h.leaf, h.stuck }

// Parent is warren's parent cgroup relative to the root(s), the delegated
// cgroup it nests in (v2) included: two daemons share a parent exactly when
// their Parents are equal.
func (h *Hierarchy) Parent() string { return filepath.Join(h.base, h.parent) }

// Controllers lists the controllers warren will use.
func (h *Hierarchy) Controllers() []string {
	if h.version == 2 {
		return v2Wanted
	}
	var cs []string
	for _, c := range append(slices.Clone(v1Required), v1Optional...) {
		if h.mounts[c] != "" {
			cs = append(cs, c)
		}
	}
	return cs
}

// dirs returns one directory per distinct hierarchy for the relative path rel.
func (h *Hierarchy) dirs(rel string) []string {
	if h.version == 2 {
		return []string{filepath.Join(h.root, h.base, h.parent, rel)}
	}
	var out []string
	for _, c := range h.Controllers() {
		d := filepath.Join(h.mounts[c], h.parent, rel)
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// leaves returns a session's cgroups below d, its directory in one
// hierarchy, S first. On v1 the memory hierarchy has no agent leaf: the
// agent stays in S there (v1 allows processes in inner cgroups), where S's
// limit is the workload's plus the agent's allowance, as before. A memory
// cgroup is the dearest kind the kernel makes (its shrinker table alone
// grows with every filesystem the host ever had mounted at once; 190 KiB
// each on our CI VM), so a session makes two, not three. v2 forbids
// processes in S once its children have controllers, so there the agent
// keeps its leaf.
func (h *Hierarchy) leaves(d string) []string {
	if h.version == 1 && h.mounts["memory"] != "" && strings.HasPrefix(d, filepath.Join(h.mounts["memory"], h.parent)+"/") {
		return []string{"", "workload"}
	}
	return []string{"", "agent", "workload"}
}

// controllerDir returns the directory of rel in the hierarchy of controller c.
func (h *Hierarchy) controllerDir(c, rel string) string {
	if h.version == 2 {
		return filepath.Join(h.root, h.base, h.parent, rel)
	}
	if h.mounts[c] == "" {
		return ""
	}
	return filepath.Join(h.mounts[c], h.parent, rel)
}

// Setup creates warren's parent cgroup and, on v2, enables the controllers
// for its children. In a delegated cgroup where the daemon runs itself, it
// first moves every process there into DaemonLeaf.
func (h *Hierarchy) Setup() error {
	if h.version == 2 {
		dir := filepath.Join(h.root, h.base)
		if h.leaf != "" {
			if err := evacuate(dir, filepath.Join(dir, h.leaf)); err != nil {
				return err
			}
		}
		// Enable the controllers in every ancestor from the root (or the
		// delegated cgroup: above it is the service manager's) down.
		for _, part := range strings.Split(h.parent, "/") {
			if err := enable(dir, v2Wanted); err != nil {
				return err
			}
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("create cgroup %s: %w", dir, err)
			}
		}
		return enable(dir, v2Wanted)
	}
	for _, d := range h.dirs("") {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", d, err)
		}
	}
	return nil
}

// evacuate moves every process of the cgroup from into the leaf to (made
// if missing): this daemon and whatever the service manager started beside
// it, such as a wrapper shell. A process that forks meanwhile leaves a child
// behind, so it repeats until from is empty.
func evacuate(from, to string) error {
	if err := os.Mkdir(to, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create the daemon's cgroup %s: %w", to, err)
	}
	for range 100 {
		b, err := os.ReadFile(filepath.Join(from, "cgroup.procs"))
		if err != nil {
			return fmt.Errorf("read %s/cgroup.procs: %w", from, err)
		}
		pids := strings.Fields(string(b))
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			// ESRCH: it exited meanwhile.
			if err := writeFile(filepath.Join(to, "cgroup.procs"), p); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("move process %s from the delegated cgroup %s into %s: %w", p, from, to, err)
			}
		}
	}
	return fmt.Errorf("processes keep appearing in the delegated cgroup %s", from)
}

func enable(dir string, controllers []string) error {
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("read %s/cgroup.controllers: %w", dir, err)
	}
	have := strings.Fields(string(avail))
	var b strings.Builder
	for _, c := range controllers {
		if !slices.Contains(have, c) {
			return fmt.Errorf("cgroup v2 controller %q is not available in %s (is the subtree delegated?)", c, dir)
		}
		fmt.Fprintf(&b, "+%s ", c)
	}
	if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), strings.TrimSpace(b.String())); err != nil {
		return fmt.Errorf("enable controllers in %s: %w", dir, err)
	}
	return nil
}

// Teardown removes warren's parent cgroup if it is empty.
func (h *Hierarchy) Teardown() error {
	var errs []error
	for _, d := range h.dirs("") {
		if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// Sessions lists the names of session cgroups that exist under the parent.
func (h *Hierarchy) Sessions() ([]string, error) {
	var names []string
	for _, d := range h.dirs("") {
		ents, err := os.ReadDir(d)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		for _, e := range ents {
			if e.IsDir() && !slices.Contains(names, e.Name()) {
				names = append(names, e.Name())
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// Session is the cgroup S of one sandbox.
type Session struct {
	h      *Hierarchy
	name   string
	limits Limits

	freezeMu sync.Mutex
	freezes  int // Freezes not yet thawed; guarded by freezeMu

	oomMu sync.Mutex
	// oomFile is the workload's memory.events (v2) or memory.oom_control
	// (v1), opened at the first OOMKills and read again from offset 0 on
	// every later one: every exec reads it twice, and an open+read+close
	// each time cost a tenth of an exec's CPU. Guarded by oomMu.
	oomFile *os.File
}

// NewSession creates S, S/agent and S/workload for the named session. On v1
// the limits apply at once; on v2 they apply in Activate, once the sandbox's
// init has left S (v2 forbids processes in a cgroup whose children have
// controllers enabled).
func (h *Hierarchy) NewSession(name string, l Limits) (*Session, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("bad cgroup name %q", name)
	}
	s := &Session{h: h, name: name, limits: l}
	for _, d := range h.dirs(name) {
		for _, sub := range h.leaves(d) {
			if err := os.Mkdir(filepath.Join(d, sub), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				s.Destroy()
				return nil, fmt.Errorf("create cgroup %s: %w", filepath.Join(d, sub), err)
			}
		}
	}
	if err := s.setSessionLimits(); err != nil {
		s.Destroy()
		return nil, err
	}
	if h.version == 1 {
		if err := s.setWorkloadLimits(); err != nil {
			s.Destroy()
			return nil, err
		}
	}
	return s, nil
}

// OpenSession returns the handle of an existing session cgroup (for cleanup).
func (h *Hierarchy) OpenSession(name string) *Session { return &Session{h: h, name: name} }

// Name is the session's cgroup name.
func (s *Session) Name() string { return s.name }

func (s *Session) file(controller, leaf, name string) string {
	d := s.h.controllerDir(controller, filepath.Join(s.name, leaf))
	if d == "" {
		return ""
	}
	return filepath.Join(d, name)
}

func (s *Session) setSessionLimits() error {
	l := s.limits
	if l.MemoryBytes > 0 {
		if err := s.setMemory("", l.MemoryBytes+AgentMemoryBytes); err != nil {
			return err
		}
	}
	if l.Pids > 0 {
		if err := writeFile(s.file("pids", "", "pids.max"), strconv.FormatInt(l.Pids+AgentPids, 10)); err != nil {
			return fmt.Errorf("set session pids limit: %w", err)
		}
	}
	return nil
}

func (s *Session) setWorkloadLimits() error {
	l := s.limits
	if l.MemoryBytes > 0 {
		if err := s.setMemory("workload", l.MemoryBytes); err != nil {
			return err
		}
	}
	if l.Pids > 0 {
		// On v1 the agent's spawner thread lives in the workload and counts
		// as one task; give it its slot so the user gets the full limit.
		pids := l.Pids
		if s.h.version == 1 {
			pids++
		}
		if err := writeFile(s.file("pids", "workload", "pids.max"), strconv.FormatInt(pids, 10)); err != nil {
			return fmt.Errorf("set pids limit: %w", err)
		}
	}
	if l.CPUs > 0 {
		const period = 100000
		quota := int64(l.CPUs * period)
		quota = max(quota, 1000)
		if s.h.version == 2 {
			if err := writeFile(s.file("cpu", "workload", "cpu.max"), fmt.Sprintf("%d %d", quota, period)); err != nil {
				return fmt.Errorf("set cpu limit: %w", err)
			}
		} else {
			if err := writeFile(s.file("cpu", "workload", "cpu.cfs_period_us"), strconv.Itoa(period)); err != nil {
				return fmt.Errorf("set cpu period: %w", err)
			}
			if err := writeFile(s.file("cpu", "workload", "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10)); err != nil {
				return fmt.Errorf("set cpu limit: %w", err)
			}
		}
	}
	return nil
}

func (s *Session) setMemory(leaf string, bytes int64) error {
	v := strconv.FormatInt(bytes, 10)
	if s.h.version == 2 {
		if err := writeFile(s.file("memory", leaf, "memory.max"), v); err != nil {
			return fmt.Errorf("set memory limit: %w", err)
		}
		// No swap: a limit that swaps is not a limit. Absent without swap
		// accounting.
		if f := s.file("memory", leaf, "memory.swap.max"); exists(f) {
			if err := writeFile(f, "0"); err != nil {
				return fmt.Errorf("set swap limit: %w", err)
			}
		}
		return nil
	}
	if err := writeFile(s.file("memory", leaf, "memory.limit_in_bytes"), v); err != nil {
		return fmt.Errorf("set memory limit: %w", err)
	}
	if f := s.file("memory", leaf, "memory.memsw.limit_in_bytes"); exists(f) {
		if err := writeFile(f, v); err != nil {
			return fmt.Errorf("set memory+swap limit: %w", err)
		}
	}
	return nil
}

// Activate applies the workload limits on v2 once S holds no process. It is a
// no-op on v1, where NewSession applied them.
func (s *Session) Activate() error {
	if s.h.version == 1 {
		return nil
	}
	dir := s.h.controllerDir("memory", s.name)
	if err := enable(dir, v2Wanted); err != nil {
		return err
	}
	return s.setWorkloadLimits()
}

// Delegate hands the workload's placement to the sandbox's root (uid and
// gid on the host): on v2, clone3(CLONE_INTO_CGROUP) by the agent is checked
// against the agent's own credentials, which must be allowed to write
// S/cgroup.procs (the common ancestor) and the workload's. Limits stay the
// host's. On v1 placement goes through descriptors the daemon opened, and
// this does nothing.
func (s *Session) Delegate(uid, gid int) error {
	if s.h.version == 1 {
		return nil
	}
	dir := s.h.controllerDir("memory", s.name)
	for _, p := range []string{
		filepath.Join(dir, "cgroup.procs"),
		filepath.Join(dir, "workload"),
		filepath.Join(dir, "workload", "cgroup.procs"),
	} {
		if err := os.Chown(p, uid, gid); err != nil {
			return fmt.Errorf("delegate %s: %w", p, err)
		}
	}
	return nil
}

// Files are the descriptors a sandbox's init and agent use to place
// themselves and their children. The caller closes them.
type Files struct {
	// SessionProcs are S/cgroup.procs, one per hierarchy.
	SessionProcs []*os.File
	// AgentProcs are S/agent/cgroup.procs, one per hierarchy.
	AgentProcs []*os.File
	// WorkloadTasks (v1) are S/workload/tasks, one per hierarchy: writing a
	// thread id moves that one thread, whose children then start inside.
	WorkloadTasks []*os.File
	// WorkloadDir (v2) is S/workload, for clone3(CLONE_INTO_CGROUP).
	WorkloadDir *os.File
}

// Close closes every descriptor.
func (f *Files) Close() {
	for _, list := range [][]*os.File{f.SessionProcs, f.AgentProcs, f.WorkloadTasks, {f.WorkloadDir}} {
		for _, x := range list {
			if x != nil {
				x.Close()
			}
		}
	}
}

// All returns the descriptors in a fixed order: session procs, agent procs,
// workload tasks, workload dir.
func (f *Files) All() []*os.File {
	var out []*os.File
	out = append(out, f.SessionProcs...)
	out = append(out, f.AgentProcs...)
	out = append(out, f.WorkloadTasks...)
	if f.WorkloadDir != nil {
		out = append(out, f.WorkloadDir)
	}
	return out
}

// Open opens the placement descriptors of S.
func (s *Session) Open() (*Files, error) {
	f := &Files{}
	open := func(path string, flags int) (*os.File, error) {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		return os.NewFile(uintptr(fd), path), nil
	}
	for _, d := range s.h.dirs(s.name) {
		sp, err := open(filepath.Join(d, "cgroup.procs"), unix.O_WRONLY)
		if err != nil {
			f.Close()
			return nil, err
		}
		f.SessionProcs = append(f.SessionProcs, sp)
		agent := filepath.Join(d, "agent")
		if !slices.Contains(s.h.leaves(d), "agent") {
			agent = d
		}
		ap, err := open(filepath.Join(agent, "cgroup.procs"), unix.O_WRONLY)
		if err != nil {
			f.Close()
			return nil, err
		}
		f.AgentProcs = append(f.AgentProcs, ap)
		if s.h.version == 1 {
			wt, err := open(filepath.Join(d, "workload", "tasks"), unix.O_WRONLY)
			if err != nil {
				f.Close()
				return nil, err
			}
			f.WorkloadTasks = append(f.WorkloadTasks, wt)
		} else {
			wd, err := open(filepath.Join(d, "workload"), unix.O_RDONLY|unix.O_DIRECTORY)
			if err != nil {
				f.Close()
				return nil, err
			}
			f.WorkloadDir = wd
		}
	}
	return f, nil
}

// OpenMemoryDir opens the directory of the workload's memory cgroup, where
// a sandbox's agent reads the workload's memory use to show it in the
// sandbox's /proc/meminfo. The caller closes it.
func (s *Session) OpenMemoryDir() (*os.File, error) {
	d := s.h.controllerDir("memory", filepath.Join(s.name, "workload"))
	fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", d, err)
	}
	return os.NewFile(uintptr(fd), d), nil
}

// Stats reads the workload's resource use.
func (s *Session) Stats() (Stats, error) {
	var st Stats
	var err error
	if s.h.version == 2 {
		st.MemoryBytes, err = readUint(s.file("memory", "workload", "memory.current"))
		if err != nil {
			return st, err
		}
		if usec, err := readKey(s.file("cpu", "workload", "cpu.stat"), "usage_usec"); err == nil {
			st.CPUSeconds = float64(usec) / 1e6
		}
	} else {
		st.MemoryBytes, err = readUint(s.file("memory", "workload", "memory.usage_in_bytes"))
		if err != nil {
			return st, err
		}
		if f := s.file("cpuacct", "workload", "cpuacct.usage"); f != "" {
			if ns, err := readUint(f); err == nil {
				st.CPUSeconds = float64(ns) / 1e9
			}
		}
	}
	st.Pids, err = readUint(s.file("pids", "workload", "pids.current"))
	if err != nil {
		return st, err
	}
	if s.h.version == 1 && st.Pids > 0 {
		// The agent's spawner thread sits in the workload for the whole
		// session (v1 places threads): it is not the user's.
		st.Pids--
	}
	st.OOMKills, _ = s.OOMKills()
	return st, nil
}

// OOMKills returns how many processes the kernel's OOM killer has killed in
// the workload.
func (s *Session) OOMKills() (uint64, error) {
	s.oomMu.Lock()
	defer s.oomMu.Unlock()
	if s.oomFile == nil {
		path := s.file("memory", "workload", "memory.oom_control")
		if s.h.version == 2 {
			path = s.file("memory", "workload", "memory.events")
		}
		if path == "" {
			return 0, errors.New("controller not available")
		}
		f, err := os.Open(path)
		if err != nil {
			return 0, err
		}
		s.oomFile = f
	}
	// Both files are a few short "key value" lines; a cgroup file read at
	// offset 0 is generated anew.
	var buf [1024]byte
	n, err := s.oomFile.ReadAt(buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		s.closeOOMLocked()
		return 0, err
	}
	return parseKey(buf[:n], "oom_kill")
}

// closeOOMLocked lets the counter file go. Preconditions: oomMu held.
func (s *Session) closeOOMLocked() {
	if s.oomFile != nil {
		s.oomFile.Close()
		s.oomFile = nil
	}
}

// Pids lists the processes in S and its leaves (in the host's PID namespace).
func (s *Session) Pids() ([]int, error) {
	var pids []int
	for _, d := range s.h.dirs(s.name) {
		for _, sub := range s.h.leaves(d) {
			b, err := os.ReadFile(filepath.Join(d, sub, "cgroup.procs"))
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					continue
				}
				return nil, err
			}
			for _, line := range strings.Fields(string(b)) {
				if p, err := strconv.Atoi(line); err == nil && !slices.Contains(pids, p) {
					pids = append(pids, p)
				}
			}
		}
	}
	return pids, nil
}

// Kill sends SIGKILL to every process in S and waits until none is left.
// It is the fallback teardown for a sandbox whose PID 1 is already gone or
// cannot be signalled. On v1 the freezer (when mounted) stops the processes
// first, so a fork bomb cannot outrun the kill.
func (s *Session) Kill() error {
	if s.h.version == 2 {
		if f := s.file("pids", "", "cgroup.kill"); exists(f) {
			if err := writeFile(f, "1"); err != nil {
				return err
			}
			return s.waitEmpty()
		}
	}
	freezer := s.file("freezer", "", "freezer.state")
	frozen := s.h.version == 1 && exists(freezer) && writeFile(freezer, "FROZEN") == nil
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, err := s.Pids()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			unix.Kill(p, unix.SIGKILL)
		}
		if frozen {
			// Frozen tasks die only once thawed; the freezer already
			// stopped them forking.
			_ = writeFile(freezer, "THAWED") // the survivors check below reports what stays
			frozen = false
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v in cgroup %s survived SIGKILL", pids, s.name)
		}
		time.Sleep(time.Millisecond)
	}
	if frozen {
		_ = writeFile(freezer, "THAWED") // an emptied cgroup; its removal follows
	}
	return nil
}

func (s *Session) waitEmpty() error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids, err := s.Pids()
		if err != nil || len(pids) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v in cgroup %s survived cgroup.kill", pids, s.name)
		}
		time.Sleep(time.Millisecond)
	}
}

// Destroy removes S and its leaves. Processes must be gone; a cgroup whose
// last task is still exiting answers EBUSY for a moment, so it retries
// briefly.
func (s *Session) Destroy() error {
	s.oomMu.Lock()
	s.closeOOMLocked()
	s.oomMu.Unlock()
	var errs []error
	for _, d := range s.h.dirs(s.name) {
		subs := s.h.leaves(d)
		slices.Reverse(subs)
		for _, sub := range subs {
			if err := rmdirRetry(filepath.Join(d, sub)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func rmdirRetry(dir string) error {
	delay := 100 * time.Microsecond
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(delay)
		delay = min(delay*2, 50*time.Millisecond)
	}
}

func writeFile(path, value string) error {
	if path == "" {
		return errors.New("controller not available")
	}
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC|unix.O_TRUNC, 0)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// A write that makes the kernel reclaim memory (a lower memory limit)
	// can be interrupted by a signal, such as the Go runtime's preemption
	// signal; the values written are idempotent, so try again.
	for {
		_, err = unix.Write(fd, []byte(value))
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, err)
	}
	return nil
}

func exists(path string) bool {
	if path == "" {
		return false
	}
	_, err := os.Stat(path)
	return err == nil
}

func readUint(path string) (uint64, error) {
	if path == "" {
		return 0, errors.New("controller not available")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	return strconv.ParseUint(s, 10, 64)
}

// readKey reads "key value" lines (memory.events, cpu.stat, oom_control).
func readKey(path, key string) (uint64, error) {
	if path == "" {
		return 0, errors.New("controller not available")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return parseKey(b, key)
}

// parseKey finds "key value" among b's lines; 0 when the key is absent.
func parseKey(b []byte, key string) (uint64, error) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, v, ok := bytes.Cut(line, []byte{' '})
		if ok && string(k) == key {
			return strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, nil
}
