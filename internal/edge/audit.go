package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/warrenhq/warren/internal/audit"
	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/errdefs"
)

// Record writes the audit record of a call that changes something: op
// names it ("grpc CreateSession", "mcp exec"), session and target what it
// acted on, err its outcome, whose class the record carries (canceled when
// the caller went away). Like every audit record it never holds contents
// or secrets. It also names the session in the request's access line.
func (e *Edge) Record(ctx context.Context, op, session, target string, err error, start time.Time) {
	SetSession(ctx, session)
	outcome := "ok"
	if err != nil {
		outcome = ClassOf(ctx, err).String()
	}
	e.write(ctx, audit.Record{Time: start, Session: session, Op: op, Target: target, Outcome: outcome})
}

// RecordHTTP writes the audit record of a REST call answered with status:
// the record carries the class of the envelope the call answered with
// (WriteError), or the class of a status answered without one, and the
// status itself. A session the path does not name comes from SetSession.
func (e *Edge) RecordHTTP(ctx context.Context, op, session, target string, status int, start time.Time) {
	if status == 0 {
		status = http.StatusOK
	}
	outcome := "ok"
	if status >= 400 {
		outcome = classOfStatus(status).String()
	}
	if c := callOf(ctx); c != nil {
		if _, _, _, code := c.snapshot(); code != "" {
			outcome = code // WriteError's, or Failed's after a stream began
		}
	}
	if session == "" {
		if c := callOf(ctx); c != nil {
			_, _, session, _ = c.snapshot()
		}
	}
	e.write(ctx, audit.Record{Time: start, Session: session, Op: op, Target: target, Status: status, Outcome: outcome})
}

// write fills in the caller and the duration and appends rec.
func (e *Edge) write(ctx context.Context, rec audit.Record) {
	if e.audit == nil {
		return
	}
	who := &auth.Identity{}
	if c := callOf(ctx); c != nil {
		if _, id, _, _ := c.snapshot(); id != nil {
			who = id
		}
	}
	rec.Tenant, rec.KeyID, rec.Subject = who.Tenant, who.KeyID, who.Subject
	rec.DurationMs = float64(time.Since(rec.Time).Microseconds()) / 1000
	if err := e.audit.Record(rec); err != nil {
		e.log.Error("audit record lost", "op", rec.Op, "request_id", RequestID(ctx), "error", err)
	}
}

// AuditStatus is the HTTP status an audit query answers for rec: the one
// REST answered, or for another transport's call (which answered none)
// the status REST answers for the same outcome.
func AuditStatus(rec *audit.Record) int {
	switch {
	case rec.Status != 0:
		return rec.Status
	case rec.Outcome == "ok":
		return http.StatusOK
	}
	return StatusOf(errdefs.FromCode(rec.Outcome))
}
