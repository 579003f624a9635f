package sandbox

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/cgroup"
)

// meminfoKB returns a /proc/meminfo field in kB read inside sb.
func meminfoKB(t *testing.T, sb *Sandbox, field string) int64 {
	t.Helper()
	res := sh(t, sb, "grep '^"+field+":' /proc/meminfo")
	m := regexp.MustCompile(`^` + regexp.QuoteMeta(field) + `:\s+(\d+) kB\n$`).FindStringSubmatch(string(res.Stdout))
	if m == nil {
		t.Fatalf("%s in /proc/meminfo: %q (stderr %q)", field, res.Stdout, res.Stderr)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// TestSessionSeesItsOwnLimits (issue 19, item 10): free and nproc inside a
// session showed the host's memory and CPUs, and build tools and JVMs sized
// themselves by them. A session with 512 MiB and one CPU now sees 512 MiB
// in /proc/meminfo and free, one CPU in nproc (its affinity), in
// sysconf(_SC_NPROCESSORS_ONLN) (/sys/devices/system/cpu/online) and in
// /proc/cpuinfo, and its MemAvailable follows what it allocates.
func TestSessionSeesItsOwnLimits(t *testing.T) {
	e := newEnv(t)
	if len(e.rt.cpus.cpus) < 2 {
		t.Skip("one CPU on this host: a one-CPU session sees the host's CPUs anyway")
	}
	sb := e.start(withLimits(cgroup.Limits{MemoryBytes: 512 << 20, Pids: 128, CPUs: 1}))

	if got := meminfoKB(t, sb, "MemTotal"); got != 512<<10 {
		t.Errorf("MemTotal = %d kB, want %d (512 MiB)", got, 512<<10)
	}
	if got := meminfoKB(t, sb, "SwapTotal"); got != 0 {
		t.Errorf("SwapTotal = %d kB, want 0", got)
	}
	// procps's free reads /proc/meminfo; busybox's (test/vm's guest) asks
	// sysinfo(2), which no file changes.
	var res *ExecResult
	if sh(t, sb, "free -V 2>&1 | grep -q procps").ExitCode == 0 {
		res = sh(t, sb, "free -m | awk '/^Mem:/ {print $2}'")
		if got := strings.TrimSpace(string(res.Stdout)); got != "512" {
			t.Errorf("free -m total = %q (stderr %q), want 512", got, res.Stderr)
		}
	}
	mustOut(t, sb, "nproc", "1\n")
	if sh(t, sb, "command -v getconf").ExitCode == 0 { // not in busybox (test/vm's guest)
		mustOut(t, sb, "getconf _NPROCESSORS_ONLN", "1\n")
	}
	mustOut(t, sb, "grep -c ^processor /proc/cpuinfo", "1\n")
	if sh(t, sb, "command -v python3").ExitCode == 0 {
		mustOut(t, sb, "python3 -c 'import os; print(os.cpu_count(), len(os.sched_getaffinity(0)))'", "1 1\n")
	}
	res = sh(t, sb, "cat /sys/devices/system/cpu/online; grep Cpus_allowed_list /proc/self/status")
	if m := regexp.MustCompile(`^(\d+)\nCpus_allowed_list:\s+(\d+)\n$`).FindStringSubmatch(string(res.Stdout)); m == nil || m[1] != m[2] {
		t.Errorf("online CPUs and the affinity: %q, want the same one CPU", res.Stdout)
	}
	// /proc/stat lists that one CPU (Node's os.cpus() counts its lines),
	// and the daemon keeps its times current.
	res = sh(t, sb, "grep '^cpu' /proc/stat | cut -d' ' -f1; grep Cpus_allowed_list /proc/self/status | cut -f2")
	if lines := strings.Fields(string(res.Stdout)); len(lines) != 3 || lines[0] != "cpu" || lines[1] != "cpu"+lines[2] {
		t.Errorf("/proc/stat's CPU lines and the affinity: %q, want cpu, cpuN and N", res.Stdout)
	}
	busy := func() int64 {
		f := strings.Fields(string(sh(t, sb, "head -1 /proc/stat").Stdout))
		var sum int64
		for _, v := range f[1:] {
			n, _ := strconv.ParseInt(v, 10, 64)
			sum += n
		}
		return sum
	}
	t0 := busy()
	time.Sleep(2500 * time.Millisecond)
	if t1 := busy(); t1 <= t0 {
		t.Errorf("/proc/stat's cpu line did not move in 2.5 s: %d then %d", t0, t1)
	}
	// The view is read-only, even to the session's root.
	res = sh(t, sb, "echo 'MemTotal: 1 kB' > /proc/meminfo || echo refused; echo 'cpu 1' > /proc/stat || echo refused")
	if strings.Count(string(res.Stdout), "refused") != 2 {
		t.Errorf("writing /proc/meminfo from inside: %q %q, want it refused", res.Stdout, res.Stderr)
	}

	before := meminfoKB(t, sb, "MemAvailable")
	// 100 MiB held in /dev/shm's tmpfs (128 MiB at most), charged to the
	// workload and not reclaimable (no swap).
	mustOut(t, sb, "dd if=/dev/zero of=/dev/shm/hold bs=1048576 count=100 2>/dev/null && echo ok", "ok\n")
	var after int64
	deadline := time.Now().Add(5 * time.Second)
	for {
		after = meminfoKB(t, sb, "MemAvailable")
		if before-after >= 80<<10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if before-after < 80<<10 {
		t.Errorf("MemAvailable went from %d to %d kB after 100 MiB were allocated; want it at least 80 MiB lower", before, after)
	}
	if shm := meminfoKB(t, sb, "Shmem"); shm < 95<<10 {
		t.Errorf("Shmem = %d kB with 100 MiB in /dev/shm", shm)
	}
	sh(t, sb, "rm /dev/shm/hold")
	deadline = time.Now().Add(5 * time.Second)
	for meminfoKB(t, sb, "MemAvailable") < before-20<<10 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if got := meminfoKB(t, sb, "MemAvailable"); got < before-20<<10 {
		t.Errorf("MemAvailable = %d kB after the 100 MiB were freed, want it back near %d", got, before)
	}
}

// TestCPUViewPlacement: sessions with CPU limits are spread over the host's
// CPUs, fractional limits round up, and a limit of every CPU leaves the
// host's view.
func TestCPUViewPlacement(t *testing.T) {
	p := &cpuPlacer{cpus: []int{0, 1, 2, 3}, load: map[int]int{}, held: map[string][]int{}}
	if got := p.place("a", 1); len(got) != 1 || got[0] != 0 {
		t.Errorf("first one-CPU sandbox: %v, want [0]", got)
	}
	if got := p.place("b", 0.5); len(got) != 1 || got[0] != 1 {
		t.Errorf("a half-CPU sandbox: %v, want one CPU, [1]", got)
	}
	if got := p.place("c", 1.5); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Errorf("a 1.5-CPU sandbox: %v, want two CPUs, [2 3]", got)
	}
	if got := p.place("d", 4); got != nil {
		t.Errorf("a sandbox limited to every CPU: %v, want nil (the host's view)", got)
	}
	if got := p.place("e", 0); got != nil {
		t.Errorf("a sandbox without a CPU limit: %v, want nil", got)
	}
	p.release("a")
	if got := p.place("f", 1); len(got) != 1 || got[0] != 0 {
		t.Errorf("after a's release: %v, want its CPU, [0]", got)
	}
}
