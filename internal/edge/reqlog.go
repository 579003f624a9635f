package edge

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// RequestIDHeader carries a request's id: a client may send one, and every
// response echoes the id the request was served under.
const RequestIDHeader = "X-Request-ID"

// requestIDPattern is what a client's request id may look like; anything
// else (too long, spaces, control characters) is replaced by our own id,
// so a client cannot forge log lines or bloat them.
var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:+/=-]{0,127}$`)

// requestID is the id to serve r under: the client's X-Request-ID if it is
// sane, else a fresh one.
func requestID(r *http.Request) string {
	if id := r.Header.Get(RequestIDHeader); requestIDPattern.MatchString(id) {
		return id
	}
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// RequestID is the id of the request ctx serves ("" if none).
func RequestID(ctx context.Context) string { return session.RequestID(ctx) }

// probes are logged at debug level while they succeed: an orchestrator or
// a Prometheus server calls them every few seconds.
var probes = map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /metrics": true}

// Observe gives every request an id and writes one access-log line per
// request: method, route, status, duration, request id, tenant and
// session. The id comes from the client's X-Request-ID when it is sane
// (else a fresh one), goes back in the response's X-Request-ID, and rides
// in the request's context (session.WithRequestID), so the session
// manager's log lines about the request carry it too. The daemon wraps its
// whole mux with it; a request already observed passes straight through.
func (e *Edge) Observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if callOf(r.Context()) != nil {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		c := &call{id: requestID(r)}
		r = r.WithContext(context.WithValue(session.WithRequestID(r.Context(), c.id), callKey{}, c))
		w.Header().Set(RequestIDHeader, c.id)
		sw := &StatusWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			e.logRequest(r, c, sw.status, v != nil, time.Since(start))
			if v != nil {
				panic(v)
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// logRequest writes the access-log line of r.
func (e *Edge) logRequest(r *http.Request, c *call, status int, aborted bool, d time.Duration) {
	route, who, sess, code := c.snapshot()
	if status == 0 && !aborted {
		status = http.StatusOK // nothing written: net/http answers 200
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Duration("duration", d),
		slog.String("request_id", c.id),
	}
	if route == "" {
		// Another transport (gRPC procedures, /mcp) or no route at all:
		// the path is what names the call.
		attrs = append(attrs, slog.String("path", r.URL.Path))
	}
	if who != nil && who.Tenant != "" {
		attrs = append(attrs, slog.String("tenant", who.Tenant))
	}
	if sess != "" {
		attrs = append(attrs, slog.String("session_id", sess))
	}
	if code == errdefs.ErrCanceled.String() {
		// The client went away before the answer: not the daemon's error.
		attrs = append(attrs, slog.Bool("canceled", true))
	}
	if aborted {
		attrs = append(attrs, slog.Bool("aborted", true))
	}
	level := slog.LevelInfo
	if probes[route] && status < 400 {
		level = slog.LevelDebug
	}
	e.log.LogAttrs(context.Background(), level, "request", attrs...)
}

// StatusWriter remembers the status of a response. It passes flushes and
// hijacks (streaming and WebSockets) through.
type StatusWriter struct {
	http.ResponseWriter
	status int
}

// Status is the status written so far, 0 if none.
func (w *StatusWriter) Status() int { return w.status }

func (w *StatusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *StatusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *StatusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
