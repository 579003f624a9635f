package metrics

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/warrenhq/warren/internal/session"
)

// TestHistory: each point is the difference of two samples: sessions as
// they were, creates counted, exec rate per second and mean latency of the
// interval; the hour is all it keeps.
func TestHistory(t *testing.T) {
	m := New(prometheus.NewRegistry())
	f := &fakeSessions{byState: map[session.State]int{session.StateRunning: 2, session.StateFailed: 1}, byTenant: map[string]int{}}
	if err := m.WatchSessions(f); err != nil {
		t.Fatal(err)
	}
	h := NewHistory(m, time.Minute) // samples once now; the ticker stays quiet
	defer h.Stop()
	t0 := time.Now()
	m.Created(time.Second, nil)
	m.Created(0, errors.New("no"))
	for _, d := range []time.Duration{100 * time.Millisecond, 300 * time.Millisecond} {
		m.Op(session.OpExec, d, nil)
	}
	h.Sample(t0.Add(10 * time.Second))
	h.Sample(t0.Add(20 * time.Second))
	pts := h.Points()
	if len(pts) != 2 {
		t.Fatalf("Points() has %d points, want 2", len(pts))
	}
	p := pts[0]
	if p.Sessions != 3 || p.Creates != 2 || p.ExecLatency < 0.199 || p.ExecLatency > 0.201 {
		t.Errorf("first point = %+v, want 3 sessions, 2 creates, 0.2 s mean latency", p)
	}
	// The first sample's clock is NewHistory's, a little before t0.
	if p.ExecRate <= 0 || p.ExecRate > 0.21 {
		t.Errorf("first point's exec rate = %v, want about 2 in 10 s", p.ExecRate)
	}
	if q := pts[1]; q.Creates != 0 || q.ExecRate != 0 || q.ExecLatency != 0 {
		t.Errorf("a quiet interval = %+v, want no creates, execs or latency", q)
	}
	for i := range 2 * int(HistoryWindow/time.Minute) {
		h.Sample(t0.Add(time.Duration(i+3) * time.Minute))
	}
	if n, want := len(h.Points()), int(HistoryWindow/time.Minute); n != want {
		t.Errorf("after two hours Points() has %d points, want %d (one hour)", n, want)
	}
	if math.IsNaN(h.Points()[0].ExecRate) {
		t.Error("NaN in a point")
	}
}
