package httpapi

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/warrenhq/warren/internal/audit"
	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// publicRoutes answer without credentials: probes and the API description.
var publicRoutes = map[string]bool{
	"GET /healthz":      true,
	"GET /readyz":       true,
	"GET /openapi.yaml": true,
	"GET /openapi.json": true,
}

// noAuthIdentity is every caller when authentication is off.
var noAuthIdentity = &auth.Identity{Tenant: DefaultTenant, Admin: true, Method: "none"}

// call is what the middleware learns about a request as it is served, for
// the audit record.
type call struct {
	id      *auth.Identity
	code    string // the error envelope's code, if one was written
	session string // the session created, when the path does not name it
}

type callKey struct{}

func callOf(r *http.Request) *call {
	if c, ok := r.Context().Value(callKey{}).(*call); ok {
		return c
	}
	return &call{id: noAuthIdentity}
}

// identity is who made r.
func identity(r *http.Request) *auth.Identity { return callOf(r).id }

// tenant is the tenant r acts for.
func tenant(r *http.Request) string { return identity(r).Tenant }

// requireAdmin fails a call that only administrators may make.
func requireAdmin(r *http.Request, what string) error {
	if identity(r).Admin {
		return nil
	}
	return errdefs.New(errdefs.ErrPermissionDenied, "%s needs an admin key", what)
}

// audited reports whether a call is recorded: everything that changes
// state, and opening a shell.
func audited(method, pattern string) bool {
	return method != http.MethodGet && method != http.MethodHead || pattern == "GET /v1/sessions/{id}/shell"
}

// Admit authenticates r and applies its caller's rate limit. The context
// it returns carries the caller (IdentityOf) and the request id
// (session.RequestID) for the session manager calls that follow. Other
// transports (gRPC, MCP) call it first and map its errdefs-classified
// errors (unauthenticated; resource_exhausted with a retry delay) to their
// own codes.
func (s *Server) Admit(r *http.Request) (context.Context, error) {
	c := &call{id: noAuthIdentity}
	ctx := context.WithValue(r.Context(), callKey{}, c)
	if sv := servedOf(ctx); sv != nil {
		sv.setCall(c)
	} else if session.RequestID(ctx) == "" {
		// Not seen by Observe: the manager's log lines still get an id.
		ctx = session.WithRequestID(ctx, requestID(r))
	}
	if s.cfg.Auth != nil {
		id, err := s.cfg.Auth.Authenticate(r.Context(), r)
		if err != nil {
			c.id = &auth.Identity{}
			return ctx, err
		}
		c.id = id
	}
	return ctx, s.limits.allow(c.id)
}

// IdentityOf is the caller Admit found; nil for a context Admit did not
// make.
func IdentityOf(ctx context.Context) *auth.Identity {
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		return c.id
	}
	return nil
}

// Record writes the audit record of a mutating call made over another
// transport: op names it ("grpc CreateSession", "mcp exec"), err is its
// outcome. Like every audit record it never holds contents or secrets.
func (s *Server) Record(ctx context.Context, op, session, target string, err error, start time.Time) {
	if s.cfg.Audit == nil {
		return
	}
	id := IdentityOf(ctx)
	if id == nil {
		id = &auth.Identity{}
	}
	if sv := servedOf(ctx); sv != nil && session != "" {
		sv.setSession(session) // for the access log
	}
	rec := audit.Record{Time: start, Tenant: id.Tenant, KeyID: id.KeyID, Subject: id.Subject, Session: session,
		Op: op, Target: target, Status: http.StatusOK, Outcome: "ok", DurationMs: float64(time.Since(start).Microseconds()) / 1000}
	if err != nil {
		c := errdefs.ClassOf(err)
		rec.Status, rec.Outcome = statusOf(c), c.String()
	}
	if err := s.cfg.Audit.Record(rec); err != nil {
		s.log.Error("audit record lost", "op", op, "request_id", reqID(ctx), "error", err)
	}
}

