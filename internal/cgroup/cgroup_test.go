package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// hostMountinfo is this CI host's /proc/self/mountinfo (hybrid v1: one mount
// per controller, a cgroup2 at /sys/fs/cgroup/unified, name=systemd).
const hostMountinfo = `22 27 0:21 / /proc rw,relatime - proc proc rw
23 27 0:22 / /sys rw,relatime - sysfs sysfs rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

// systemdMountinfo is a systemd hybrid host: optional fields before the
// separator and cpu,cpuacct co-mounted in one hierarchy.
const systemdMountinfo = `25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
32 25 0:28 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
33 32 0:29 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
34 32 0:30 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
37 32 0:33 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,cpu,cpuacct
38 32 0:34 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,memory
39 32 0:35 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,pids
40 32 0:36 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,freezer
41 32 0:37 / /sys/fs/cgroup/net_cls,net_prio rw,nosuid,nodev,noexec,relatime shared:18 - cgroup cgroup rw,net_cls,net_prio
`

// v1MountsOf writes mountinfo to a temporary file and parses it. A panic is
// reported as a test failure so one bad sample does not abort the binary.
func v1MountsOf(t *testing.T, mountinfo string) (m map[string]string, err error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(p, []byte(mountinfo), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("v1Mounts(%q) panicked: %v", mountinfo, r)
		}
	}()
	return v1Mounts(p)
}

func TestV1Mounts(t *testing.T) {
	tests := []struct {
		name      string
		mountinfo string
		want      map[string]string
	}{
		{
			name:      "this host",
			mountinfo: hostMountinfo,
			want: map[string]string{
				"cpu":     "/sys/fs/cgroup/cpu",
				"cpuacct": "/sys/fs/cgroup/cpuacct",
				"memory":  "/sys/fs/cgroup/memory",
				"freezer": "/sys/fs/cgroup/freezer",
				"pids":    "/sys/fs/cgroup/pids",
			},
		},
		{
			name:      "systemd with cpu,cpuacct co-mounted",
			mountinfo: systemdMountinfo,
			want: map[string]string{
				"cpu":     "/sys/fs/cgroup/cpu,cpuacct",
				"cpuacct": "/sys/fs/cgroup/cpu,cpuacct",
				"memory":  "/sys/fs/cgroup/memory",
				"freezer": "/sys/fs/cgroup/freezer",
				"pids":    "/sys/fs/cgroup/pids",
			},
		},
		{
			name: "no pids controller",
			mountinfo: `32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
`,
			want: map[string]string{
				"cpu":    "/sys/fs/cgroup/cpu",
				"memory": "/sys/fs/cgroup/memory",
			},
		},
		{
			name: "pure v2 host",
			mountinfo: `23 27 0:22 / /sys rw,relatime - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`,
			want: map[string]string{},
		},
		{
			// Only the filesystem type decides: a cgroup2 line whose
			// options happen to name controllers is still not v1.
			name:      "cgroup2 with controller-like options",
			mountinfo: "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,memory,pids,cpu\n",
			want:      map[string]string{},
		},
		{
			name: "first mount of a controller wins",
			mountinfo: `35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
90 27 0:32 / /run/bind/memory rw,relatime - cgroup cgroup rw,memory
`,
			want: map[string]string{"memory": "/sys/fs/cgroup/memory"},
		},
		{
			name: "unused controllers only",
			mountinfo: `34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
`,
			want: map[string]string{},
		},
		{
			name: "garbage around a good line",
			mountinfo: `

garbage
- cgroup
1 2 3 - cgroup
no separator cgroup cgroup rw,memory
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
`,
			want: map[string]string{"memory": "/sys/fs/cgroup/memory"},
		},
		{
			// A line cut right after the source (no super options), as a
			// truncated or hand-edited mountinfo would have.
			name: "line without super options",
			mountinfo: `35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
