package metrics

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// fakeSessions is a manager with fixed counts.
type fakeSessions struct {
	byState  map[session.State]int
	byTenant map[string]int
	disk     session.DiskSpace
	diskErr  error
}

func (f *fakeSessions) Counts() (map[session.State]int, map[string]int) { return f.byState, f.byTenant }
func (f *fakeSessions) Disk() (session.DiskSpace, error)                { return f.disk, f.diskErr }
func (f *fakeSessions) Config() session.Config                          { return session.Config{MaxSessions: 7} }

func TestOutcome(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{errdefs.New(errdefs.ErrInvalidArgument, "bad"), "invalid_argument"},
		{fmt.Errorf("record session: %w", errdefs.New(errdefs.ErrUnavailable, "disk full")), "unavailable"},
		{errdefs.New(errdefs.ErrResourceExhausted, "quota"), "resource_exhausted"},
		{context.Canceled, "canceled"},
		{fmt.Errorf("exec: %w", context.DeadlineExceeded), "deadline_exceeded"},
		{fmt.Errorf("boom"), "internal"},
	}
	for _, tc := range tests {
		if got := outcome(tc.err); got != tc.want {
			t.Errorf("outcome(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestObserver(t *testing.T) {
	m := New(prometheus.NewRegistry())
	unavailable := errdefs.New(errdefs.ErrUnavailable, "the disk is nearly full")
	m.Created(20*time.Millisecond, nil)
	m.Created(time.Millisecond, unavailable)
	m.Deleted(nil)
	m.Deleted(errdefs.New(errdefs.ErrNotFound, "no such session"))
	m.Op(session.OpExec, 3*time.Millisecond, nil)
	m.Op(session.OpExec, time.Millisecond, errdefs.New(errdefs.ErrConflict, "failed"))
	m.Op(session.OpFileWrite, time.Millisecond, nil)
	m.Op(session.OpProcessStart, time.Millisecond, nil)
	m.Reaped(session.ReapIdle)
	m.Reconciled(session.ReconcileAdopted)
	m.Reconciled(session.ReconcileAdopted)

	tests := []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"creates ok", m.creates.WithLabelValues("ok"), 1},
		{"creates unavailable", m.creates.WithLabelValues("unavailable"), 1},
		{"deletes ok", m.deletes.WithLabelValues("ok"), 1},
		{"deletes not_found", m.deletes.WithLabelValues("not_found"), 1},
		{"execs ok", m.execs.WithLabelValues("ok"), 1},
		{"execs conflict", m.execs.WithLabelValues("conflict"), 1},
		{"file write ok", m.fileOps.WithLabelValues(session.OpFileWrite, "ok"), 1},
		{"file read ok", m.fileOps.WithLabelValues(session.OpFileRead, "ok"), 0},
		{"process starts ok", m.processStarts.WithLabelValues("ok"), 1},
		{"reaped idle", m.reaped.WithLabelValues(session.ReapIdle), 1},
		{"reaped lifetime", m.reaped.WithLabelValues(session.ReapLifetime), 0},
		{"adopted", m.reconciled.WithLabelValues(session.ReconcileAdopted), 2},
	}
	for _, tc := range tests {
		if got := testutil.ToFloat64(tc.c); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Only what succeeded goes into the latency histograms.
	if n := testutil.CollectAndCount(m.createDuration); n != 1 {
		t.Fatalf("create histogram has %d series", n)
	}
	for name, h := range map[string]prometheus.Histogram{"create": m.createDuration, "exec": m.execDuration} {
		if got := histogramCount(t, h); got != 1 {
			t.Errorf("%s duration samples = %d, want 1", name, got)
		}
	}
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	h.Collect(ch)
	var pb dto.Metric
	if err := (<-ch).Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram().GetSampleCount()
}

func TestSessionGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	f := &fakeSessions{
		byState:  map[session.State]int{session.StateCreating: 0, session.StateRunning: 3, session.StateDeleting: 0, session.StateFailed: 1},
		byTenant: map[string]int{"acme": 3, "beta": 1},
		disk:     session.DiskSpace{Free: 5 << 30, Total: 100 << 30, Min: 1 << 30},
	}
	if err := m.WatchSessions(f); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP warren_sessions Sessions by state (creating, running, deleting, failed), the hidden sessions of /v1/run included.
# TYPE warren_sessions gauge
warren_sessions{state="creating"} 0
warren_sessions{state="deleting"} 0
warren_sessions{state="failed"} 1
warren_sessions{state="running"} 3
# HELP warren_tenant_sessions Sessions by tenant, for the tenants that hold any. Tenants are bounded by the API keys an admin creates.
# TYPE warren_tenant_sessions gauge
warren_tenant_sessions{tenant="acme"} 3
warren_tenant_sessions{tenant="beta"} 1
# HELP warren_sessions_max The most sessions the daemon holds at once (--max-sessions).
# TYPE warren_sessions_max gauge
warren_sessions_max 7
# HELP warren_data_dir_free_bytes Free space of the data directory's filesystem.
# TYPE warren_data_dir_free_bytes gauge
warren_data_dir_free_bytes 5.36870912e+09
# HELP warren_data_dir_min_free_bytes Free space below which new sessions are refused (--min-free-disk-mb); 0 when the check is off.
# TYPE warren_data_dir_min_free_bytes gauge
warren_data_dir_min_free_bytes 1.073741824e+09
`
	names := []string{"warren_sessions", "warren_tenant_sessions", "warren_sessions_max", "warren_data_dir_free_bytes", "warren_data_dir_min_free_bytes"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// A filesystem that cannot be read drops its gauges, not the scrape.
	f.diskErr = errdefs.New(errdefs.ErrUnavailable, "statfs: gone")
	if n, err := testutil.GatherAndCount(reg, "warren_data_dir_free_bytes", "warren_sessions"); err != nil || n != 4 {
		t.Errorf("GatherAndCount() with the disk unreadable = %d, %v; want the 4 session states and no error", n, err)
	}
}

func TestHandler(t *testing.T) {
	m := New(prometheus.NewRegistry())
	m.Created(time.Second, nil)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics = %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	for _, want := range []string{
		`warren_session_creates_total{outcome="ok"} 1`,
		`warren_session_create_duration_seconds_bucket{le="1"} 1`,
		`warren_execs_total{outcome="ok"} 0`,
		`warren_reconciler_actions_total{action="removed_leftover"} 0`,
		"go_goroutines ",
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET /metrics lacks %q", want)
		}
	}
}
