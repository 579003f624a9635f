// Package web serves warren's web console: a page of plain ES modules and
// the vendored xterm.js, embedded in the binary (go build never needs
// Node), at the daemon's root, and the few calls of its own the console
// needs besides the REST API: sign-in and sign-out (the edge's browser
// sessions), who the browser is, and the last hour of the daemon's
// metrics. Every answer carries a strict Content-Security-Policy and
// forbids framing. The package holds no session logic: the page calls the
// REST API like any client, with the console's cookie.
package web

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/metrics"
)

//go:embed static
var static embed.FS

// Static is the console's files: index.html, the page's modules and style,
// and vendor/ (make web).
func Static() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded directory is there by construction
	}
	return sub
}

// Prefix is where the console's files and calls live.
const Prefix = "/console/"

// Config configures a Console.
type Config struct {
	// Edge admits the console's calls (required).
	Edge *edge.Edge
	// History, if set, serves the charts of the last hour.
	History *metrics.History
	// API answers GET / for clients that ask for JSON (the REST API's
	// index); nil answers them 404.
	API http.Handler
	// Version is the daemon's, and Docs where its documentation is:
	// the page's footer names them.
	Version, Docs string
}

// page is index.html, a template for its footer's version, links and
// origin (text only: no script or style comes from it).
var page = template.Must(template.ParseFS(static, "static/index.html"))

// Console is the web console.
type Console struct {
	cfg   Config
	files http.Handler
}

// New returns the console.
func New(cfg Config) *Console {
	return &Console{cfg: cfg, files: http.StripPrefix(Prefix, http.FileServerFS(Static()))}
}

// Mount serves the console on mux: the page at GET /, its files under
// Prefix. Patterns more specific than the REST API's "/", so the API keeps
// every other path.
func (c *Console) Mount(mux *http.ServeMux) {
	mux.Handle("GET /{$}", secured(http.HandlerFunc(c.index)))
	mux.Handle("GET "+Prefix, secured(http.HandlerFunc(c.file)))
	mux.Handle("POST "+Prefix+"api/signin", secured(http.HandlerFunc(c.signIn)))
	mux.Handle("POST "+Prefix+"api/signout", secured(http.HandlerFunc(c.signOut)))
	mux.Handle("GET "+Prefix+"api/whoami", secured(http.HandlerFunc(c.whoAmI)))
	mux.Handle("GET "+Prefix+"api/history", secured(http.HandlerFunc(c.history)))
}

// ContentSecurityPolicy is every console answer's policy: scripts, styles
// and connections from the daemon's own origin only, nothing inline (the
// page has no inline script or style; xterm.js's own <style> elements are
// moved into constructed style sheets by term.js), no plugins, no
// framing, forms posting nowhere else.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; " +
	"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'"

// secured adds the console's security headers.
func secured(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		csp := ContentSecurityPolicy
		// connect-src 'self' covers the page's WebSocket in CSP 3
		// browsers; older ones want the ws: origin spelled out.
		if host := r.Host; host != "" && !strings.ContainsAny(host, " ;'\"") {
			scheme := "ws://"
			if r.TLS != nil {
				scheme = "wss://"
			}
			csp = strings.Replace(csp, "connect-src 'self'", "connect-src 'self' "+scheme+host, 1)
		}
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		// The files change with the binary: revalidate, never reuse
		// another version's module next to this one's.
		h.Set("Cache-Control", "no-cache")
		next.ServeHTTP(w, r)
	})
}

// index serves the page to browsers; a client that asks for JSON only
// gets the REST API's index.
func (c *Console) index(w http.ResponseWriter, r *http.Request) {
	accept := r.Header.Get("Accept")
	if strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html") && c.cfg.API != nil {
		// The API's answer is its own, without the page's headers.
		for _, k := range []string{"Content-Security-Policy", "X-Frame-Options", "Cache-Control", "Cross-Origin-Resource-Policy"} {
			w.Header().Del(k)
		}
		c.cfg.API.ServeHTTP(w, r)
		return
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	page.Execute(w, struct{ Version, Docs, Origin string }{c.cfg.Version, c.cfg.Docs, scheme + r.Host})
}

// file serves one of the console's files; the directory has no listing.
func (c *Console) file(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/") {
		c.cfg.Edge.WriteError(w, r, errdefs.New(errdefs.ErrNotFound, "no such file: %s", r.URL.Path))
		return
	}
	c.files.ServeHTTP(w, r)
}

// whoami is what the page learns of its caller.
type whoami struct {
	Tenant string `json:"tenant"`
	KeyID  string `json:"key_id,omitempty"`
	Admin  bool   `json:"admin"`
	// Auth is false when the daemon runs without authentication: the page
	// then has no sign-in.
	Auth bool `json:"auth"`
	// CSRF is the token the page sends in X-CSRF-Token on every call
	// that changes something.
	CSRF string `json:"csrf,omitempty"`
}

func toWhoAmI(b *edge.Browser) whoami {
	return whoami{Tenant: b.Identity.Tenant, KeyID: b.Identity.KeyID, Admin: b.Identity.Admin, Auth: b.Auth, CSRF: b.CSRF}
}

// signIn exchanges the API key in the Authorization header for the
// console's cookie. The answer must not be stored by anything on the way.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	start := time.Now()
	b, err := c.cfg.Edge.SignIn(w, r)
	c.cfg.Edge.RecordSignIn(r.Context(), "POST "+Prefix+"api/signin", b, err, start)
	if err != nil {
		if errdefs.Is(err, errdefs.ErrUnauthenticated) {
			w.Header().Set("WWW-Authenticate", edge.Challenge(r, err))
		}
		c.cfg.Edge.WriteError(w, r, err)
		return
	}
	edge.WriteJSON(w, http.StatusOK, toWhoAmI(b))
}

// signOut ends the browser's session on the server.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if err := c.cfg.Edge.SignOut(w, r); err != nil {
		c.cfg.Edge.WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// whoAmI tells a reloaded page who it is signed in as, and its CSRF token.
func (c *Console) whoAmI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	b, err := c.cfg.Edge.WhoAmI(r)
	if err != nil {
		c.cfg.Edge.WriteError(w, r, err)
		return
	}
	edge.WriteJSON(w, http.StatusOK, toWhoAmI(b))
}

// historyAnswer is GET /console/api/history.
type historyAnswer struct {
	// Points are the intervals of the last hour, oldest first.
	Points []metrics.Point `json:"points"`
}

// history serves the last hour of the daemon's metrics, to admins: they
// are the whole daemon's, every tenant's.
func (c *Console) history(w http.ResponseWriter, r *http.Request) {
	ctx, err := c.cfg.Edge.Admit(r)
	if err == nil {
		err = edge.RequireAdmin(ctx, "reading the daemon's metrics")
	}
	if err != nil {
		c.cfg.Edge.WriteError(w, r.WithContext(ctx), err)
		return
	}
	var pts []metrics.Point
	if c.cfg.History != nil {
		pts = c.cfg.History.Points()
	}
	if pts == nil {
		pts = []metrics.Point{}
	}
	edge.WriteJSON(w, http.StatusOK, historyAnswer{Points: pts})
}
