package httpapi

import (
	"net/http"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
)

// publicRoutes answer without credentials: probes and the API description.
var publicRoutes = map[string]bool{
	"GET /healthz":      true,
	"GET /readyz":       true,
	"GET /openapi.yaml": true,
	"GET /openapi.json": true,
}

// identity is who made r; every route that asks sits behind the edge's
// Admit.
func identity(r *http.Request) *auth.Identity {
	id := edge.IdentityOf(r.Context())
	if id == nil {
		panic("httpapi: a call reached a handler without passing Admit")
	}
	return id
}

// tenant is the tenant r acts for.
func tenant(r *http.Request) string { return edge.TenantOf(r.Context()) }

// requireAdmin fails a call that only administrators may make.
func requireAdmin(r *http.Request, what string) error { return edge.RequireAdmin(r.Context(), what) }

// audited reports whether a call is recorded: everything that changes
// state, and opening a shell.
// What a session's server answers through the proxy is the server's own
// traffic, not a call of warren's API: it is not audited.
func audited(method, pattern string) bool {
	if pattern == proxyPattern {
		return false
	}
	return method != http.MethodGet && method != http.MethodHead || pattern == "GET /v1/sessions/{id}/shell" ||
		pattern == "GET /v1/sessions/{id}/port-forward/{port}"
}

// serveAuthenticated admits r through the edge, serves it and records it
// in the audit log.
func (s *Server) serveAuthenticated(w http.ResponseWriter, r *http.Request, pattern string) {
	start := time.Now()
	ctx, err := s.edge.Admit(r)
	r = r.WithContext(ctx)
	defer func() {
		// The session the path names, for the access log; the mux has set
		// the path values on r by now.
		edge.SetSession(ctx, r.PathValue("id"))
	}()
	if err != nil {
		s.edge.Refuse(ctx, w, r, err, pattern, target(r), audited(r.Method, pattern), start)
		s.writeError(w, r, err)
		return
	}
	if !audited(r.Method, pattern) || s.edge.AuditLog() == nil {
		s.mux.ServeHTTP(w, r)
		return
	}
	sw := &edge.StatusWriter{ResponseWriter: w}
	defer func() {
		// A panic is answered by the recovery above us; record it as such.
		if v := recover(); v != nil {
			s.edge.RecordHTTP(ctx, pattern, r.PathValue("id"), target(r), http.StatusInternalServerError, start)
			panic(v)
		}
		s.edge.RecordHTTP(ctx, pattern, r.PathValue("id"), target(r), sw.Status(), start)
	}()
	s.mux.ServeHTTP(sw, r)
}

// target names what a call acted on inside its session or tenant: a file
// path, a process, a key or a tenant. Never contents.
func target(r *http.Request) string {
	for _, v := range []string{"pid", "key_id", "name", "port"} {
		if t := r.PathValue(v); t != "" {
			return t
		}
	}
	if strings.Contains(r.URL.Path, "/files") || strings.HasSuffix(r.URL.Path, "/archive") {
		return r.URL.Query().Get("path")
	}
	return ""
}

// errNoAuth answers the key and token endpoints of a daemon without
// authentication.
var errNoAuth = errdefs.New(errdefs.ErrInvalidArgument, "this daemon runs without authentication (--no-auth): it has no keys or tokens")
