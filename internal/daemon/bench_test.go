package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"io"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/config"
)

// Benchmarks of the hot paths over the REST API, each reporting p50 and p95
// besides Go's mean. The floor, a bare fork+exec of /bin/true on the host,
// runs in the same binary for comparison. Results: docs/BENCHMARKS.md.

type timings []time.Duration

func (ts timings) report(b *testing.B) {
	if len(ts) == 0 {
		return
	}
	s := slices.Clone(ts)
	slices.Sort(s)
	p := func(q float64) float64 { return float64(s[int(q*float64(len(s)-1))].Microseconds()) / 1000 }
	b.ReportMetric(p(0.5), "p50-ms")
	b.ReportMetric(p(0.95), "p95-ms")
}

func timed(b *testing.B, f func()) {
	var ts timings
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		f()
		ts = append(ts, time.Since(t0))
	}
	b.StopTimer()
	ts.report(b)
}

func BenchmarkHostForkExecTrue(b *testing.B) {
	timed(b, func() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	})
}

func benchDaemon(b *testing.B) *daemontest.Harness {
	return daemontest.Start(b, func(c *config.Config) { c.Session.MaxSessions = 1000 })
}

func BenchmarkCreate(b *testing.B) {
	h := benchDaemon(b)
	ctx := context.Background()
	var ids []string
	timed(b, func() {
		s, err := h.Client.CreateSession(ctx, &api.CreateSessionRequest{})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, s.ID)
	})
	for _, id := range ids {
		h.Client.DeleteSession(ctx, id)
	}
}

func BenchmarkDelete(b *testing.B) {
	h := benchDaemon(b)
	ctx := context.Background()
	var ts timings
	for b.Loop() {
		b.StopTimer()
		s, err := h.Client.CreateSession(ctx, &api.CreateSessionRequest{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if err := h.Client.DeleteSession(ctx, s.ID); err != nil {
			b.Fatal(err)
		}
		ts = append(ts, time.Since(t0))
	}
	ts.report(b)
}

func benchExec(b *testing.B, req *api.ExecRequest, want string) {
	h := benchDaemon(b)
	ctx := context.Background()
	s, err := h.Client.CreateSession(ctx, &api.CreateSessionRequest{})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Client.DeleteSession(ctx, s.ID)
	for range 20 { // warm up
		h.Client.Exec(ctx, s.ID, req)
	}
	timed(b, func() {
		res, err := h.Client.Exec(ctx, s.ID, req)
		if err != nil || res.ExitCode != 0 || res.Stdout != want {
			b.Fatalf("exec: %v %+v", err, res)
		}
	})
}

func BenchmarkExecEchoBuiltin(b *testing.B) {
	benchExec(b, &api.ExecRequest{Command: "echo hi"}, "hi\n")
}

func BenchmarkExecTrueShell(b *testing.B) {
	benchExec(b, &api.ExecRequest{Command: "/bin/true"}, "")
}

func BenchmarkExecTrueArgv(b *testing.B) {
	benchExec(b, &api.ExecRequest{Argv: []string{"/bin/true"}}, "")
}

func BenchmarkFile1MiB(b *testing.B) {
	h := benchDaemon(b)
	ctx := context.Background()
	s, err := h.Client.CreateSession(ctx, &api.CreateSessionRequest{})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Client.DeleteSession(ctx, s.ID)
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	b.Run("write", func(b *testing.B) {
		timed(b, func() {
			if _, err := h.Client.WriteFile(ctx, s.ID, "bench.bin", bytes.NewReader(data), 0); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("read", func(b *testing.B) {
		timed(b, func() {
			rc, err := h.Client.ReadFile(ctx, s.ID, "bench.bin")
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil || n != int64(len(data)) {
				b.Fatal(fmt.Sprint(n, err))
			}
		})
	})
}
