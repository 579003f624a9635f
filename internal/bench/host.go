package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// HostInfo describes the machine a run measured.
type HostInfo struct {
	Kernel string `json:"kernel"`
	CPUs   int    `json:"cpus"`
	MemGiB int    `json:"mem_gib"`
	CPU    string `json:"cpu,omitempty"`
}

func (h HostInfo) String() string {
	return fmt.Sprintf("Linux %s, %d CPUs (%s), %d GiB", h.Kernel, h.CPUs, h.CPU, h.MemGiB)
}

func hostInfo() HostInfo {
	var u unix.Utsname
	_ = unix.Uname(&u) // never fails; an empty kernel name if it did
	h := HostInfo{Kernel: unix.ByteSliceToString(u.Release[:]), CPUs: runtime.NumCPU()}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		h.MemGiB = int((uint64(si.Totalram)*uint64(si.Unit) + 1<<29) >> 30)
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return h
}

// hostFloor measures what the host itself costs, without warren: the
// floors warren's numbers are compared with.
func hostFloor(o Options) ([]Result, error) {
	var out []Result
	r, err := latency("fork+exec /bin/true", o, func() error { return exec.Command("/bin/true").Run() })
	if err != nil {
		return nil, err
	}
	out = append(out, r)
	if bash, err := exec.LookPath("bash"); err == nil {
		r, err := latency("bash -c 'echo hi' spawn", o, func() error {
			return exec.Command(bash, "-c", "echo hi").Run()
		})
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if os.Geteuid() == 0 {
		r, err := latency("namespaces+overlay+cgroup by hand", o, bareSandbox)
		if err == nil {
			out = append(out, r)
		} else {
			out = append(out, Result{Name: "namespaces+overlay+cgroup by hand", Note: "not measured: " + err.Error()})
		}
	}
	return out, nil
}

// bareSandbox is the least a namespace sandbox costs: a cgroup made and
// removed, an overlay mounted and unmounted, and /bin/true run in five new
// namespaces (mount, pid, uts, ipc, net), joining the cgroup at clone on
// cgroup v2 (v1 has no such clone flag: there the cgroup is only made and
// removed).
func bareSandbox() error {
	dir, err := os.MkdirTemp("", "warren-floor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, d := range []string{"upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	cg, err := floorCgroup()
	if err != nil {
		return err
	}
	defer func() { _ = unix.Rmdir(cg) }() // an empty cgroup left behind is harmless
	merged := filepath.Join(dir, "merged")
	opts := fmt.Sprintf("lowerdir=/usr,upperdir=%s/upper,workdir=%s/work", dir, dir)
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay: %w", err)
	}
	defer unix.Unmount(merged, unix.MNT_DETACH)
	fd, err := unix.Open(cg, unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	cmd := exec.Command(filepath.Join(merged, "bin/true"))
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWNET,
		UseCgroupFD: cgroupV2(),
		CgroupFD:    fd,
	}
	return cmd.Run()
}

func cgroupV2() bool {
	var st unix.Statfs_t
	return unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}

// floorCgroup makes a fresh cgroup for one floor run: under the unified
// hierarchy on v2, under the memory controller on v1.
func floorCgroup() (string, error) {
	base := "/sys/fs/cgroup/memory"
	if cgroupV2() {
		base = "/sys/fs/cgroup"
	}
	d := filepath.Join(base, fmt.Sprintf("warren-floor-%d-%d", os.Getpid(), time.Now().UnixNano()))
	return d, unix.Mkdir(d, 0o755)
}

func memAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func rssOf(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("VmRSS:")); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(v)), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func runtimeGC() { runtime.GC() }
