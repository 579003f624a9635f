// Package envd serves E2B's in-sandbox API ("envd": the process.Process and
// filesystem.Filesystem Connect services, the /files REST routes and
// /health) over warren's session manager, so that E2B's SDKs drive a warren
// session as they drive an E2B sandbox. It never authenticates: the caller
// (the E2B facade's router) resolves the sandbox, checks the credentials and
// puts the Target in the request's context.
package envd

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/warrenhq/warren/internal/session"
)

// Target names the session a request acts on.
type Target struct {
	// Tenant is the warren tenant that owns the session.
	Tenant string
	// Session is the warren session id; the E2B sandbox id maps to it.
	Session string
	// User is the sandbox's default user ("user" for E2B's base template):
	// commands and file operations run as this user unless the request
	// names another, and relative paths resolve in its home.
	User string
}

type targetKey struct{}

// WithTarget returns ctx carrying t.
func WithTarget(ctx context.Context, t Target) context.Context {
	return context.WithValue(ctx, targetKey{}, t)
}

// TargetFrom returns the Target that WithTarget put in ctx.
func TargetFrom(ctx context.Context) (Target, bool) {
	t, ok := ctx.Value(targetKey{}).(Target)
	return t, ok
}

// Config configures a Server.
type Config struct {
	// Manager runs the sessions.
	Manager *session.Manager
	// Log receives the server's own log lines; nil discards them.
	Log *slog.Logger
}

// Server serves envd's paths for every session of Config.Manager.
type Server struct {
	mgr *session.Manager
	log *slog.Logger
	mux *http.ServeMux
}

// New returns a Server.
func New(cfg Config) *Server {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{mgr: cfg.Manager, log: log, mux: http.NewServeMux()}
	s.routes()
	return s
}

// ServeHTTP serves envd's own paths (/health, /files, /process.Process/*,
// /filesystem.Filesystem/*) with the facade's prefix already stripped and the
// Target in the request's context, the caller having authenticated the
// request. A request without a Target is answered 404, as for an unknown
// sandbox.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() {}
