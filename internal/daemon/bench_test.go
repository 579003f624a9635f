package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
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
	// No rate limit: the benchmarks call as fast as the daemon answers.
	return daemontest.Start(b, func(c *config.Config) { c.Session.MaxSessions = 1000; c.Auth.RateLimit = 0 })
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

// BenchmarkStreamFirstByte measures the time from sending a streamed exec to
// reading its first output event.
func BenchmarkStreamFirstByte(b *testing.B) {
	h := benchDaemon(b)
	s, err := h.Client.CreateSession(context.Background(), &api.CreateSessionRequest{})
	if err != nil {
		b.Fatal(err)
	}
	url := h.URL + "/v1/sessions/" + s.ID + "/exec"
	var ts timings
	for b.Loop() {
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"command":"echo hi; sleep 0.01"}`))
		req.Header.Set("Accept", "text/event-stream")
		t0 := time.Now()
		resp, err := h.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if strings.HasPrefix(line, "event: stdout") {
				ts = append(ts, time.Since(t0))
				break
			}
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	ts.report(b)
}

// BenchmarkStreamCat100MiB streams 100 MiB of text output of one command.
func BenchmarkStreamCat100MiB(b *testing.B) {
	h := daemontest.Start(b, func(c *config.Config) { c.Session.MaxOutput = 200 << 20 })
	s, err := h.Client.CreateSession(context.Background(), &api.CreateSessionRequest{})
	if err != nil {
		b.Fatal(err)
	}
	const size = 100 << 20
	body := fmt.Sprintf(`{"command":"yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c %d","max_output_bytes":%d}`, size, size)
	url := h.URL + "/v1/sessions/" + s.ID + "/exec"
	b.SetBytes(size)
	for b.Loop() {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Accept", "text/event-stream")
		resp, err := h.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n < size {
			b.Fatalf("streamed %d bytes", n)
		}
	}
}
