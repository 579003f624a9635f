package metrics

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// Buckets are the latency histograms' bounds in seconds: from half a
// millisecond (a file stat, a warm exec) to ten minutes (a long command).
var Buckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// Metrics records the daemon's metrics on its registry.
type Metrics struct {
	reg *prometheus.Registry

	creates        *prometheus.CounterVec
	createDuration prometheus.Histogram
	deletes        *prometheus.CounterVec
	execs          *prometheus.CounterVec
	execDuration   prometheus.Histogram
	fileOps        *prometheus.CounterVec
	processStarts  *prometheus.CounterVec
	reaped         *prometheus.CounterVec
	reconciled     *prometheus.CounterVec
}

var _ session.Observer = (*Metrics)(nil)

// fileOps are the file operations warren_file_operations_total counts.
var fileOps = []string{
	session.OpFileRead, session.OpFileWrite, session.OpFileStat, session.OpFileList,
	session.OpFileMkdir, session.OpFileRemove, session.OpArchiveGet, session.OpArchivePut,
}

// New registers warren's metrics, and the Go runtime's and the process's,
// on reg.
func New(reg *prometheus.Registry) *Metrics {
	m := &Metrics{
		reg: reg,
		creates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warren_session_creates_total",
			Help: "Session creations by outcome: ok, or the error class (invalid_argument, resource_exhausted, unavailable…).",
		}, []string{"outcome"}),
		createDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "warren_session_create_duration_seconds",
			Help:    "Time to create a session, of the creations that succeeded.",
			Buckets: Buckets,
		}),
		deletes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warren_session_deletes_total",
			Help: "Session deletions asked for by callers, by outcome.",
		}, []string{"outcome"}),
		execs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warren_execs_total",
			Help: "Commands run in sessions, by outcome (ok whatever the command's exit code).",
		}, []string{"outcome"}),
		execDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "warren_exec_duration_seconds",
			Help:    "Time to run a command in a session, of the commands that ran.",
			Buckets: Buckets,
		}),
		fileOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warren_file_operations_total",
			Help: "File operations on sessions by operation (read, write, stat, list, mkdir, remove, archive_get, archive_put) and outcome.",
		}, []string{"op", "outcome"}),
		processStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warren_process_starts_total",
			Help: "Durable processes started in sessions, by outcome.",
		}, []string{"outcome"}),
		reaped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warren_reaper_deletions_total",
			Help: "Sessions the reaper deleted because they expired, by reason (idle, lifetime).",
		}, []string{"reason"}),
		reconciled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "warren_reconciler_actions_total",
			Help: "What the daemon did at start with what an earlier daemon left (adopted, lost, removed_unfinished, removed_leftover).",
		}, []string{"action"}),
	}
	reg.MustRegister(m.creates, m.createDuration, m.deletes, m.execs, m.execDuration,
		m.fileOps, m.processStarts, m.reaped, m.reconciled,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Start the series of the usual values at zero, so rates work from the
	// first scrape.
	for _, v := range []*prometheus.CounterVec{m.creates, m.deletes, m.execs, m.processStarts} {
		v.WithLabelValues("ok")
	}
	for _, op := range fileOps {
		m.fileOps.WithLabelValues(op, "ok")
	}
	for _, why := range []string{session.ReapIdle, session.ReapLifetime} {
		m.reaped.WithLabelValues(why)
	}
	for _, a := range []string{session.ReconcileAdopted, session.ReconcileLost, session.ReconcileRemovedUnfinished, session.ReconcileRemovedLeftover} {
		m.reconciled.WithLabelValues(a)
	}
	return m
}

// Registry is the registry the metrics are on.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// outcome is the outcome label of a call: "ok", the error's class, or
// canceled and deadline_exceeded for a caller that gave up (so that those
// do not read as internal errors).
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded) && errdefs.ClassOf(err) == errdefs.ErrInternal:
		return "deadline_exceeded"
	}
	return errdefs.ClassOf(err).String()
}

// Created implements session.Observer.
func (m *Metrics) Created(d time.Duration, err error) {
	m.creates.WithLabelValues(outcome(err)).Inc()
	if err == nil {
		m.createDuration.Observe(d.Seconds())
	}
}

// Deleted implements session.Observer.
func (m *Metrics) Deleted(err error) { m.deletes.WithLabelValues(outcome(err)).Inc() }

// Op implements session.Observer.
func (m *Metrics) Op(op string, d time.Duration, err error) {
	switch op {
	case session.OpExec:
		m.execs.WithLabelValues(outcome(err)).Inc()
		if err == nil {
			m.execDuration.Observe(d.Seconds())
		}
	case session.OpProcessStart:
		m.processStarts.WithLabelValues(outcome(err)).Inc()
	default:
		m.fileOps.WithLabelValues(op, outcome(err)).Inc()
	}
}

// Reaped implements session.Observer.
func (m *Metrics) Reaped(why string) { m.reaped.WithLabelValues(why).Inc() }

// Reconciled implements session.Observer.
func (m *Metrics) Reconciled(action string) { m.reconciled.WithLabelValues(action).Inc() }