`,
			want: map[string]string{"pids": "/sys/fs/cgroup/pids"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v1MountsOf(t, tc.mountinfo)
			if err != nil {
				t.Fatalf("v1Mounts() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("v1Mounts() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestV1MountsMissingFile(t *testing.T) {
	_, err := v1Mounts(filepath.Join(t.TempDir(), "absent"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("v1Mounts(absent) error = %v, want %v", err, fs.ErrNotExist)
	}
}

func TestDetectRejectsBadParent(t *testing.T) {
	for _, parent := range []string{"", "/warren", "../warren", "a/../b", "warren/", "./warren"} {
		if h, err := Detect(parent); err == nil {
			t.Errorf("Detect(%q) = %+v, want an error", parent, h)
		}
	}
}

// isHybridV1 reports whether this host has the v1 layout Detect should find:
// /sys/fs/cgroup a tmpfs holding v1 controller mounts.
func isHybridV1(t *testing.T) bool {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		return false
	}
	m, err := v1Mounts("/proc/self/mountinfo")
	return err == nil && m["memory"] != "" && m["pids"] != "" && m["cpu"] != ""
}

func TestDetectHost(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		// A pure v2 host (most production hosts).
		h, err := Detect("warren-detect")
		if err != nil {
			t.Fatalf("Detect() error = %v", err)
		}
		if h.Version() != 2 {
			t.Errorf("Version() = %d, want 2", h.Version())
		}
		if diff := cmp.Diff([]string{"memory", "pids", "cpu"}, h.Controllers()); diff != "" {
			t.Errorf("Controllers() mismatch (-want +got):\n%s", diff)
		}
		return
	}
	if !isHybridV1(t) {
		t.Skip("needs a cgroup v1 host (/sys/fs/cgroup a tmpfs with v1 mounts) or a pure v2 host")
	}
	h, err := Detect("warren-detect")
	if err != nil {
		t.Fatalf("Detect() error = %v", err)
	}
	if h.Version() != 1 {
		t.Errorf("Version() = %d, want 1", h.Version())
	}
	got := h.Controllers()
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !slices.Contains(got, c) {
			t.Errorf("Controllers() = %v, want it to contain %q", got, c)
		}
	}
	want, err := v1Mounts("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, h.mounts); diff != "" {
		t.Errorf("Detect() mounts mismatch (-want +got):\n%s", diff)
	}
}

// writeFiles creates dir and, inside it, files with the given contents, the
// way the kernel populates a new cgroup directory.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// removeFiles removes the regular files in dir, as the kernel does on rmdir.
func removeFiles(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func exist(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// snapshot returns every regular file under root with its contents.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		m[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const allV2Controllers = "cpuset cpu io memory hugetlb pids rdma misc"

// fakeV2 returns the root of a fake cgroup2 tree whose root and warren's
// parent offer the given controllers.
func fakeV2(t *testing.T, controllers string) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{root, filepath.Join(root, "warren")} {
		writeFiles(t, d, map[string]string{
			"cgroup.controllers":     controllers,
			"cgroup.subtree_control": "",
			"cgroup.procs":           "",
		})
	}
	return root
}

// v2Files are the files the kernel creates in a v2 cgroup whose parent
// enabled memory, pids and cpu, with their initial values.
func v2Files(controllers string) map[string]string {
	return map[string]string{
		"cgroup.controllers":     controllers,
		"cgroup.subtree_control": "",
		"cgroup.procs":           "",
		"memory.max":             "max",
		"memory.current":         "0",
		"memory.events":          "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
		"pids.max":               "max",
		"pids.current":           "0",
		"cpu.max":                "max 100000",
		"cpu.stat":               "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
	}
}

// fakeV2Session pre-creates session S under root/warren the way the kernel
// would on mkdir, so NewSession finds the files it writes. swap says whether
// memory.swap.max exists (swap accounting on).
func fakeV2Session(t *testing.T, root, name string, swap bool) string {
	t.Helper()
	s := filepath.Join(root, "warren", name)
	for _, d := range []string{s, filepath.Join(s, "agent"), filepath.Join(s, "workload")} {
		files := v2Files("memory pids cpu")
		if swap {
			files["memory.swap.max"] = "max"
		}
		writeFiles(t, d, files)
	}
	return s
}

func TestV2Setup(t *testing.T) {
	tests := []struct {
		name       string
		parent     string
		rootCtrl   string // cgroup.controllers of the root
		parentCtrl string // cgroup.controllers of every level of parent
		wantErr    string
	}{
		{name: "all available", parent: "warren", rootCtrl: allV2Controllers, parentCtrl: allV2Controllers},
		{name: "nested parent", parent: "system.slice/warren", rootCtrl: allV2Controllers, parentCtrl: allV2Controllers},
		{name: "root lacks pids", parent: "warren", rootCtrl: "cpu memory io", parentCtrl: allV2Controllers,
			wantErr: `cgroup v2 controller "pids" is not available in `},
		{name: "parent not delegated", parent: "warren", rootCtrl: allV2Controllers, parentCtrl: "memory pids",
			wantErr: `cgroup v2 controller "cpu" is not available in `},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, map[string]string{"cgroup.controllers": tc.rootCtrl, "cgroup.subtree_control": ""})
			var levels []string
			dir := root
			for _, part := range strings.Split(tc.parent, "/") {
				dir = filepath.Join(dir, part)
				levels = append(levels, dir)
				writeFiles(t, dir, map[string]string{"cgroup.controllers": tc.parentCtrl, "cgroup.subtree_control": ""})
			}
			err := NewV2(root, tc.parent).Setup()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Setup() error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Setup() error = %v", err)
			}
			for _, d := range append([]string{root}, levels...) {
				if got, want := readString(t, filepath.Join(d, "cgroup.subtree_control")), "+memory +pids +cpu"; got != want {
					t.Errorf("%s/cgroup.subtree_control = %q, want %q", d, got, want)
				}
			}
		})
	}
}

func TestV2SetupCreatesParent(t *testing.T) {
	// The kernel would populate the new parent; the fake tree does not, so
	// Setup creates the directory and then fails to read its controllers.
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"cgroup.controllers": allV2Controllers, "cgroup.subtree_control": ""})
	err := NewV2(root, "warren").Setup()
	if err == nil || !strings.Contains(err.Error(), "cgroup.controllers") {
		t.Errorf("Setup() error = %v, want one about the parent's cgroup.controllers", err)
	}
	if !exist(filepath.Join(root, "warren")) {
		t.Errorf("Setup() did not create %s/warren", root)
	}
	if got, want := readString(t, filepath.Join(root, "cgroup.subtree_control")), "+memory +pids +cpu"; got != want {
		t.Errorf("root cgroup.subtree_control = %q, want %q", got, want)
	}
}

func TestV2NewSessionCreatesDirs(t *testing.T) {
	root := fakeV2(t, allV2Controllers)
	h := NewV2(root, "warren")
	s, err := h.NewSession("s1", Limits{})
	if err != nil {
		t.Fatalf("NewSession() error = %v", err)
	}
	if s.Name() != "s1" {
		t.Errorf("Name() = %q, want %q", s.Name(), "s1")
	}
	for _, d := range []string{"s1", "s1/agent", "s1/workload"} {
		if fi, err := os.Stat(filepath.Join(root, "warren", d)); err != nil || !fi.IsDir() {
			t.Errorf("NewSession() did not create directory %s: %v", d, err)
		}
	}
	// Nothing was written: zero limits mean no limit.
	if got := snapshot(t, filepath.Join(root, "warren", "s1")); len(got) != 0 {
		t.Errorf("NewSession(no limits) wrote %v, want nothing", got)
	}
	if err := s.Destroy(); err != nil {
		t.Fatalf("Destroy() error = %v", err)
	}
	if exist(filepath.Join(root, "warren", "s1")) {
		t.Errorf("Destroy() left %s/warren/s1", root)
	}
}

func TestV2NewSessionUnwinds(t *testing.T) {
	// Without memory.max (not created by a fake mkdir, or the memory
	// controller not enabled) setting the limit fails, and NewSession removes
	// what it created.
	root := fakeV2(t, allV2Controllers)
	h := NewV2(root, "warren")
	s, err := h.NewSession("s1", Limits{MemoryBytes: 64 << 20})
	if err == nil {
		t.Fatalf("NewSession() = %v, want an error", s)
	}
	if !strings.Contains(err.Error(), "set memory limit") {
		t.Errorf("NewSession() error = %v, want one about the memory limit", err)
	}
	if exist(filepath.Join(root, "warren", "s1")) {
		t.Errorf("NewSession() left %s/warren/s1 behind after failing", root)
	}
}

func TestV2SessionLifecycle(t *testing.T) {
	tests := []struct {
		name         string
		limits       Limits
		swap         bool
		wantSession  map[string]string // S's files after NewSession
		wantWorkload map[string]string // workload's files after Activate
	}{
		{
			name:   "all limits with swap accounting",
			limits: Limits{MemoryBytes: 64 << 20, Pids: 16, CPUs: 1.5},
			swap:   true,
			wantSession: map[string]string{
				"memory.max":      strconv.Itoa(64<<20 + AgentMemoryBytes),
				"memory.swap.max": "0",
				"pids.max":        strconv.Itoa(16 + AgentPids),
			},
			wantWorkload: map[string]string{
				"memory.max":      strconv.Itoa(64 << 20),
				"memory.swap.max": "0",
				"pids.max":        "16",
				"cpu.max":         "150000 100000",
			},
		},
		{
			name:   "no swap accounting",
			limits: Limits{MemoryBytes: 1 << 30, Pids: 1, CPUs: 4},
			wantSession: map[string]string{
				"memory.max": strconv.Itoa(1<<30 + AgentMemoryBytes),
				"pids.max":   strconv.Itoa(1 + AgentPids),
			},
			wantWorkload: map[string]string{
				"memory.max": strconv.Itoa(1 << 30),
				"pids.max":   "1",
				"cpu.max":    "400000 100000",
			},
		},
		{
			name:   "tiny CPU share is floored",
			limits: Limits{CPUs: 0.001},
			swap:   true,
			wantSession: map[string]string{
				"memory.max":      "max",
				"memory.swap.max": "max",
				"pids.max":        "max",
			},
			wantWorkload: map[string]string{
				"memory.max":      "max",
				"memory.swap.max": "max",
				"pids.max":        "max",
				"cpu.max":         "1000 100000",
			},
		},
		{
			name:   "half a CPU",
			limits: Limits{CPUs: 0.5},
			wantSession: map[string]string{
				"memory.max": "max",
				"pids.max":   "max",
			},
			wantWorkload: map[string]string{
				"memory.max": "max",
				"pids.max":   "max",
				"cpu.max":    "50000 100000",
			},
		},
	}
	limitFiles := func(t *testing.T, dir string) map[string]string {
		t.Helper()
		m := map[string]string{}
		for _, f := range []string{"memory.max", "memory.swap.max", "pids.max", "cpu.max"} {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
				m[f] = string(b)
			}
		}
		return m
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeV2(t, allV2Controllers)
			h := NewV2(root, "warren")
			if err := h.Setup(); err != nil {
				t.Fatalf("Setup() error = %v", err)
			}
			sdir := fakeV2Session(t, root, "s1", tc.swap)
			wdir := filepath.Join(sdir, "workload")
			initialWorkload := limitFiles(t, wdir)

			s, err := h.NewSession("s1", tc.limits)
			if err != nil {
				t.Fatalf("NewSession() error = %v", err)
			}
			gotS := limitFiles(t, sdir)
			delete(gotS, "cpu.max") // the CPU limit is the workload's only
			if diff := cmp.Diff(tc.wantSession, gotS); diff != "" {
				t.Errorf("session limits after NewSession() mismatch (-want +got):\n%s", diff)
			}
			// v2 defers the workload's limits to Activate.
			if diff := cmp.Diff(initialWorkload, limitFiles(t, wdir)); diff != "" {
				t.Errorf("NewSession() wrote the workload's limits on v2 (-before +after):\n%s", diff)
			}
			if got := readString(t, filepath.Join(sdir, "cgroup.subtree_control")); got != "" {
				t.Errorf("S/cgroup.subtree_control after NewSession() = %q, want empty", got)
			}

			if err := s.Activate(); err != nil {
				t.Fatalf("Activate() error = %v", err)
			}
			if got, want := readString(t, filepath.Join(sdir, "cgroup.subtree_control")), "+memory +pids +cpu"; got != want {
				t.Errorf("S/cgroup.subtree_control = %q, want %q", got, want)
			}
			if diff := cmp.Diff(tc.wantWorkload, limitFiles(t, wdir)); diff != "" {
				t.Errorf("workload limits after Activate() mismatch (-want +got):\n%s", diff)
			}
			if !tc.swap && exist(filepath.Join(wdir, "memory.swap.max")) {
				t.Errorf("Activate() created memory.swap.max")
			}
			if got := readString(t, filepath.Join(sdir, "agent", "pids.max")); got != "max" {
				t.Errorf("agent pids.max = %q, want max (the agent is not limited by the workload)", got)
			}
		})
	}
}

func TestV2ActivateControllerMissing(t *testing.T) {
	root := fakeV2(t, allV2Controllers)
	h := NewV2(root, "warren")
	sdir := fakeV2Session(t, root, "s1", false)
	writeFiles(t, sdir, map[string]string{"cgroup.controllers": "memory pids"})
	s, err := h.NewSession("s1", Limits{Pids: 4})
	if err != nil {
		t.Fatalf("NewSession() error = %v", err)
	}
	err = s.Activate()
	if err == nil || !strings.Contains(err.Error(), `"cpu" is not available`) {
		t.Errorf("Activate() error = %v, want one saying cpu is not available", err)
	}
}

func TestV2Session(t *testing.T) {
	root := fakeV2(t, allV2Controllers)
	h := NewV2(root, "warren")
	sdir := fakeV2Session(t, root, "s1", true)
	fakeV2Session(t, root, "s2", true)
	s, err := h.NewSession("s1", Limits{MemoryBytes: 64 << 20, Pids: 16, CPUs: 1})
	if err != nil {
		t.Fatalf("NewSession() error = %v", err)
	}
	if err := s.Activate(); err != nil {
		t.Fatalf("Activate() error = %v", err)
	}

	t.Run("Open", func(t *testing.T) {
		f, err := s.Open()
		if err != nil {
			t.Fatalf("Open() error = %v", err)
		}
		defer f.Close()
		names := func(fs []*os.File) []string {
			var out []string
			for _, x := range fs {
				out = append(out, x.Name())
			}
			return out
		}
		if diff := cmp.Diff([]string{filepath.Join(sdir, "cgroup.procs")}, names(f.SessionProcs)); diff != "" {
			t.Errorf("Open().SessionProcs mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{filepath.Join(sdir, "agent", "cgroup.procs")}, names(f.AgentProcs)); diff != "" {
			t.Errorf("Open().AgentProcs mismatch (-want +got):\n%s", diff)
		}
		if len(f.WorkloadTasks) != 0 {
			t.Errorf("Open().WorkloadTasks = %v, want none on v2", names(f.WorkloadTasks))
		}
		if f.WorkloadDir == nil {
			t.Fatalf("Open().WorkloadDir = nil, want S/workload")
		}
		if got, want := f.WorkloadDir.Name(), filepath.Join(sdir, "workload"); got != want {
			t.Errorf("Open().WorkloadDir.Name() = %q, want %q", got, want)
		}
		if fi, err := f.WorkloadDir.Stat(); err != nil || !fi.IsDir() {
			t.Errorf("Open().WorkloadDir is not a directory: %v", err)
		}
		want := []string{filepath.Join(sdir, "cgroup.procs"), filepath.Join(sdir, "agent", "cgroup.procs"), filepath.Join(sdir, "workload")}
		if diff := cmp.Diff(want, names(f.All())); diff != "" {
			t.Errorf("All() mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("Stats", func(t *testing.T) {
		writeFiles(t, filepath.Join(sdir, "workload"), map[string]string{
			"memory.current": "1048576\n",
			"pids.current":   "3\n",
			"cpu.stat":       "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n",
			"memory.events":  "low 0\nhigh 0\nmax 7\noom 2\noom_kill 1\noom_group_kill 0\n",
		})
		n, err := s.OOMKills()
		if err != nil || n != 1 {
			t.Errorf("OOMKills() = %d, %v, want 1, nil", n, err)
		}
		got, err := s.Stats()
		if err != nil {
			t.Fatalf("Stats() error = %v", err)
		}
		want := Stats{MemoryBytes: 1 << 20, Pids: 3, CPUSeconds: 2.5, OOMKills: 1}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("StatsMissingFile", func(t *testing.T) {
		os.Remove(filepath.Join(sdir, "workload", "pids.current"))
		defer writeFiles(t, filepath.Join(sdir, "workload"), map[string]string{"pids.current": "0"})
		if got, err := s.Stats(); err == nil {
			t.Errorf("Stats() = %v, want an error without pids.current", got)
		}
	})

	t.Run("Sessions", func(t *testing.T) {
		got, err := h.Sessions()
		if err != nil {
			t.Fatalf("Sessions() error = %v", err)
		}
		if diff := cmp.Diff([]string{"s1", "s2"}, got); diff != "" {
			t.Errorf("Sessions() mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("Kill", func(t *testing.T) {
		// With cgroup.kill (Linux 5.14+), Kill writes 1 to it. The fake
		// cgroup.procs files are empty, so no real process is signalled.
		writeFiles(t, sdir, map[string]string{"cgroup.kill": ""})
		if err := s.Kill(); err != nil {
			t.Fatalf("Kill() error = %v", err)
		}
		if got := readString(t, filepath.Join(sdir, "cgroup.kill")); got != "1" {
			t.Errorf("S/cgroup.kill after Kill() = %q, want 1", got)
		}
		os.Remove(filepath.Join(sdir, "cgroup.kill"))
		if err := s.Kill(); err != nil {
			t.Errorf("Kill() without cgroup.kill on an empty session error = %v", err)
		}
	})

	t.Run("Destroy", func(t *testing.T) {
		// The control files are still there: a fake rmdir fails with
		// ENOTEMPTY, and Destroy must say so rather than pretend.
		if err := s.Destroy(); !errors.Is(err, unix.ENOTEMPTY) {
			t.Errorf("Destroy() with files inside error = %v, want ENOTEMPTY", err)
		}
		for _, d := range []string{sdir, filepath.Join(sdir, "agent"), filepath.Join(sdir, "workload")} {
			removeFiles(t, d)
		}
		if err := s.Destroy(); err != nil {
			t.Fatalf("Destroy() error = %v", err)
		}
		if exist(sdir) {
			t.Errorf("Destroy() left %s", sdir)
		}
		got, err := h.Sessions()
		if err != nil {
			t.Fatalf("Sessions() error = %v", err)
		}
		if diff := cmp.Diff([]string{"s2"}, got); diff != "" {
			t.Errorf("Sessions() after Destroy() mismatch (-want +got):\n%s", diff)
		}
		if err := s.Destroy(); err != nil {
			t.Errorf("second Destroy() error = %v, want nil", err)
		}
	})

	t.Run("Teardown", func(t *testing.T) {
		s2 := filepath.Join(root, "warren", "s2")
		for _, d := range []string{filepath.Join(s2, "agent"), filepath.Join(s2, "workload"), s2} {
			removeFiles(t, d)
		}
		if err := h.OpenSession("s2").Destroy(); err != nil {
			t.Fatalf("OpenSession(s2).Destroy() error = %v", err)
		}
		removeFiles(t, filepath.Join(root, "warren"))
		if err := h.Teardown(); err != nil {
			t.Fatalf("Teardown() error = %v", err)
		}
		if exist(filepath.Join(root, "warren")) {
			t.Errorf("Teardown() left %s/warren", root)
		}
		if err := h.Teardown(); err != nil {
			t.Errorf("second Teardown() error = %v, want nil", err)
		}
		got, err := h.Sessions()
		if err != nil || len(got) != 0 {
			t.Errorf("Sessions() after Teardown() = %v, %v, want none", got, err)
		}
	})
}

// v1ControllerFiles are the files each v1 controller adds to a cgroup.
var v1ControllerFiles = map[string]map[string]string{
	"memory": {
		"memory.limit_in_bytes": "9223372036854771712",
		"memory.usage_in_bytes": "0",
		"memory.oom_control":    "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
	},
	"pids":    {"pids.max": "max", "pids.current": "0"},
	"cpu":     {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "-1"},
	"cpuacct": {"cpuacct.usage": "0"},
	"freezer": {"freezer.state": "THAWED"},
}

// fakeV1 returns the mount points of a fake v1 layout under a temp dir, one
// directory per entry of layout (comma-joined names co-mount controllers).
func fakeV1(t *testing.T, layout ...string) map[string]string {
	t.Helper()
	root := t.TempDir()
	mounts := map[string]string{}
	for _, hier := range layout {
		dir := filepath.Join(root, hier)
		writeFiles(t, dir, map[string]string{"cgroup.procs": "", "tasks": ""})
		for _, c := range strings.Split(hier, ",") {
			mounts[c] = dir
		}
	}
	return mounts
}

// fakeV1Session pre-creates S, S/agent and S/workload in every hierarchy with
// the files the kernel would create. memsw says whether swap accounting is on.
func fakeV1Session(t *testing.T, mounts map[string]string, parent, name string, memsw bool) {
	t.Helper()
	for c, mnt := range mounts {
		s := filepath.Join(mnt, parent, name)
		dirs := []string{s, filepath.Join(s, "agent"), filepath.Join(s, "workload")}
		if mnt == mounts["memory"] {
			dirs = []string{s, filepath.Join(s, "workload")} // the agent stays in S
		}
		for _, d := range dirs {
			files := map[string]string{"cgroup.procs": "", "tasks": ""}
			for k, v := range v1ControllerFiles[c] {
				files[k] = v
			}
			if c == "memory" && memsw {
				files["memory.memsw.limit_in_bytes"] = "9223372036854771712"
			}
			writeFiles(t, d, files)
		}
	}
}

// removeV1Files removes the files of every cgroup directory under the
// session, bottom-up, as the kernel would on rmdir.
func removeV1Files(t *testing.T, mounts map[string]string, parent, name string) {
	t.Helper()
	for _, mnt := range mounts {
		s := filepath.Join(mnt, parent, name)
		if !exist(s) {
			continue
		}
		for _, d := range []string{filepath.Join(s, "workload"), filepath.Join(s, "agent"), s} {
			if exist(d) { // no agent leaf in the v1 memory hierarchy
				removeFiles(t, d)
			}
		}
	}
}

func TestV1Session(t *testing.T) {
	tests := []struct {
		name   string
		layout []string
		memsw  bool
	}{
		{name: "separate hierarchies with swap accounting", layout: []string{"memory", "pids", "cpu", "cpuacct", "freezer"}, memsw: true},
		{name: "separate hierarchies without swap accounting", layout: []string{"memory", "pids", "cpu", "cpuacct", "freezer"}},
		{name: "cpu,cpuacct co-mounted", layout: []string{"memory", "pids", "cpu,cpuacct", "freezer"}, memsw: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mounts := fakeV1(t, tc.layout...)
			h := NewV1(mounts, "warren")
			if got, want := h.Controllers(), []string{"memory", "pids", "cpu", "cpuacct", "freezer"}; !cmp.Equal(got, want) {
				t.Errorf("Controllers() = %v, want %v", got, want)
			}
			if err := h.Setup(); err != nil {
				t.Fatalf("Setup() error = %v", err)
			}
			// One directory per hierarchy: a co-mounted cpu,cpuacct is
			// handled once.
			var wantDirs []string
			for _, hier := range tc.layout {
				wantDirs = append(wantDirs, filepath.Join(mounts[strings.Split(hier, ",")[0]], "warren"))
			}
			gotDirs := h.dirs("")
			if diff := cmp.Diff(wantDirs, gotDirs, cmp.Transformer("sort", func(s []string) []string {
				return slices.Sorted(slices.Values(s))
			})); diff != "" {
				t.Errorf("dirs() mismatch (-want +got):\n%s", diff)
			}
			for _, d := range wantDirs {
				if !exist(d) {
					t.Errorf("Setup() did not create %s", d)
				}
			}

			fakeV1Session(t, mounts, "warren", "s1", tc.memsw)
			s, err := h.NewSession("s1", Limits{MemoryBytes: 64 << 20, Pids: 16, CPUs: 0.5})
			if err != nil {
				t.Fatalf("NewSession() error = %v", err)
			}
			file := func(c, leaf, f string) string { return filepath.Join(mounts[c], "warren", "s1", leaf, f) }
			want := map[string]string{
				file("memory", "", "memory.limit_in_bytes"):         strconv.Itoa(64<<20 + AgentMemoryBytes),
				file("memory", "workload", "memory.limit_in_bytes"): strconv.Itoa(64 << 20),
				file("pids", "", "pids.max"):                        strconv.Itoa(16 + AgentPids),
				// The agent's spawner thread counts in the workload.
				file("pids", "workload", "pids.max"):         "17",
				file("cpu", "workload", "cpu.cfs_period_us"): "100000",
				file("cpu", "workload", "cpu.cfs_quota_us"):  "50000",
				file("pids", "agent", "pids.max"):            "max",
				file("cpu", "", "cpu.cfs_quota_us"):          "-1",
			}
			if tc.memsw {
				want[file("memory", "", "memory.memsw.limit_in_bytes")] = strconv.Itoa(64<<20 + AgentMemoryBytes)
				want[file("memory", "workload", "memory.memsw.limit_in_bytes")] = strconv.Itoa(64 << 20)
			}
			for p, w := range want {
				if got := readString(t, p); got != w {
					t.Errorf("%s = %q, want %q", p, got, w)
				}
			}
			if !tc.memsw && exist(file("memory", "workload", "memory.memsw.limit_in_bytes")) {
				t.Errorf("NewSession() created memory.memsw.limit_in_bytes without swap accounting")
			}

			before := map[string]string{}
			for _, d := range gotDirs {
				for k, v := range snapshot(t, d) {
					before[k] = v
				}
			}
			if err := s.Activate(); err != nil {
				t.Fatalf("Activate() error = %v", err)
			}
			after := map[string]string{}
			for _, d := range gotDirs {
				for k, v := range snapshot(t, d) {
					after[k] = v
				}
			}
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("Activate() changed files on v1 (-before +after):\n%s", diff)
			}

			f, err := s.Open()
			if err != nil {
				t.Fatalf("Open() error = %v", err)
			}
			defer f.Close()
			var gotProcs, gotAgent, gotTasks, wantProcs, wantAgent, wantTasks []string
			for _, x := range f.SessionProcs {
				gotProcs = append(gotProcs, x.Name())
			}
			for _, x := range f.AgentProcs {
				gotAgent = append(gotAgent, x.Name())
			}
			for _, x := range f.WorkloadTasks {
				gotTasks = append(gotTasks, x.Name())
			}
			for _, d := range gotDirs {
				wantProcs = append(wantProcs, filepath.Join(d, "s1", "cgroup.procs"))
				// No S/agent in the memory hierarchy: the agent stays in S.
				if d == filepath.Join(mounts["memory"], "warren") {
					wantAgent = append(wantAgent, filepath.Join(d, "s1", "cgroup.procs"))
				} else {
					wantAgent = append(wantAgent, filepath.Join(d, "s1", "agent", "cgroup.procs"))
				}
				wantTasks = append(wantTasks, filepath.Join(d, "s1", "workload", "tasks"))
			}
			for _, c := range []struct {
				what      string
				got, want []string
			}{
				{"SessionProcs", gotProcs, wantProcs},
				{"AgentProcs", gotAgent, wantAgent},
				{"WorkloadTasks", gotTasks, wantTasks},
			} {
				if diff := cmp.Diff(c.want, c.got); diff != "" {
					t.Errorf("Open().%s mismatch (-want +got):\n%s", c.what, diff)
				}
			}
			if f.WorkloadDir != nil {
				t.Errorf("Open().WorkloadDir = %s, want nil on v1", f.WorkloadDir.Name())
			}
			if got, want := len(f.All()), 3*len(gotDirs); got != want {
				t.Errorf("len(All()) = %d, want %d", got, want)
			}

			got, err := h.Sessions()
			if err != nil || !cmp.Equal(got, []string{"s1"}) {
				t.Errorf("Sessions() = %v, %v, want [s1], nil", got, err)
			}

			if exist(file("memory", "agent", "")) {
				t.Errorf("NewSession() made a memory cgroup for the agent on v1")
			}
			removeV1Files(t, mounts, "warren", "s1")
			if err := s.Destroy(); err != nil {
				t.Fatalf("Destroy() error = %v", err)
			}
			for _, d := range gotDirs {
				if exist(filepath.Join(d, "s1")) {
					t.Errorf("Destroy() left %s/s1", d)
				}
			}
			if err := h.Teardown(); err != nil {
				t.Fatalf("Teardown() error = %v", err)
			}
			for _, d := range gotDirs {
				if exist(d) {
					t.Errorf("Teardown() left %s", d)
				}
			}
		})
	}
}

func TestV1Stats(t *testing.T) {
	tests := []struct {
		name    string
		layout  []string
		files   map[string]map[string]string // controller -> workload files
		want    Stats
		wantErr bool
	}{
		{
			name:   "spawner thread subtracted",
			layout: []string{"memory", "pids", "cpu", "cpuacct"},
			files: map[string]map[string]string{
				"memory":  {"memory.usage_in_bytes": "4096", "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"},
				"pids":    {"pids.current": "3"},
				"cpuacct": {"cpuacct.usage": "1500000000"},
			},
			want: Stats{MemoryBytes: 4096, Pids: 2, CPUSeconds: 1.5, OOMKills: 2},
		},
		{
			name:   "empty workload does not underflow",
			layout: []string{"memory", "pids", "cpu", "cpuacct"},
			files:  map[string]map[string]string{"pids": {"pids.current": "0"}},
			want:   Stats{},
		},
		{
			// The one task is the agent's spawner thread, which Stats
			// does not count.
			name:   "co-mounted cpu,cpuacct",
			layout: []string{"memory", "pids", "cpu,cpuacct"},
			files: map[string]map[string]string{
				"pids":    {"pids.current": "1"},
				"cpuacct": {"cpuacct.usage": "250000000"},
			},
			want: Stats{Pids: 0, CPUSeconds: 0.25},
		},
		{
			name:   "no cpuacct",
			layout: []string{"memory", "pids", "cpu"},
			files:  map[string]map[string]string{"pids": {"pids.current": "5"}},
			want:   Stats{Pids: 4},
		},
		{
			name:    "no pids.current",
			layout:  []string{"memory", "pids", "cpu"},
			files:   map[string]map[string]string{"pids": {"pids.current": ""}},
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mounts := fakeV1(t, tc.layout...)
			fakeV1Session(t, mounts, "warren", "s1", false)
			for c, files := range tc.files {
				for name, v := range files {
					p := filepath.Join(mounts[c], "warren", "s1", "workload", name)
					if v == "" {
						os.Remove(p)
						continue
					}
					writeFiles(t, filepath.Dir(p), map[string]string{name: v})
				}
			}
			got, err := NewV1(mounts, "warren").OpenSession("s1").Stats()
			if tc.wantErr {
				if err == nil {
					t.Errorf("Stats() = %v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Stats() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewSessionRejectsBadNames(t *testing.T) {
	for _, name := range []string{"", ".", "..", "a/b", "/", "/abs", "../up", "a\x00b"} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			root := fakeV2(t, allV2Controllers)
			h := NewV2(root, "warren")
			s, err := h.NewSession(name, Limits{Pids: 1})
			if err == nil {
				t.Fatalf("NewSession(%q) = %v, want an error", name, s)
			}
			ents, _ := os.ReadDir(filepath.Join(root, "warren"))
			for _, e := range ents {
				if e.IsDir() {
					t.Errorf("NewSession(%q) created %s", name, e.Name())
				}
			}
		})
	}
}

// Real cgroup v1 on this host.

// requireRealV1 skips unless the test runs as root on a cgroup v1 host and
// returns the hierarchy with a parent unique to this test process. The
// parent and everything in it is removed when the test ends, even on failure.
func requireRealV1(t *testing.T) *Hierarchy {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	if !isHybridV1(t) {
		t.Skip("needs a cgroup v1 host")
	}
	h, err := Detect(fmt.Sprintf("warren-test-%d-cg", os.Getpid()))
	if err != nil {
		t.Fatalf("Detect() error = %v", err)
	}
	if h.Version() != 1 {
		t.Skipf("Detect() found cgroup v%d, want v1", h.Version())
	}
	t.Cleanup(func() { removeTree(t, h.dirs("")) })
	return h
}

// removeTree kills every process left in the cgroup trees rooted at dirs and
// removes the directories bottom-up.
func removeTree(t *testing.T, dirs []string) {
	t.Helper()
	var sub []string
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				sub = append(sub, p)
			}
			return nil
		})
	}
	slices.Reverse(sub) // leaves first: a cgroup can only go once its children are gone
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := 0
		for _, d := range sub {
			b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					unix.Kill(pid, unix.SIGKILL)
				}
			}
			if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("cleanup: %d cgroup directories under %v could not be removed", left, dirs)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// proc is a child process that the test reaps exactly once.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once reaped; err is then set
	err  error
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// signal waits up to d for the process to end and returns the signal that
// killed it, or 0 if it exited.
func (p *proc) signal(t *testing.T, d time.Duration) syscall.Signal {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("process %d %v still runs after %v", p.pid(), p.cmd.Args, d)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal()
		}
	}
	return 0
}

// start starts cmd, reaps it in the background, and kills it when the test
// ends if it still runs.
func start(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
	})
	return p
}

// startGated starts `sh -c 'read x; exec CMD'`: CMD runs only once release
// is called, so the process can be placed in a cgroup before CMD allocates
// anything.
func startGated(t *testing.T, cmdline string) (p *proc, release func()) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "read x; exec "+cmdline)
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p = start(t, cmd)
	return p, func() {
		t.Helper()
		if _, err := w.Write([]byte("\n")); err != nil {
			t.Fatalf("release %s: %v", cmdline, err)
		}
		w.Close()
	}
}

// place writes id to each of files at offset 0, as the agent does.
func place(t *testing.T, files []*os.File, id int) {
	t.Helper()
	for _, f := range files {
		if _, err := f.WriteAt([]byte(strconv.Itoa(id)), 0); err != nil {
			t.Fatalf("place %d via %s: %v", id, f.Name(), err)
		}
	}
}

// waitComm waits until process pid runs the program named comm.
func waitComm(t *testing.T, pid int, comm string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.TrimSpace(string(b)) == comm {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d runs %q, want %q", pid, strings.TrimSpace(string(b)), comm)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRealV1(t *testing.T) {
	h := requireRealV1(t)
	if err := h.Setup(); err != nil {
		t.Fatalf("Setup() error = %v", err)
	}
	s, err := h.NewSession("s1", Limits{MemoryBytes: 64 << 20, Pids: 16, CPUs: 0.5})
	if err != nil {
		t.Fatalf("NewSession() error = %v", err)
	}
	if err := s.Activate(); err != nil {
		t.Fatalf("Activate() error = %v", err)
	}

	kernel := func(c, leaf, name string) string {
		t.Helper()
		return readString(t, filepath.Join(h.controllerDir(c, filepath.Join("s1", leaf)), name))
	}
	limits := []struct{ c, leaf, file, want string }{
		{"memory", "workload", "memory.limit_in_bytes", strconv.Itoa(64 << 20)},
		{"memory", "", "memory.limit_in_bytes", strconv.Itoa(64<<20 + AgentMemoryBytes)},
		{"pids", "workload", "pids.max", "17"},
		{"pids", "", "pids.max", strconv.Itoa(16 + AgentPids)},
		{"pids", "agent", "pids.max", "max"},
		{"cpu", "workload", "cpu.cfs_period_us", "100000"},
		{"cpu", "workload", "cpu.cfs_quota_us", "50000"},
	}
	if exist(filepath.Join(h.controllerDir("memory", "s1/workload"), "memory.memsw.limit_in_bytes")) {
		limits = append(limits,
			struct{ c, leaf, file, want string }{"memory", "workload", "memory.memsw.limit_in_bytes", strconv.Itoa(64 << 20)},
			struct{ c, leaf, file, want string }{"memory", "", "memory.memsw.limit_in_bytes", strconv.Itoa(64<<20 + AgentMemoryBytes)})
	}
	for _, l := range limits {
		if got := kernel(l.c, l.leaf, l.file); got != l.want {
			t.Errorf("%s S/%s %s = %s, want %s", l.c, l.leaf, l.file, got, l.want)
		}
	}

	f, err := s.Open()
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer f.Close()
	nh := len(h.dirs(""))
	if len(f.SessionProcs) != nh || len(f.AgentProcs) != nh || len(f.WorkloadTasks) != nh || f.WorkloadDir != nil {
		t.Fatalf("Open() = %d session, %d agent, %d workload files, dir %v; want %d each and no dir",
			len(f.SessionProcs), len(f.AgentProcs), len(f.WorkloadTasks), f.WorkloadDir, nh)
	}

	// Stand-ins: one process for the agent (S/agent), one for the agent's
	// spawner thread (a single-threaded process in the workload, pid = tid),
	// and the workload's own process, placed before it execs sleep so its
	// memory is charged to the workload.
	agent := start(t, exec.Command("sleep", "30"))
	place(t, f.AgentProcs, agent.pid())
	spawner := start(t, exec.Command("sleep", "30"))
	place(t, f.WorkloadTasks, spawner.pid())
	work, release := startGated(t, "sleep 30")
	place(t, f.WorkloadTasks, work.pid())
	release()
	waitComm(t, work.pid(), "sleep")

	pids, err := s.Pids()
	if err != nil {
		t.Fatalf("Pids() error = %v", err)
	}
	slices.Sort(pids)
	wantPids := []int{agent.pid(), spawner.pid(), work.pid()}
	slices.Sort(wantPids)
	if diff := cmp.Diff(wantPids, pids); diff != "" {
		t.Errorf("Pids() mismatch (-want +got):\n%s", diff)
	}
	if got := kernel("pids", "workload", "pids.current"); got != "2" {
		t.Errorf("workload pids.current = %s, want 2 (spawner + workload)", got)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatalf("Stats() error = %v", err)
	}
	if st.Pids != 1 {
		t.Errorf("Stats().Pids = %d, want 1 (the spawner thread is not counted)", st.Pids)
	}
	if st.MemoryBytes == 0 {
		t.Errorf("Stats().MemoryBytes = 0, want > 0")
	}
	if st.OOMKills != 0 {
		t.Errorf("Stats().OOMKills = %d, want 0", st.OOMKills)
	}

	t.Run("OOM", func(t *testing.T) {
		hog, err := h.NewSession("hog", Limits{MemoryBytes: 16 << 20})
		if err != nil {
			t.Fatalf("NewSession(hog) error = %v", err)
		}
		defer func() {
			if err := hog.Destroy(); err != nil {
				t.Errorf("hog Destroy() error = %v", err)
			}
		}()
		hf, err := hog.Open()
		if err != nil {
			t.Fatalf("Open() error = %v", err)
		}
		defer hf.Close()
		got, err := h.Sessions()
		if err != nil || !cmp.Equal(got, []string{"hog", "s1"}) {
			t.Errorf("Sessions() = %v, %v, want [hog s1], nil", got, err)
		}
		before, err := hog.OOMKills()
		if err != nil {
			t.Fatalf("OOMKills() error = %v", err)
		}
		hogProc, release := startGated(t, "tail /dev/zero")
		place(t, hf.WorkloadTasks, hogProc.pid())
		release()
		if sig := hogProc.signal(t, 30*time.Second); sig != syscall.SIGKILL {
			t.Errorf("tail /dev/zero under a 16 MiB limit ended with %v (signal %v), want killed by SIGKILL", hogProc.err, sig)
		}
		after, err := hog.OOMKills()
		if err != nil {
			t.Fatalf("OOMKills() error = %v", err)
		}
		if after <= before {
			t.Errorf("OOMKills() = %d after a memory hog, want more than %d", after, before)
		}
	})

	if err := s.Kill(); err != nil {
		t.Fatalf("Kill() error = %v", err)
	}
	for _, p := range []*proc{agent, spawner, work} {
		if sig := p.signal(t, 5*time.Second); sig != syscall.SIGKILL {
			t.Errorf("process %d after Kill() ended with %v, want killed by SIGKILL", p.pid(), p.err)
		}
	}
	if pids, err := s.Pids(); err != nil || len(pids) != 0 {
		t.Errorf("Pids() after Kill() = %v, %v, want none", pids, err)
	}
	f.Close()
	if err := s.Destroy(); err != nil {
		t.Fatalf("Destroy() error = %v", err)
	}
	for _, d := range h.dirs("s1") {
		if exist(d) {
			t.Errorf("Destroy() left %s", d)
		}
	}
	if got, err := h.Sessions(); err != nil || len(got) != 0 {
		t.Errorf("Sessions() after Destroy() = %v, %v, want none", got, err)
	}
	if err := h.Teardown(); err != nil {
		t.Fatalf("Teardown() error = %v", err)
	}
	for _, d := range h.dirs("") {
		if exist(d) {
			t.Errorf("Teardown() left %s", d)
		}
	}
}

func TestParseKey(t *testing.T) {
	const events = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n"
	for _, tc := range []struct {
		in, key string
		want    uint64
	}{
		{events, "oom_kill", 2},
		{events, "oom", 3},
		{events, "oom_group_kill", 0},
		{"oom_kill_disable 0\nunder_oom 0\noom_kill 7", "oom_kill", 7}, // v1, no final newline
		{events, "absent", 0},
		{"", "oom_kill", 0},
	} {
		if got, err := parseKey([]byte(tc.in), tc.key); err != nil || got != tc.want {
			t.Errorf("parseKey(%q, %q) = %d, %v, want %d", tc.in, tc.key, got, err, tc.want)
		}
	}
	if _, err := parseKey([]byte("oom_kill x\n"), "oom_kill"); err == nil {
		t.Errorf("parseKey of a non-number succeeded")
	}
}
