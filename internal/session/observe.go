package session

import (
	"context"
	"log/slog"
	"time"
)

// Observer hears what the manager does, for metrics. The manager calls it
// synchronously, so its methods must be quick, must not block and must not
// call back into the manager. An error passed to it is classified with
// errdefs (nil: the call succeeded).
type Observer interface {
	// Created reports a Create that made a new session, or failed to: d is
	// how long it took. A Create that returns a session the tenant already
	// had is not reported.
	Created(d time.Duration, err error)
	// Deleted reports a Delete.
	Deleted(err error)
	// Op reports a call on a running session (one of the Op names); d is
	// how long it took, including waiting for the sandbox.
	Op(op string, d time.Duration, err error)
	// Reaped reports a session the reaper deleted: why is ReapIdle or
	// ReapLifetime.
	Reaped(why string)
	// Reconciled reports one action of the reconciler, at start or while
	// running (one of the Reconcile names).
	Reconciled(action string)
}

// The operations Observer.Op reports.
const (
	OpExec         = "exec"
	OpProcessStart = "process_start"
	OpFileRead     = "read"
	OpFileWrite    = "write"
	OpFileStat     = "stat"
	OpFileList     = "list"
	OpFileMkdir    = "mkdir"
	OpFileRemove   = "remove"
	OpArchiveGet   = "archive_get"
	OpArchivePut   = "archive_put"
)

// Why the reaper deleted a session.
const (
	ReapIdle     = "idle"     // unused for its idle TTL
	ReapLifetime = "lifetime" // older than its maximum lifetime
)

// What Recover did with what it found at start.
const (
	ReconcileAdopted           = "adopted"            // a running session carries on
	ReconcileLost              = "lost"               // its sandbox died while the daemon was away
	ReconcileRemovedUnfinished = "removed_unfinished" // caught half-way through create or delete
	ReconcileRemovedLeftover   = "removed_leftover"   // sandbox remains no session owns
)

// nopObserver is the observer of a manager nobody watches.
type nopObserver struct{}

func (nopObserver) Created(time.Duration, error)    {}
func (nopObserver) Deleted(error)                   {}
func (nopObserver) Op(string, time.Duration, error) {}
func (nopObserver) Reaped(string)                   {}
func (nopObserver) Reconciled(string)               {}

// observe reports a call on a running session when it ends:
//
//	defer m.observe(OpExec, time.Now(), &err)
func (m *Manager) observe(op string, start time.Time, err *error) {
	m.obs.Op(op, time.Since(start), *err)
}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the id of the request a call serves.
// The manager's log lines about the call carry it as request_id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID is the request id ctx carries, "" if none.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// logFor is the manager's logger for lines about the call ctx belongs to.
func (m *Manager) logFor(ctx context.Context) *slog.Logger {
	if id := RequestID(ctx); id != "" {
		return m.log.With("request_id", id)
	}
	return m.log
}
