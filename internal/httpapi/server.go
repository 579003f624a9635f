// Package httpapi serves warren's REST API (v1) over net/http. Handlers are
// thin: they decode, call the session manager, and encode; every error goes
// through one mapping to the envelope of DESIGN.md.
package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/wire"
)

// Config configures a Server.
type Config struct {
	Manager    *session.Manager
	Images     Images
	Log        *slog.Logger
	Version    string
	CgroupMode string
	// MaxJSONBytes caps JSON request bodies (default 8 MiB: an exec's stdin
	// travels inside it).
	MaxJSONBytes int64
	// MaxImageBytes caps an image upload (default 8 GiB).
	MaxImageBytes int64
	// Edge admits callers, keeps the access and audit logs and writes
	// the error envelope; nil is an edge without authentication (every
	// caller the admin of edge.DefaultTenant), audit log or rate limit.
	Edge *edge.Edge
	// Tenants keeps tenants' settings; TenantChanged, if set, hears of
	// every change.
	Tenants       auth.TenantStore
	TenantChanged func(name string)
	// Metrics, if set, serves GET /metrics (to admins only: the metrics
	// name tenants).
	Metrics http.Handler
	// Ready, if set, says whether the daemon can take new work: /readyz
	// answers 503 with its error's message while it returns one. Without
	// it /readyz checks only that the manager is not closing.
	Ready func(ctx context.Context) error
	// Origins are the browser origins besides the daemon's own whose
	// pages may open the shell WebSocket (cors_origins); nil: none.
	Origins *edge.Origins
	// PreviewDomain, if set, is the domain of the preview hosts
	// {port}-{id}.{domain} that Preview serves (ports.go).
	PreviewDomain string
	// BodyIdleTimeout cuts a request body that sends nothing for this
	// long in Handler (default edge.DefaultBodyIdleTimeout); the daemon
	// applies edge.IdleBodies to every transport itself.
	BodyIdleTimeout time.Duration
}

// Server is the REST API.
type Server struct {
	cfg    Config
	m      *session.Manager
	log    *slog.Logger
	edge   *edge.Edge
	mux    *http.ServeMux
	routes []route
}

type route struct {
	method, pattern string
	h               http.HandlerFunc
}

// The encodings every transport shares (internal/wire).
var (
	toLimits      = wire.Limits
	toAPISession  = wire.Session
	toAPIProcess  = wire.Process
	signalName    = wire.SignalName
	parseSignal   = wire.ParseSignal
	toAPIResult   = wire.Result
	toAPIEntry    = wire.Entry
	textOf        = wire.TextBase64
	toExecRequest = wire.ExecRequest
)

