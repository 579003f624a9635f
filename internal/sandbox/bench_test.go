package sandbox

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/agentproto"
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
