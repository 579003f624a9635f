package testutil

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RequiresRoot skips the test unless it runs as root: sandboxes need real
// namespaces, mounts and cgroups.
func RequiresRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: sandboxes use real namespaces, mounts and cgroups")
	}
}

// HostState is what a sandbox could leave behind on the host.
type HostState struct {
	Mounts    []string // mount points
	Cgroups   []string // cgroup directories under the parent
	Children  []int    // processes whose parent is this process
	Netns     []string // named network namespaces
	Links     []string // sessions' host-side links (wrn*)
	Nft       []string // chains and sets in warren's nftables table
	Dirs      []string // entries under the watched directories
	watchDirs []string
	cgParent  string
}

// Snapshot records the host's state: mounts, cgroups under cgroupParent
// (relative, as in cgroup.Detect), this process's children, named network
// namespaces, and the entries of watchDirs.
func Snapshot(t testing.TB, cgroupParent string, watchDirs ...string) *HostState {
	t.Helper()
	s := &HostState{watchDirs: watchDirs, cgParent: cgroupParent}
	s.Mounts = mounts(t)
	s.Cgroups = cgroupDirs(cgroupParent)
	s.Children = children()
	s.Netns = netns()
	s.Links = sessionLinks()
	s.Nft = nftObjects()
	for _, d := range watchDirs {
		s.Dirs = append(s.Dirs, tree(d)...)
	}
	return s
}

// CheckLeaks snapshots the host now and registers a cleanup that fails the
// test if anything was added by then: a mount, a cgroup, a child process, a
// network namespace, a session's link (wrn*) or an object in warren's
// nftables table, or an entry under the watched directories. Register it
// before the cleanup that stops the daemon under test, so it runs after.
func CheckLeaks(t testing.TB, cgroupParent string, watchDirs ...string) {
	t.Helper()
	before := Snapshot(t, cgroupParent, watchDirs...)
	t.Cleanup(func() { before.Compare(t) })
}

// Compare fails t for everything that exists now but did not at snapshot
// time. Sandboxes die asynchronously, so it waits up to 5 s for the state to
// settle before it judges.
func (s *HostState) Compare(t testing.TB) {
	t.Helper()
	var added map[string][]string
	deadline := time.Now().Add(5 * time.Second)
	for {
		now := &HostState{}
		now.Mounts = mounts(t)
		now.Cgroups = cgroupDirs(s.cgParent)
		now.Children = children()
		now.Netns = netns()
		now.Links = sessionLinks()
		now.Nft = nftObjects()
		for _, d := range s.watchDirs {
			now.Dirs = append(now.Dirs, tree(d)...)
		}
		added = map[string][]string{
			"mount":           s.ours(diff(now.Mounts, s.Mounts)),
			"cgroup":          diff(now.Cgroups, s.Cgroups),
			"child process":   diff(itoa(now.Children), itoa(s.Children)),
			"network netns":   diff(now.Netns, s.Netns),
			"session link":    diff(now.Links, s.Links),
			"nftables object": diff(now.Nft, s.Nft),
			"file under dir":  diff(now.Dirs, s.Dirs),
		}
		clean := true
		for _, v := range added {
			if len(v) > 0 {
				clean = false
			}
		}
		if clean {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for kind, v := range added {
		for _, x := range v {
			t.Errorf("leaked %s: %s", kind, x)
		}
	}
}

// ours keeps the mounts that can be this check's: anywhere but the temporary
// directory, or under the directories it watches (a data directory). Other
// test binaries run at the same time and mount in their own temporary
// directories; those are theirs to check.
func (s *HostState) ours(mounts []string) []string {
	tmp := filepath.Clean(os.TempDir()) + "/"
	var out []string
	for _, m := range mounts {
		mine := !strings.HasPrefix(m, tmp)
		for _, d := range s.watchDirs {
			if base := filepath.Dir(d); m == base || strings.HasPrefix(m, base+"/") {
				mine = true
			}
		}
		if mine {
			out = append(out, m)
		}
	}
	return out
}

func diff(now, before []string) []string {
	var out []string
	for _, x := range now {
		if !slices.Contains(before, x) {
			out = append(out, x)
		}
	}
	return out
}

func itoa(ps []int) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = strconv.Itoa(p) + " " + comm(p)
	}
	return out
}

func comm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}

func mounts(t testing.TB) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatalf("read mountinfo: %v", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			out = append(out, fields[4])
		}
	}
	return out
}

// cgroupDirs lists directories under parent in every cgroup hierarchy.
func cgroupDirs(parent string) []string {
	if parent == "" {
		return nil
	}
	var out []string
	roots := []string{"/sys/fs/cgroup"}
	if ents, err := os.ReadDir("/sys/fs/cgroup"); err == nil {
		for _, e := range ents {
			roots = append(roots, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	for _, r := range roots {
		base := filepath.Join(r, parent)
		// The walk function never fails; unreadable parts are skipped.
		_ = filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			// The parent itself too: a daemon that made it must remove it
			// once nothing of it is left.
			if d.IsDir() {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

func children() []int {
	me := os.Getpid()
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(me) && f[0] != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

func netns() []string {
	ents, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// tree lists the paths directly under dir and one level deeper (enough to
// see a sandbox's state directory and its contents).
func tree(dir string) []string {
	var out []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		out = append(out, p)
		if e.IsDir() {
			sub, _ := os.ReadDir(p)
			for _, s := range sub {
				out = append(out, filepath.Join(p, s.Name()))
			}
		}
	}
	return out
}

// TraversableDir returns a fresh temporary directory that an unprivileged
// user can pass through, as a data directory must be: sandboxes' roots are
// unprivileged host users. t.TempDir() alone is mode 0700.
func TraversableDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
