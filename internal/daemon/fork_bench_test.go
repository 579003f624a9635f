package daemon_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// Benchmarks of snapshots and forks against the size of the session's
// changes (the image is never copied). Each reports p50 and p95 of the
// measured call only; the cleanup after it is not timed. Results:
// docs/BENCHMARKS.md.

// changedSession creates a session that wrote mib MiB of fresh data.
func changedSession(b *testing.B, h *daemontest.Harness, id string, mib int) {
	if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: id}); err != nil {
		b.Fatal(err)
	}
	res, err := h.Client.Exec(bg, id, &api.ExecRequest{Command: fmt.Sprintf("mkdir -p /root/data && dd if=/dev/urandom of=/root/data/blob bs=1M count=%d 2>/dev/null && for i in $(seq 100); do echo $i > /root/data/f$i; done", mib)})
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("write %d MiB: %+v %v", mib, res, err)
	}
}

// measure times f once per iteration, and cleanup after it untimed.
func measure(b *testing.B, f func(i int), cleanup func(i int)) {
	var ts timings
	i := 0
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		f(i)
		ts = append(ts, time.Since(t0))
		b.StopTimer()
		cleanup(i)
		b.StartTimer()
		i++
	}
	b.StopTimer()
	ts.report(b)
}

func benchSnapshot(b *testing.B, mib int) {
	h := benchDaemon(b)
	changedSession(b, h, "src", mib)
	measure(b, func(i int) {
		if _, err := h.Client.Snapshot(bg, "src", fmt.Sprintf("s%d", i)); err != nil {
			b.Fatal(err)
		}
	}, func(i int) {
		if err := h.Client.DeleteSnapshot(bg, fmt.Sprintf("s%d", i)); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkSnapshot1MiB(b *testing.B)   { benchSnapshot(b, 1) }
func BenchmarkSnapshot100MiB(b *testing.B) { benchSnapshot(b, 100) }

func benchFork(b *testing.B, mib int) {
	h := benchDaemon(b)
	changedSession(b, h, "src", mib)
	measure(b, func(i int) {
		r, err := h.Client.Fork(bg, "src", &api.ForkRequest{IDs: []string{fmt.Sprintf("f%d", i)}})
		if err != nil || len(r.Sessions) != 1 {
			b.Fatal(err)
		}
	}, func(i int) {
		if err := h.Client.DeleteSession(bg, fmt.Sprintf("f%d", i)); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkFork1MiB(b *testing.B)   { benchFork(b, 1) }
func BenchmarkFork100MiB(b *testing.B) { benchFork(b, 100) }

// BenchmarkFork5x100MiB forks five sessions in one call.
func BenchmarkFork5x100MiB(b *testing.B) {
	h := benchDaemon(b)
	changedSession(b, h, "src", 100)
	var ids [][]string
	measure(b, func(i int) {
		r, err := h.Client.Fork(bg, "src", &api.ForkRequest{Count: 5})
		if err != nil || len(r.Sessions) != 5 {
			b.Fatal(err)
		}
		var got []string
		for _, s := range r.Sessions {
			got = append(got, s.ID)
		}
		ids = append(ids, got)
	}, func(i int) {
		for _, id := range ids[i] {
			if err := h.Client.DeleteSession(bg, id); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCreateFromSnapshot100MiB creates a session from a snapshot of
// 100 MiB of changes; compare BenchmarkCreate (from the image alone).
func BenchmarkCreateFromSnapshot100MiB(b *testing.B) {
	h := benchDaemon(b)
	changedSession(b, h, "src", 100)
	if _, err := h.Client.Snapshot(bg, "src", "snap"); err != nil {
		b.Fatal(err)
	}
	measure(b, func(i int) {
		if _, err := h.Client.CreateSession(bg, &api.CreateSessionRequest{ID: fmt.Sprintf("c%d", i), Snapshot: "snap"}); err != nil {
			b.Fatal(err)
		}
	}, func(i int) {
		if err := h.Client.DeleteSession(bg, fmt.Sprintf("c%d", i)); err != nil {
			b.Fatal(err)
		}
	})
}
