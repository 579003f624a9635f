package e2b

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/e2b/envd"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/image"
	"github.com/warrenhq/warren/internal/session"
)

// Prefix is where the facade is mounted on the daemon's port. E2B's SDKs
// take a base URL with a path (E2B_API_URL, E2B_SANDBOX_URL), so the
// facade needs no port of its own: its routes (/sandboxes, /health,
// /files, ...) would collide with warren's at the root.
const Prefix = "/e2b"

// EnvdPort is the port E2B's SDKs address envd on (E2b-Sandbox-Port, and
// the <port>-<id>.<domain> host).
const EnvdPort = 49983

// Config configures a Server.
type Config struct {
	Manager *session.Manager
	Edge    *edge.Edge
	// Images builds the base template's image (BaseImage) and resolves
	// template names to images.
	Images *image.Store
	// Keys stores the E2B-format keys POST /api-keys makes; nil when the
	// daemon runs without authentication.
	Keys auth.KeyStore
	// SecretFile keeps the secret that envd access tokens are made with,
	// so that they survive a restart; "" keeps it in memory only.
	SecretFile string
	// FleetSecret, in a fleet, returns the fleet's shared secret (nil
	// while it is not known): the access tokens of sandboxes created
	// since the node first ran in a fleet are made with a key derived
	// from it, so that every node can route their signed file URLs
	// (FleetFiles). nil: not in a fleet.
	FleetSecret func() []byte
	// PreviewDomain, if set, routes hosts 49983-<id>.<domain> to envd.
	PreviewDomain string
	Log           *slog.Logger
}

// Server is the facade. It is safe for concurrent use.
type Server struct {
	mgr           *session.Manager
	edge          *edge.Edge
	images        *image.Store
	keys          auth.KeyStore
	secret        []byte
	fleetSecret   func() []byte // nil: not in a fleet
	fleetSince    time.Time     // sandboxes created from then on have fleet tokens
	previewDomain string
	log           *slog.Logger
	envd          *envd.Server
	control       *http.ServeMux

	baseMu  sync.Mutex // guards baseOK: one build of the base image at a time
	baseOK  bool
	tokenMu sync.Mutex
	tokens  map[string]cachedToken // envd callers' warren tokens, by tenant/key
}

type cachedToken struct {
	token   string
	expires time.Time
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	secret, err := loadSecret(cfg.SecretFile)
	if err != nil {
		return nil, err
	}
	var since time.Time
	if cfg.FleetSecret != nil {
		if since, err = loadFleetSince(cfg.SecretFile); err != nil {
			return nil, err
		}
	}
	s := &Server{mgr: cfg.Manager, edge: cfg.Edge, images: cfg.Images, keys: cfg.Keys, secret: secret,
		fleetSecret: cfg.FleetSecret, fleetSince: since,
		previewDomain: strings.TrimPrefix(cfg.PreviewDomain, "."), log: log,
		envd: envd.New(envd.Config{Manager: cfg.Manager, Log: log}), tokens: map[string]cachedToken{}}
	s.routes()
	cfg.Manager.OnExpire(s.expire)
	return s, nil
}

// loadSecret reads the 32-byte secret of file, making it on first use.
func loadSecret(file string) ([]byte, error) {
	if file != "" {
		if b, err := os.ReadFile(file); err == nil && len(b) == 32 {
			return b, nil
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("e2b: read the access token secret: %w", err)
		}
	}
	b := make([]byte, 32)
	rand.Read(b)
	if file != "" {
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return nil, fmt.Errorf("e2b: %w", err)
		}
		if err := os.WriteFile(file, b, 0o600); err != nil {
			return nil, fmt.Errorf("e2b: write the access token secret: %w", err)
		}
	}
	return b, nil
}

// Mount serves the facade at Prefix on mux, and signed file URLs at
// /files: the SDK makes those from the sandbox URL's origin, dropping its
// path (new URL("/files", E2B_SANDBOX_URL)).
func (s *Server) Mount(mux *http.ServeMux) {
	mux.Handle(Prefix+"/", http.StripPrefix(Prefix, s))
	mux.HandleFunc("/files", func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.Query().Has("signature") {
			writeJSON(w, http.StatusNotFound, apiError{Code: http.StatusNotFound,
				Message: "/files serves the E2B SDK's signed file URLs only; envd is at " + Prefix + "/files"})
			return
		}
		s.ServeHTTP(w, r)
	})
}

// Hosts sends requests for envd's host, 49983-<id>.<preview domain>, to
// envd and everything else to next. It goes before warren's own preview
// hosts, which would send them to port 49983 inside the sandbox.
func (s *Server) Hosts(next http.Handler) http.Handler {
	if s.previewDomain == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, ok := s.envdHost(r.Host); ok {
			s.serveEnvd(w, r, id)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// envdHost returns the sandbox of a host 49983-<id>.<preview domain>.
func (s *Server) envdHost(host string) (string, bool) {
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h
	}
	sub, ok := strings.CutSuffix(strings.ToLower(host), "."+s.previewDomain)
	if !ok {
		return "", false
	}
	port, id, ok := strings.Cut(sub, "-")
	if !ok || port != strconv.Itoa(EnvdPort) || id == "" || strings.Contains(id, ".") {
		return "", false
	}
	return id, true
}

// ServeHTTP routes a request whose path has lost Prefix: envd traffic
// (E2b-Sandbox-Id, or a signed /files URL) to envd, the rest to the
// control plane.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
		if p := r.Header.Get("E2b-Sandbox-Port"); p != "" && p != strconv.Itoa(EnvdPort) {
			writeJSON(w, http.StatusBadRequest, apiError{Code: http.StatusBadRequest,
				Message: fmt.Sprintf("port %s: the sandbox URL serves envd (port %d) only; reach other ports through warren's port proxy", p, EnvdPort)})
			return
		}
		s.serveEnvd(w, r, id)
		return
	}
	if r.URL.Path == "/files" && r.URL.Query().Has("signature") {
		s.serveEnvd(w, r, "")
		return
	}
	s.control.ServeHTTP(w, r)
}