// New returns the API server.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxJSONBytes == 0 {
		cfg.MaxJSONBytes = 8 << 20
	}
	if cfg.MaxImageBytes == 0 {
		cfg.MaxImageBytes = 8 << 30
	}
	if cfg.Edge == nil {
		cfg.Edge = edge.New(edge.Config{Log: cfg.Log})
	}
	s := &Server{cfg: cfg, m: cfg.Manager, log: cfg.Log, edge: cfg.Edge, mux: http.NewServeMux()}
	s.routes = []route{
		{"POST", "/v1/sessions", s.createSession},
		{"GET", "/v1/sessions", s.listSessions},
		{"GET", "/v1/sessions/{id}", s.getSession},
		{"DELETE", "/v1/sessions/{id}", s.deleteSession},
		{"POST", "/v1/sessions/{id}/exec", s.exec},
		{"POST", "/v1/run", s.run},
		{"GET", "/v1/sessions/{id}/files", s.readFile},
		{"PUT", "/v1/sessions/{id}/files", s.writeFile},
		{"DELETE", "/v1/sessions/{id}/files", s.removeFile},
		{"GET", "/v1/sessions/{id}/files/list", s.listFiles},
		{"GET", "/v1/sessions/{id}/files/stat", s.statFile},
		{"POST", "/v1/sessions/{id}/files/mkdir", s.mkdir},
		{"GET", "/v1/sessions/{id}/archive", s.getArchive},
		{"PUT", "/v1/sessions/{id}/archive", s.putArchive},
		{"POST", "/v1/sessions/{id}/processes", s.startProcess},
		{"GET", "/v1/sessions/{id}/processes", s.listProcesses},
		{"GET", "/v1/sessions/{id}/processes/{pid}", s.getProcess},
		{"DELETE", "/v1/sessions/{id}/processes/{pid}", s.killProcess},
		{"GET", "/v1/sessions/{id}/processes/{pid}/output", s.processOutput},
		{"POST", "/v1/sessions/{id}/processes/{pid}/stdin", s.writeStdin},
		{"POST", "/v1/sessions/{id}/processes/{pid}/signal", s.signalProcess},
		{"POST", "/v1/sessions/{id}/processes/{pid}/resize", s.resizeProcess},
		{"GET", "/v1/sessions/{id}/shell", s.shell},
		{"GET", "/v1/sessions/{id}/ports", s.listPorts},
		{"PUT", "/v1/sessions/{id}/ports/{port}", s.putPort},
		{"GET", "/v1/sessions/{id}/port-forward/{port}", s.portForward},
		{"GET", "/v1/sessions/{id}/network", s.getNetwork},
		{"PATCH", "/v1/sessions/{id}/network", s.patchNetwork},
		{"GET", "/v1/sessions/{id}/network/denials", s.networkDenials},
		{"GET", "/v1/images", s.listImages},
		{"POST", "/v1/images", s.importImage},
		{"GET", "/v1/images/{name}", s.getImage},
		{"DELETE", "/v1/images/{name}", s.deleteImage},
		{"POST", "/v1/images/pull", s.pullImage},
		{"POST", "/v1/images/prune", s.pruneImages},
		{"POST", "/v1/workspaces", s.createWorkspace},
		{"GET", "/v1/workspaces", s.listWorkspaces},
		{"GET", "/v1/workspaces/{name}", s.getWorkspace},
		{"DELETE", "/v1/workspaces/{name}", s.deleteWorkspace},
		{"POST", "/v1/sessions/{id}/snapshot", s.snapshotSession},
		{"POST", "/v1/sessions/{id}/fork", s.forkSession},
		{"GET", "/v1/snapshots", s.listSnapshots},
		{"GET", "/v1/snapshots/{name}", s.getSnapshot},
		{"DELETE", "/v1/snapshots/{name}", s.deleteSnapshot},
		{"GET", "/v1/snapshots/{name}/export", s.exportSnapshot},
		{"PUT", "/v1/snapshots/{name}/import", s.importSnapshot},
		{"GET", "/v1/stats", s.stats},
		{"POST", "/v1/keys", s.createKey},
		{"GET", "/v1/keys", s.listKeys},
		{"DELETE", "/v1/keys/{key_id}", s.revokeKey},
		{"POST", "/v1/tokens", s.createToken},
		{"GET", "/v1/tenants", s.listTenants},
		{"GET", "/v1/tenants/{name}", s.getTenant},
		{"PUT", "/v1/tenants/{name}", s.putTenant},
		{"DELETE", "/v1/tenants/{name}", s.deleteTenant},
		{"GET", "/v1/audit", s.queryAudit},
		{"GET", "/healthz", s.healthz},
		{"GET", "/readyz", s.readyz},
		{"GET", "/metrics", s.metrics},
		{"GET", "/openapi.yaml", s.openapiYAML},
		{"GET", "/openapi.json", s.openapiJSON},
	}
	for _, rt := range s.routes {
		s.mux.HandleFunc(rt.method+" "+rt.pattern, rt.h)
	}
	s.mux.HandleFunc(indexPattern, s.index) // a page for browsers, not an API operation (index.go)
	// What a session serves, not API operations (ports.go).
	s.mux.HandleFunc(proxyPattern, s.proxyPort)
	s.mux.HandleFunc(portSlashPattern, s.portSlash)
	return s
}

// Routes lists the served operations as "METHOD /path".
func (s *Server) Routes() []string {
	out := make([]string, 0, len(s.routes))
	for _, r := range s.routes {
		out = append(out, r.method+" "+r.pattern)
	}
	slices.Sort(out)
	return out
}

// Mount serves the REST API at the root of mux: every path no other
// transport claims.
func (s *Server) Mount(mux *http.ServeMux) { mux.Handle("/", s.routed()) }

// Handler is the API on its own behind the edge's request ids and access
// log (tests, embedding); the daemon mounts it beside the other transports
// with Mount instead.
func (s *Server) Handler() http.Handler {
	return s.edge.Observe(edge.IdleBodies(s.cfg.BodyIdleTimeout, s.routed()))
}

// routed is the API with its middleware: panics become 500 envelopes,
// unknown paths and wrong methods get the envelope too, and every route
// but the probes and the API description passes the edge's admission
// (authentication and the caller's rate limit) and records mutating calls
// in the audit log.
func (s *Server) routed() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "request_id", edge.RequestID(r.Context()), "panic", v, "stack", string(debug.Stack()))
				s.writeError(w, r, errdefs.New(errdefs.ErrInternal, "internal error"))
			}
		}()
		_, pattern := s.mux.Handler(r)
		edge.SetRoute(r.Context(), pattern)
		switch {
		case pattern == "":
			s.noRoute(w, r)
		case publicRoutes[pattern]:
			s.mux.ServeHTTP(w, r)
		case pattern == proxyPattern || pattern == portSlashPattern:
			s.servePort(w, r, pattern)
		default:
			s.serveAuthenticated(w, r, pattern)
		}
	})
}