// serveAuthenticated admits r, serves it and records it in the audit log.
func (s *Server) serveAuthenticated(w http.ResponseWriter, r *http.Request, pattern string) {
	start := time.Now()
	ctx, err := s.Admit(r)
	r = r.WithContext(ctx)
	c := callOf(r)
	defer func() {
		// The session the path names, for the access log; the mux has set
		// the path values on r by now.
		if sv := servedOf(ctx); sv != nil && r.PathValue("id") != "" {
			sv.setSession(r.PathValue("id"))
		}
	}()
	if err != nil {
		if errdefs.Is(err, errdefs.ErrUnauthenticated) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="warren"`)
		}
		s.writeError(w, r, err)
		if errdefs.Is(err, errdefs.ErrUnauthenticated) && audited(r.Method, pattern) {
			s.audit(r, pattern, c, statusOf(errdefs.ClassOf(err)), start)
		}
		return
	}
	if !audited(r.Method, pattern) || s.cfg.Audit == nil {
		s.mux.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		// A panic is answered by the recovery above us; record it as such.
		if v := recover(); v != nil {
			c.code = errdefs.ErrInternal.String()
			s.audit(r, pattern, c, http.StatusInternalServerError, start)
			panic(v)
		}
		s.audit(r, pattern, c, sw.status, start)
	}()
	s.mux.ServeHTTP(sw, r)
}

// audit writes the record of a call. It never records bodies, commands,
// environments or credentials: only what identifies the call.
func (s *Server) audit(r *http.Request, pattern string, c *call, status int, start time.Time) {
	if s.cfg.Audit == nil {
		return
	}
	if status == 0 {
		status = http.StatusOK
	}
	rec := audit.Record{
		Time:       start,
		Tenant:     c.id.Tenant,
		KeyID:      c.id.KeyID,
		Subject:    c.id.Subject,
		Session:    r.PathValue("id"),
		Op:         pattern,
		Target:     target(r),
		Status:     status,
		Outcome:    "ok",
		DurationMs: float64(time.Since(start).Microseconds()) / 1000,
	}
	if rec.Session == "" {
		rec.Session = c.session
	}
	if status >= 400 {
		rec.Outcome = c.code
		if rec.Outcome == "" {
			rec.Outcome = http.StatusText(status)
		}
	}
	if err := s.cfg.Audit.Record(rec); err != nil {
		s.log.Error("audit record lost", "op", pattern, "request_id", reqID(r.Context()), "error", err)
	}
}

// target names what a call acted on inside its session or tenant: a file
// path, a process, a key or a tenant. Never contents.
func target(r *http.Request) string {
	for _, v := range []string{"pid", "key_id", "name"} {
		if t := r.PathValue(v); t != "" {
			return t
		}
	}
	if strings.Contains(r.URL.Path, "/files") || strings.HasSuffix(r.URL.Path, "/archive") {
		return r.URL.Query().Get("path")
	}
	return ""
}

// statusWriter remembers the status of a response. It passes flushes and
// hijacks (streaming and WebSockets) through.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// limiters are the per-caller token buckets: one per API key (tokens share
// their key's), one per JWT subject.
type limiters struct {
	limit rate.Limit
	burst int

	mu sync.Mutex
	m  map[string]*limiterEntry
}

type limiterEntry struct {
	l    *rate.Limiter
	used time.Time
}

// maxLimiters bounds the table: past it, buckets idle for a minute (full
// again by then at any sane rate) are dropped.
const maxLimiters = 10000

func newLimiters(perSecond float64, burst int) *limiters {
	return &limiters{limit: rate.Limit(perSecond), burst: burst, m: map[string]*limiterEntry{}}
}

func (l *limiters) allow(id *auth.Identity) error {
	if l == nil || l.limit <= 0 {
		return nil
	}
	k := id.KeyID
	if k == "" {
		k = "sub:" + id.Tenant + "/" + id.Subject
	}
	now := time.Now()
	l.mu.Lock()
	e := l.m[k]
	if e == nil {
		if len(l.m) >= maxLimiters {
			for k, e := range l.m {
				if now.Sub(e.used) > time.Minute {
					delete(l.m, k)
				}
			}
		}
		e = &limiterEntry{l: rate.NewLimiter(l.limit, l.burst)}
		l.m[k] = e
	}
	e.used = now
	res := e.l.ReserveN(now, 1)
	delay := res.DelayFrom(now)
	if delay > 0 {
		res.CancelAt(now) // a refused request takes no token
	}
	l.mu.Unlock()
	if delay > 0 {
		return errdefs.WithRetryAfter(errdefs.ErrResourceExhausted, delay,
			"rate limit: this key may make %g requests per second (bursts of %d); retry in %v", float64(l.limit), l.burst, delay.Round(time.Millisecond))
	}
	return nil
}

// errNoAuth answers the key and token endpoints of a daemon without
// authentication.
var errNoAuth = errdefs.New(errdefs.ErrInvalidArgument, "this daemon runs without authentication (--no-auth): it has no keys or tokens")
