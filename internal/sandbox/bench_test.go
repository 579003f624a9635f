package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/agentproto"
	"github.com/warrenhq/warren/internal/cgroup"
	"github.com/warrenhq/warren/internal/procview"
	"github.com/warrenhq/warren/internal/spec"
	"golang.org/x/sys/unix"
)

// Benchmarks of the runtime alone, without HTTP: they show what the API
// layer adds on top.

func report(b *testing.B, ts []time.Duration) {
	slices.Sort(ts)
	if len(ts) == 0 {
		return
	}
	b.ReportMetric(float64(ts[len(ts)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ts[len(ts)*95/100].Microseconds())/1000, "p95-ms")
}

func benchExec(b *testing.B, req agentproto.ExecRequest) {
	sb := newEnv(b).start()
	ctx := context.Background()
	req.Timeout, req.MaxOutput = 10*time.Second, 1<<20
	for range 20 {
		r := req
		sb.Exec(ctx, &r, nil, nil)
	}
	var ts []time.Duration
	for b.Loop() {
		r := req
		t0 := time.Now()
		if _, err := sb.Exec(ctx, &r, nil, nil); err != nil {
			b.Fatal(err)
		}
		ts = append(ts, time.Since(t0))
	}
	report(b, ts)
}

func BenchmarkRuntimeExecEcho(b *testing.B) { benchExec(b, agentproto.ExecRequest{Command: "echo hi"}) }
func BenchmarkRuntimeExecTrueShell(b *testing.B) {
	benchExec(b, agentproto.ExecRequest{Command: "/bin/true"})
}
func BenchmarkRuntimeExecTrueArgv(b *testing.B) {
	benchExec(b, agentproto.ExecRequest{Argv: []string{"/bin/true"}})
}

func BenchmarkRuntimeStart(b *testing.B) {
	e := newEnv(b)
	var ts []time.Duration
	for b.Loop() {
		t0 := time.Now()
		e.start()
		ts = append(ts, time.Since(t0))
	}
	report(b, ts)
}

func BenchmarkRuntimeExecTrueShellNoCPULimit(b *testing.B) {
	sb := newEnv(b).start(withLimits(cgroupLimitsNoCPU()))
	ctx := context.Background()
	var ts []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := sb.Exec(ctx, &agentproto.ExecRequest{Command: "/bin/true", Timeout: 10 * time.Second, MaxOutput: 1 << 20}, nil, nil); err != nil {
			b.Fatal(err)
		}
		ts = append(ts, time.Since(t0))
	}
	report(b, ts)
}

// BenchmarkOOMKillsRead is what each exec pays to attribute OOM kills: one
// read of the workload's counter (it reads it twice per call).
func BenchmarkOOMKillsRead(b *testing.B) {
	sb := newEnv(b).start()
	for b.Loop() {
		if _, err := sb.cg.OOMKills(); err != nil {
			b.Fatal(err)
		}
	}
}

// The view of the session's own limits (spec.View): what one refresh of
// /proc/meminfo costs the agent, what an idle agent spends on them, and
// what they add to a start. Off means no memory and no CPU limit, so
// nothing is bound or refreshed.

var viewOff = cgroup.Limits{Pids: 128}

func BenchmarkMeminfoRefresh(b *testing.B) {
	sb := newEnv(b).start()
	dir, err := sb.cg.OpenMemoryDir()
	if err != nil {
		b.Fatal(err)
	}
	defer dir.Close()
	m, err := procview.OpenMemory(int(dir.Fd()), sb.rt.cgroups.Version())
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	f, err := os.CreateTemp("/dev/shm", "meminfo")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	for b.Loop() {
		out, err := m.Meminfo(256 << 20)
		if err != nil {
			b.Fatal(err)
		}
		if err := procview.Rewrite(int(f.Fd()), out); err != nil {
			b.Fatal(err)
		}
	}
}

// daemonCPU is this process's CPU time.
func daemonCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkViewIdle reports the daemon's CPU per second and sandbox spent
// keeping idle sandboxes' /proc/meminfo current (on), against the same
// sandboxes without the view (off), and the agent's resident memory.
func BenchmarkViewIdle(b *testing.B) {
	e := newEnv(b)
	for b.Loop() {
		time.Sleep(100 * time.Millisecond)
	}
	const n, span = 20, 20 * time.Second
	for _, mode := range []string{"off", "on"} {
		var sbs []*Sandbox
		for range n {
			if mode == "on" {
				sbs = append(sbs, e.start())
			} else {
				sbs = append(sbs, e.start(withLimits(viewOff)))
			}
		}
		time.Sleep(2 * time.Second)
		c0 := daemonCPU()
		time.Sleep(span)
		b.ReportMetric(float64((daemonCPU()-c0).Microseconds())/span.Seconds()/n, mode+"-us/s/sandbox")
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", sbs[0].pid))
		for _, l := range strings.Split(string(raw), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "Private_Dirty:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				b.ReportMetric(kb, mode+"-agent-dirty-kB")
			}
		}
		for _, sb := range sbs {
			sb.Destroy(context.Background())
		}
	}
}

func BenchmarkRuntimeStartViewOff(b *testing.B) {
	e := newEnv(b)
	var ts []time.Duration
	for b.Loop() {
		t0 := time.Now()
		e.start(withLimits(viewOff))
		ts = append(ts, time.Since(t0))
	}
	report(b, ts)
}

// BenchmarkLocalDirs is what a create of a base-image session pays to give
// its layer the host's /usr/local directories (hostdirs.go).
func BenchmarkLocalDirs(b *testing.B) {
	dir := b.TempDir()
	i := 0
	c0 := daemonCPU()
	defer func() { b.ReportMetric(float64((daemonCPU()-c0).Microseconds())/float64(i), "cpu-us/op") }()
	for b.Loop() {
		up := filepath.Join(dir, strconv.Itoa(i))
		i++
		if err := os.Mkdir(up, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := localDirs("/usr", up, spec.IDRange{HostID: 1 << 30, Size: 65536}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHostDirsUserNS is what a runtime's start pays for the host
// directories' user namespace.
func BenchmarkHostDirsUserNS(b *testing.B) {
	for b.Loop() {
		f, err := hostDirsUserNS("/proc/self/exe")
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
