// Package envd serves E2B's in-sandbox API ("envd": the process.Process and
// filesystem.Filesystem Connect services, the /files REST routes and
// /health) over warren's session manager, so that E2B's SDKs drive a warren
// session as they drive an E2B sandbox. It never authenticates: the caller
// (the E2B facade's router) resolves the sandbox, checks the credentials and
// puts the Target in the request's context.
//
// Commands are warren durable processes; the filesystem calls go through
// the manager to warren's in-sandbox agent (read and write as warren's file
// API; stat, listings, owner names, extended attributes, rename as its
// OpFS; watches as its OpFSWatch, inotify), so they need nothing in the
// sandbox's image.
package envd

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/e2b/envd/gen/filesystem/filesystemconnect"
	"github.com/warrenhq/warren/internal/e2b/envd/gen/process/processconnect"
	"github.com/warrenhq/warren/internal/errdefs"
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

	mu sync.Mutex
	// sessions holds what envd adds to each session it has served: E2B
	// pids and tags of processes, polling watchers, the users' homes.
	// Keyed by tenant and id: session ids are unique per tenant only, and
	// one tenant must never meet another's pids, tags or watchers.
	// +checklocks:mu
	sessions map[sessionKey]*sessionState
}

// sessionKey names a session across tenants.
type sessionKey struct{ tenant, id string }

// New returns a Server.
func New(cfg Config) *Server {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{mgr: cfg.Manager, log: log, mux: http.NewServeMux(), sessions: map[sessionKey]*sessionState{}}
	// The SDKs speak Connect with the JSON codec; connect-go serves the
	// binary one and gRPC as well.
	s.mux.Handle(processconnect.NewProcessHandler(&processService{s}))
	s.mux.Handle(filesystemconnect.NewFilesystemHandler(&filesystemService{s}))
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.HandleFunc("GET /files", s.download)
	s.mux.HandleFunc("POST /files", s.upload)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such envd route: "+r.Method+" "+r.URL.Path)
	})
	return s
}

// ServeHTTP serves envd's own paths (/health, /files, /process.Process/*,
// /filesystem.Filesystem/*) with the facade's prefix already stripped and the
// Target in the request's context, the caller having authenticated the
// request. A request without a Target is answered as for a sandbox that is
// gone.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, ok := TargetFrom(r.Context()); !ok {
		writeError(w, http.StatusBadGateway, "no sandbox named in the request")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Forget drops what the server keeps for a session (its E2B pids, tags and
// watchers); the control plane calls it when the sandbox is killed. Entries
// of sessions that end otherwise are dropped the next time the server
// prunes (see prune).
func (s *Server) Forget(tenant, sessionID string) {
	k := sessionKey{tenant, sessionID}
	s.mu.Lock()
	st := s.sessions[k]
	delete(s.sessions, k)
	s.mu.Unlock()
	if st != nil {
		st.closeWatchers()
	}
}

// health answers 204 while the session lives and 502 once it is gone: the
// SDK reads a 502 as "the sandbox was killed" after a broken stream.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	t, _ := TargetFrom(r.Context())
	info, err := s.mgr.Get(r.Context(), t.Tenant, t.Session)
	if err != nil || info.State != session.StateRunning || info.Paused() {
		writeError(w, http.StatusBadGateway, "sandbox "+t.Session+" is not running")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// userOf returns the user a request acts as: the one named by its
// Authorization header (Basic base64("user:"), as E2B's SDKs send it), else
// the sandbox's default user.
func userOf(t Target, h http.Header) (string, error) {
	user := defaultUser(t)
	auth := h.Get("Authorization")
	if auth == "" {
		return user, nil
	}
	scheme, cred, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", errdefs.New(errdefs.ErrUnauthenticated, "the Authorization header must be Basic base64(user:)")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", errdefs.New(errdefs.ErrUnauthenticated, "the Authorization header is not valid base64")
	}
	name, _, _ := strings.Cut(string(raw), ":")
	if name == "" {
		return user, nil
	}
	if err := checkUserName(name); err != nil {
		return "", err
	}
	return name, nil
}

func defaultUser(t Target) string {
	if t.User == "" {
		return "root"
	}
	return t.User
}

// checkUserName admits the names useradd does, so that a name never reads
// as an option of sudo.
func checkUserName(name string) error {
	if len(name) > 32 || name[0] == '-' {
		return errdefs.New(errdefs.ErrUnauthenticated, "invalid user name %q", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '$') {
			return errdefs.New(errdefs.ErrUnauthenticated, "invalid user name %q", name)
		}
	}
	return nil
}

// connectCodes maps warren's error classes to Connect codes, the way E2B's
// SDKs read them (not_found: FileNotFoundError for files, a missing
// process for commands; unavailable: the sandbox is gone).
var connectCodes = map[*errdefs.Class]connect.Code{
	errdefs.ErrInvalidArgument:   connect.CodeInvalidArgument,
	errdefs.ErrUnauthenticated:   connect.CodeUnauthenticated,
	errdefs.ErrPermissionDenied:  connect.CodePermissionDenied,
	errdefs.ErrNotFound:          connect.CodeNotFound,
	errdefs.ErrConflict:          connect.CodeFailedPrecondition,
	errdefs.ErrTooLarge:          connect.CodeResourceExhausted,
	errdefs.ErrResourceExhausted: connect.CodeResourceExhausted,
	errdefs.ErrUnavailable:       connect.CodeUnavailable,
	errdefs.ErrInternal:          connect.CodeInternal,
	errdefs.ErrCanceled:          connect.CodeCanceled,
}

// rpcErr turns an error of the manager into a Connect error. A session that
// is gone is unavailable (what E2B's proxy answers for a dead sandbox), not
// the not_found of a missing file or process.
func (s *Server) rpcErr(ctx context.Context, t Target, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	if errors.Is(err, context.Canceled) {
		return connect.NewError(connect.CodeCanceled, err)
	}
	if errdefs.Is(err, errdefs.ErrNotFound) && s.gone(ctx, t) {
		return connect.NewError(connect.CodeUnavailable, errors.New("sandbox "+t.Session+" is not running"))
	}
	code, ok := connectCodes[errdefs.ClassOf(err)]
	if !ok {
		code = connect.CodeInternal
	}
	return connect.NewError(code, err)
}

// gone says whether the target's session has ended or is ending.
func (s *Server) gone(ctx context.Context, t Target) bool {
	info, err := s.mgr.Get(context.WithoutCancel(ctx), t.Tenant, t.Session)
	if err != nil {
		return errdefs.Is(err, errdefs.ErrNotFound)
	}
	return info.State == session.StateDeleting || info.State == session.StateFailed
}

// canSwitch says whether work can run as user in the target's session: as
// its own user, or as anyone from a session that runs as root (through
// sudo). warren's sandboxes run with no_new_privs, so a session of another
// user can become neither root nor anyone else.
func canSwitch(t Target, user string) bool {
	return user == defaultUser(t) || defaultUser(t) == "root"
}

func target(ctx context.Context) (Target, error) {
	t, ok := TargetFrom(ctx)
	if !ok {
		return t, connect.NewError(connect.CodeUnavailable, errors.New("no sandbox named in the request"))
	}
	return t, nil
}