// routes registers the control plane: the routes E2B's SDK calls (2.45.0
// and later), as spec/openapi.yml at e2b-dev/E2B names them.
func (s *Server) routes() {
	m := http.NewServeMux()
	h := func(pattern string, op string, f func(w http.ResponseWriter, r *http.Request)) {
		m.HandleFunc(pattern, s.admit(pattern, op, f))
	}
	m.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	h("POST /sandboxes", "e2b create sandbox", s.create)
	h("POST /v2/sandboxes", "e2b create sandbox", s.create)
	h("GET /sandboxes", "", s.listV1)
	h("GET /v2/sandboxes", "", s.list)
	h("GET /sandboxes/{id}", "", s.get)
	h("DELETE /sandboxes/{id}", "e2b kill sandbox", s.kill)
	h("POST /sandboxes/{id}/connect", "e2b connect sandbox", s.connect)
	h("POST /sandboxes/{id}/resume", "e2b resume sandbox", s.resume)
	h("POST /sandboxes/{id}/timeout", "e2b set timeout", s.setTimeout)
	h("POST /sandboxes/{id}/refreshes", "e2b refresh sandbox", s.refresh)
	h("POST /sandboxes/{id}/pause", "e2b pause sandbox", s.pause)
	h("GET /sandboxes/{id}/metrics", "", s.metrics)
	h("GET /sandboxes/{id}/logs", "", s.logsV1)
	h("GET /v2/sandboxes/{id}/logs", "", s.logsV2)
	h("POST /sandboxes/{id}/snapshots", "e2b create snapshot", s.createSnapshot)
	h("POST /sandboxes/{id}/fork", "e2b fork sandbox", s.fork)
	h("GET /snapshots", "", s.listSnapshots)
	h("DELETE /templates/{id}", "e2b delete template", s.deleteTemplate)
	h("GET /templates/aliases/{alias}", "", s.templateAlias)
	h("POST /api-keys", "", s.createKey)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, apiError{Code: http.StatusNotFound, Message: fmt.Sprintf("%s %s is not a route of warren's E2B API (docs/E2B.md)", r.Method, r.URL.Path)})
	})
	s.control = m
}

// admit authenticates a control-plane call (an E2B key in X-API-KEY, or
// any warren credential), applies the rate limit and, for calls that
// change something (op set), writes the audit record.
func (s *Server) admit(pattern, op string, f func(w http.ResponseWriter, r *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		method, path, _ := strings.Cut(pattern, " ")
		edge.SetRoute(r.Context(), method+" "+Prefix+path)
		ar, err := withWarrenKey(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		ctx, err := s.edge.Admit(ar)
		r = r.WithContext(ctx)
		if err != nil {
			s.edge.Refuse(ctx, w, r, err, op, r.PathValue("id"), op != "", start)
			s.writeError(w, r, err)
			return
		}
		if op == "" {
			f(w, r)
			return
		}
		sw := &edge.StatusWriter{ResponseWriter: w}
		f(sw, r)
		s.edge.RecordHTTP(r.Context(), op, r.PathValue("id"), "", sw.Status(), start)
	}
}

// withWarrenKey returns r with an E2B key in X-API-KEY replaced by the
// warren key it spells, for the edge to authenticate.
// WarrenCredentials is r with an E2B key in X-API-Key turned into the
// warren key it stands for: a fleet node's router authenticates the
// caller with it to learn the tenant (docs/FLEET.md).
func WarrenCredentials(r *http.Request) (*http.Request, error) { return withWarrenKey(r) }

func withWarrenKey(r *http.Request) (*http.Request, error) {
	k := strings.TrimSpace(r.Header.Get("X-API-Key"))
	if !strings.HasPrefix(k, e2bKeyPrefix) {
		return r, nil
	}
	wk, ok := warrenKey(k)
	if !ok {
		return nil, errdefs.New(errdefs.ErrUnauthenticated, "malformed E2B API key: want e2b_ and 40 lowercase hex digits")
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set("X-API-Key", wk)
	return r2, nil
}

// maxBody bounds a control-plane request body.
const maxBody = 1 << 20

// decode reads r's JSON body into v; an empty body leaves v as it is when
// optional.
func decode(r *http.Request, v any, optional bool) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return errdefs.New(errdefs.ErrInvalidArgument, "read the request body: %v", err)
	}
	if len(b) > maxBody {
		return errdefs.New(errdefs.ErrTooLarge, "the request body exceeds the limit of %d bytes", maxBody)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		if optional {
			return nil
		}
		return errdefs.New(errdefs.ErrInvalidArgument, "the request needs a JSON body")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errdefs.New(errdefs.ErrInvalidArgument, "invalid JSON body: %v", err)
	}
	return nil
}

func itoa(n int) string { return strconv.Itoa(n) }