func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, p := s.mux.Handler(r2); p != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeJSON(w, http.StatusMethodNotAllowed, api.Error{Error: api.ErrorBody{
			Code:    "invalid_argument",
			Message: fmt.Sprintf("method %s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allow, ", ")),
		}})
		return
	}
	if oauthPaths[r.URL.Path] || strings.HasPrefix(r.URL.Path, "/.well-known/oauth-") {
		s.writeError(w, r, errNoOAuth)
		return
	}
	s.writeError(w, r, errdefs.New(errdefs.ErrNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path))
}

// oauthPaths are where OAuth clients look for an authorization server
// when no metadata names one (the MCP authorization spec's defaults).
var oauthPaths = map[string]bool{"/register": true, "/authorize": true, "/token": true}

// errNoOAuth answers OAuth discovery and registration. MCP hosts that meet
// a 401 (mcp-remote, MCP Inspector in OAuth mode) start OAuth whatever the
// challenge says, and show the body of the failing step ("Dynamic Client
// Registration rejected (HTTP 404): ..."): this is where warren's word
// reaches their users (docs/SECURITY.md).
//
// The text has no quotes or angle brackets: JSON escapes them, and hosts
// show the body as it came.
var errNoOAuth = errdefs.New(errdefs.ErrNotFound, "warren does not serve OAuth: authenticate with an API key or token "+
	"in the header 'Authorization: Bearer KEY' (mcp-remote: --header 'Authorization: Bearer KEY'); "+
	"if you sent one, the daemon refused it: it is wrong, expired or revoked")

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSessionRequest
	if err := decodeJSON(r, &req, s.cfg.MaxJSONBytes, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	edge.SetSession(r.Context(), req.ID)
	info, created, err := s.m.Create(r.Context(), tenant(r), wire.CreateRequest(&req))
	if err != nil {
		edge.SetSession(r.Context(), req.ID)
		s.writeError(w, r, err)
		return
	}
	edge.SetSession(r.Context(), info.ID)
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	writeJSON(w, status, toAPISession(info))
}

