package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"time"

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

// served is what the access log learns about a request as it is served.
type served struct {
	id string // the request id (immutable)

	mu      sync.Mutex // guards the fields below: inner layers set them
	route   string     // the REST route's pattern, "" for other transports
	call    *call      // the caller, once Admit ran
	session string     // the session acted on, when the path does not name it
}

// reqID is the request id ctx carries.
func reqID(ctx context.Context) string { return session.RequestID(ctx) }

type servedKey struct{}

func servedOf(ctx context.Context) *served {
	s, _ := ctx.Value(servedKey{}).(*served)
	return s
}

func (sv *served) setRoute(pattern string) {
	sv.mu.Lock()
	sv.route = pattern
	sv.mu.Unlock()
}

func (sv *served) setCall(c *call) {
	sv.mu.Lock()
	sv.call = c
	sv.mu.Unlock()
}

func (sv *served) setSession(id string) {
	sv.mu.Lock()
	if sv.session == "" {
		sv.session = id
	}
	sv.mu.Unlock()
}

// probes are logged at debug level while they succeed: an orchestrator or
// a Prometheus server calls them every few seconds.
var probes = map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /metrics": true}

// Observe gives every request an id and writes one access-log line per
// request: method, route, status, duration, request id, tenant and
// session. The id comes from the client's X-Request-ID when it is sane
// (else a fresh one), goes back in the response's X-Request-ID, and rides
// in the request's context (session.WithRequestID), so the session
// manager's log lines about the request carry it too. Handler includes it;
// the daemon also wraps its other transports (gRPC, MCP) with it. A request
// already observed passes straight through.
func (s *Server) Observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if servedOf(r.Context()) != nil {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sv := &served{id: requestID(r)}
		ctx := context.WithValue(session.WithRequestID(r.Context(), sv.id), servedKey{}, sv)
		r = r.WithContext(ctx)
		w.Header().Set(RequestIDHeader, sv.id)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			s.logRequest(r, sv, sw.status, v != nil, time.Since(start))
			if v != nil {
				panic(v)
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// logRequest writes the access-log line of r.
func (s *Server) logRequest(r *http.Request, sv *served, status int, aborted bool, d time.Duration) {
	sv.mu.Lock()
	route, c, sess := sv.route, sv.call, sv.session
	sv.mu.Unlock()
	if status == 0 && !aborted {
		status = http.StatusOK // nothing written: net/http answers 200
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Duration("duration", d),
		slog.String("request_id", sv.id),
	}
	if route == "" {
		// Another transport (gRPC procedures, /mcp) or no route at all:
		// the path is what names the call.
		attrs = append(attrs, slog.String("path", r.URL.Path))
	}
	if c != nil && c.id != nil && c.id.Tenant != "" {
		attrs = append(attrs, slog.String("tenant", c.id.Tenant))
	}
	if sess == "" && c != nil {
		sess = c.session
	}
	if sess != "" {
		attrs = append(attrs, slog.String("session_id", sess))
	}
	if aborted {
		attrs = append(attrs, slog.Bool("aborted", true))
	}
	level := slog.LevelInfo
	if probes[route] && status < 400 {
		level = slog.LevelDebug
	}
	s.log.LogAttrs(context.Background(), level, "request", attrs...)
}