// listSessions lists the caller's sessions; ?all=true lists every
// tenant's, for an admin.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	tn := tenant(r)
	all := false
	if v := r.URL.Query().Get("all"); v != "" {
		var err error
		if all, err = strconv.ParseBool(v); err != nil {
			s.writeError(w, r, errdefs.New(errdefs.ErrInvalidArgument, "all=%q: want true or false", v))
			return
		}
	}
	if all {
		if err := requireAdmin(r, "listing every tenant's sessions"); err != nil {
			s.writeError(w, r, err)
			return
		}
		tn = ""
	}
	infos, missing := s.m.ListFleet(r.Context(), tn)
	if len(missing) > 0 {
		w.Header().Set(edge.PartialHeader, strings.Join(missing, ","))
	}
	out := api.SessionList{Sessions: make([]api.Session, 0, len(infos))}
	for _, in := range infos {
		as := toAPISession(in)
		if all {
			as.Tenant = in.Tenant
		}
		out.Sessions = append(out.Sessions, as)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	info, err := s.m.Get(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPISession(info))
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	if err := s.m.Delete(r.Context(), tenant(r), r.PathValue("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	if s.execResumed(w, r) { // a reconnect to a stream: never run it twice
		return
	}
	var req api.ExecRequest
	if err := decodeJSON(r, &req, s.cfg.MaxJSONBytes, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	ereq, err := toExecRequest(&req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if wantsSSE(r) {
		s.execStream(w, r, ereq)
		return
	}
	res, err := s.m.Exec(r.Context(), tenant(r), r.PathValue("id"), ereq, nil)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPIResult(res))
}

func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	var req api.RunRequest
	if err := decodeJSON(r, &req, s.cfg.MaxJSONBytes, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	ereq, err := toExecRequest(&req.ExecRequest)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.m.Run(r.Context(), tenant(r), &session.RunRequest{Image: req.Image, Limits: toLimits(req.Limits), Exec: *ereq,
		Network: req.Network.GetMode(), NetworkAllow: req.Network.GetAllow(), NetworkDeny: req.Network.GetDeny()})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPIResult(res))
}

// pathParam returns the required ?path= parameter.
func pathParam(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", errdefs.New(errdefs.ErrInvalidArgument, "query parameter path is required")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", badQuery("path", p, "must not contain NUL")
	}
	return p, nil
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, contentType string, open func(path string) (*session.Download, error)) {
	p, err := pathParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d, err := open(p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer d.Close()
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(d.First); err != nil {
		return
	}
	if _, err := io.Copy(w, d); err != nil {
		// Headers are gone: the only honest signal left is to break the
		// connection, so the client sees a truncated body, not a short one.
		panic(http.ErrAbortHandler)
	}
	if err := d.Err(); err != nil {
		panic(http.ErrAbortHandler)
	}
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	s.download(w, r, "application/octet-stream", func(p string) (*session.Download, error) {
		return s.m.ReadFile(r.Context(), tenant(r), r.PathValue("id"), p)
	})
}

func (s *Server) getArchive(w http.ResponseWriter, r *http.Request) {
	s.download(w, r, "application/x-tar", func(p string) (*session.Download, error) {
		return s.m.GetArchive(r.Context(), tenant(r), r.PathValue("id"), p)
	})
}

// uploadBody caps an upload at the daemon's file limit.
func (s *Server) uploadBody(w http.ResponseWriter, r *http.Request) (io.Reader, error) {
	max := s.m.MaxFileBytes()
	if r.ContentLength > max {
		return nil, errdefs.New(errdefs.ErrTooLarge, "the body of %d bytes exceeds the limit of %d bytes", r.ContentLength, max)
	}
	return http.MaxBytesReader(w, r.Body, max), nil
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var mode uint32
	if v := r.URL.Query().Get("mode"); v != "" {
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil || m > 0o7777 {
			s.writeError(w, r, badQuery("mode", v, "must be octal permission bits such as 0644"))
			return
		}
		mode = uint32(m)
	}
	body, err := s.uploadBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	n, err := s.m.WriteFile(r.Context(), tenant(r), r.PathValue("id"), p, mode, body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.FileWritten{Path: p, Size: n})
}

func (s *Server) putArchive(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := s.uploadBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	n, err := s.m.PutArchive(r.Context(), tenant(r), r.PathValue("id"), p, body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.FileWritten{Path: p, Size: n})
}

func (s *Server) removeFile(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	recursive := false
	if v := r.URL.Query().Get("recursive"); v != "" {
		recursive, err = strconv.ParseBool(v)
		if err != nil {
			s.writeError(w, r, badQuery("recursive", v, "must be true or false"))
			return
		}
	}
	if err := s.m.Remove(r.Context(), tenant(r), r.PathValue("id"), p, recursive); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	entries, err := s.m.ListFiles(r.Context(), tenant(r), r.PathValue("id"), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.FileList{Entries: make([]api.FileEntry, 0, len(entries))}
	for i := range entries {
		out.Entries = append(out.Entries, toAPIEntry(&entries[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) statFile(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	e, err := s.m.Stat(r.Context(), tenant(r), r.PathValue("id"), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPIEntry(e))
}

func (s *Server) mkdir(w http.ResponseWriter, r *http.Request) {
	p, err := pathParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	e, err := s.m.Mkdir(r.Context(), tenant(r), r.PathValue("id"), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPIEntry(e))
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Stats{
		Sessions:    len(s.m.List(r.Context(), tenant(r))),
		MaxSessions: s.m.Config().MaxSessions,
		CgroupMode:  s.cfg.CgroupMode,
		Version:     s.cfg.Version,
	})
}

// healthz answers 200 while the process serves, with the build it runs:
// the version the daemon was given (Config.Version) and the commit go build
// stamped into the binary ("unknown" without one).
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": s.cfg.Version, "commit": buildCommit()})
}

// buildCommit is the binary's vcs.revision, with "-dirty" if it was built
// from a modified tree.
var buildCommit = sync.OnceValue(func() string {
	commit, dirty := "unknown", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, kv := range bi.Settings {
			switch {
			case kv.Key == "vcs.revision" && kv.Value != "":
				commit = kv.Value
			case kv.Key == "vcs.modified" && kv.Value == "true":
				dirty = "-dirty"
			}
		}
	}
	if commit == "unknown" {
		return commit
	}
	return commit + dirty
})

// readyz answers 200 while the daemon can take new work, else 503 with
// the reason; healthz answers 200 as long as the process serves at all.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	var err error
	switch {
	case !s.m.Ready():
		err = errdefs.New(errdefs.ErrUnavailable, "the daemon is shutting down")
	case s.cfg.Ready != nil:
		err = s.cfg.Ready(r.Context())
	}
	if err != nil {
		if !errdefs.Is(err, errdefs.ErrUnavailable) {
			err = errdefs.New(errdefs.ErrUnavailable, "not ready: %w", err)
		}
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) openapiYAML(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(api.OpenAPIYAML)
}

func (s *Server) openapiJSON(w http.ResponseWriter, r *http.Request) {
	b, err := api.OpenAPIJSON()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
