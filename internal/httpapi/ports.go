package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// This file serves what listens inside a session: the list of its ports,
// the switch that makes one public, an HTTP and WebSocket reverse proxy to
// a port (at /v1/sessions/{id}/ports/{port}/ and, with a preview_domain,
// at the host {port}-{id}.{domain}), and raw TCP over a WebSocket for
// `warren port-forward`. The daemon reaches a port by connecting from
// inside the sandbox's network namespace (session.Manager.DialPort), so
// all of it works without any network link, in every network mode.

// proxyPattern is the reverse proxy's route. It is no API operation (it
// answers whatever the server inside answers), so it is served beside
// the routes, as the index page is, and documented under the path's
// x-proxy in api/openapi.yaml.
const proxyPattern = "/v1/sessions/{id}/ports/{port}/{path...}"

// portSlashPattern answers the port's path without its final slash with a
// redirect to it, so that the relative links of the page served there
// resolve under it.
const portSlashPattern = "GET /v1/sessions/{id}/ports/{port}"

// previewCookie carries a token on a preview host, for the requests a
// page makes after the first (which carried ?token=).
const previewCookie = "warren_preview_token"

type (
	// publicKey marks a request served without credentials, as a public
	// port's; its value is the tenant that owns the session.
	publicKey struct{}
	// previewKey marks a request that came to a preview host; the value
	// is the path prefix the proxy strips (the path form's).
	previewKey struct{}
)

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != s {
		return 0, errdefs.New(errdefs.ErrInvalidArgument, "port %q: want a number from 1 to 65535", s)
	}
	return p, nil
}

func (s *Server) toAPIPort(id string, p *session.Port) api.Port {
	out := api.Port{Port: p.Port, Addresses: make([]string, 0, len(p.Addresses)), LoopbackOnly: p.LoopbackOnly, Public: p.Public,
		Path: fmt.Sprintf("/v1/sessions/%s/ports/%d/", id, p.Port)}
	for _, a := range p.Addresses {
		out.Addresses = append(out.Addresses, a.String())
	}
	if d := s.cfg.PreviewDomain; d != "" {
		out.PreviewHost = fmt.Sprintf("%d-%s.%s", p.Port, id, d)
	}
	return out
}

func (s *Server) listPorts(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ports, err := s.m.Ports(r.Context(), tenant(r), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.PortList{Ports: make([]api.Port, 0, len(ports))}
	for i := range ports {
		out.Ports = append(out.Ports, s.toAPIPort(id, &ports[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) putPort(w http.ResponseWriter, r *http.Request) {
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req api.PortUpdate
	if err := decodeJSON(r, &req, s.cfg.MaxJSONBytes, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	p, err := s.m.SetPortPublic(r.Context(), tenant(r), id, port, req.Public)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toAPIPort(id, p))
}

// portSlash redirects .../ports/{port} to .../ports/{port}/, query kept.
func (s *Server) portSlash(w http.ResponseWriter, r *http.Request) {
	if _, err := parsePort(r.PathValue("port")); err != nil {
		s.writeError(w, r, err)
		return
	}
	u := *r.URL
	u.Path += "/"
	if u.RawPath != "" {
		u.RawPath += "/"
	}
	http.Redirect(w, r, u.RequestURI(), http.StatusPermanentRedirect)
}

// hasCredentials reports whether r carries any credential warren reads.
func hasCredentials(r *http.Request) bool {
	return r.Header.Get("Authorization") != "" || r.Header.Get("X-API-Key") != "" || r.URL.Query().Has("token")
}

// servePort serves the proxy's routes: a request without credentials to a
// public port goes through without admission; every other one is
// admitted as any call is.
func (s *Server) servePort(w http.ResponseWriter, r *http.Request, pattern string) {
	if !hasCredentials(r) {
		// The mux sets the path values only when it serves r.
		rest, _ := strings.CutPrefix(r.URL.Path, "/v1/sessions/")
		parts := strings.SplitN(rest, "/", 4) // id, "ports", port, path
		if len(parts) >= 3 {
			if port, err := parsePort(parts[2]); err == nil {
				if tn, ok := s.m.PublicPort(parts[0], port); ok {
					edge.SetSession(r.Context(), parts[0])
					s.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), publicKey{}, tn)))
					return
				}
			}
		}
	}
	s.serveAuthenticated(w, r, pattern)
}

// proxyPort reverse-proxies HTTP, and WebSocket upgrades, to a port
// inside the session. The connection to the port is made before anything
// is answered, so that a port with nothing listening gets the envelope
// (503 unavailable). warren's credentials never reach the server inside:
// a bearer Authorization header, X-API-Key, ?token= and the preview
// cookie are removed; X-Forwarded-For, -Host, -Proto (and -Prefix on the
// path form) are set.
func (s *Server) proxyPort(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tn, public := r.Context().Value(publicKey{}).(string)
	prefix := fmt.Sprintf("/v1/sessions/%s/ports/%d", id, port)
	_, preview := r.Context().Value(previewKey{}).(bool)
	if !public {
		tn = tenant(r)
		method := identity(r).Method
		if isUpgrade(r) && !preview {
			if err := s.cfg.Origins.CheckWebSocket(r, method == auth.MethodToken); err != nil {
				s.writeError(w, r, errdefs.New(errdefs.ErrPermissionDenied, "%w", err))
				return
			}
		}
		if preview && method == auth.MethodToken && r.URL.Query().Has("token") && r.Method == http.MethodGet && !isUpgrade(r) {
			// A browser's first visit: keep the token in a cookie of this
			// host only, and show the page without it in the URL.
			setPreviewCookie(w, r, r.URL.Query().Get("token"))
			u := *r.URL
			u.Path, u.RawPath = strings.TrimPrefix(u.Path, prefix), strings.TrimPrefix(u.RawPath, prefix)
			q := u.Query()
			q.Del("token")
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
	}
	conn, err := s.m.DialPort(r.Context(), tn, id, port)
	if errdefs.Is(err, errdefs.ErrNotFound) && !public {
		// Not the caller's session, but maybe a public port, which any
		// caller may use, with credentials or without.
		if owner, ok := s.m.PublicPort(id, port); ok {
			conn, err = s.m.DialPort(r.Context(), owner, id, port)
			tn = owner
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var once sync.Once
	tr := &http.Transport{
		// One connection, the one made above: a transport per request
		// never pools a connection across sessions or callers.
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var c net.Conn
			once.Do(func() { c = conn })
			if c == nil {
				return s.m.DialPort(ctx, tn, id, port)
			}
			return c, nil
		},
		DisableKeepAlives:  true,
		DisableCompression: true,
	}
	defer tr.CloseIdleConnections()
	// A request that ended before the transport took the connection
	// (the client left) must not hold it, nor keep the session in use.
	defer once.Do(func() { conn.Close() })
	rp := &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetXForwarded()
			out := pr.Out
			out.URL.Scheme, out.URL.Host = "http", net.JoinHostPort("localhost", strconv.Itoa(port))
			// Dev servers that check Host (Vite, webpack) take localhost.
			out.Host = out.URL.Host
			out.URL.Path = "/" + strings.TrimPrefix(strings.TrimPrefix(pr.In.URL.Path, prefix), "/")
			out.URL.RawPath = ""
			if raw := pr.In.URL.RawPath; raw != "" {
				out.URL.RawPath = "/" + strings.TrimPrefix(strings.TrimPrefix(raw, prefix), "/")
			}
			if !preview {
				out.Header.Set("X-Forwarded-Prefix", prefix)
			}
			stripCredentials(out)
		},
		ModifyResponse: func(resp *http.Response) error {
			if !preview {
				// The path form serves the app on the daemon's own origin:
				// its pages run as an opaque origin, so that no script of
				// the sandbox acts as the daemon's pages in a browser.
				resp.Header.Add("Content-Security-Policy", "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads")
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return // the client left
			}
			s.writeError(w, r, errdefs.New(errdefs.ErrUnavailable, "the server on port %d inside session %q failed to answer: %v", port, id, err))
		},
	}
	rp.ServeHTTP(w, r)
}

// stripCredentials removes what authenticated a request to warren from
// its copy for the server inside.
func stripCredentials(out *http.Request) {
	if scheme, _, _ := strings.Cut(strings.TrimSpace(out.Header.Get("Authorization")), " "); strings.EqualFold(scheme, "Bearer") {
		out.Header.Del("Authorization") // another scheme is the app's own (Basic)
	}
	out.Header.Del("X-API-Key")
	if q := out.URL.Query(); q.Has("token") {
		q.Del("token")
		out.URL.RawQuery = q.Encode()
	}
	// The preview cookie and the console's session cookie (which a
	// browser sends with every request to the daemon's origin, the path
	// form of a port included) are cut out of the Cookie headers as text:
	// parsing and re-encoding would drop the app's cookies that Go finds
	// invalid.
	if vs := out.Header.Values("Cookie"); len(vs) > 0 {
		out.Header.Del("Cookie")
		for _, v := range vs {
			var keep []string
			for _, part := range strings.Split(v, ";") {
				name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
				if name != previewCookie && name != edge.CookieName && name != edge.SecureCookieName {
					keep = append(keep, strings.TrimSpace(part))
				}
			}
			if len(keep) > 0 {
				out.Header.Add("Cookie", strings.Join(keep, "; "))
			}
		}
	}
}

func isUpgrade(r *http.Request) bool { return headerHasToken(r.Header, "Connection", "upgrade") }

func setPreviewCookie(w http.ResponseWriter, r *http.Request, tok string) {
	http.SetCookie(w, &http.Cookie{
		Name: previewCookie, Value: tok, Path: "/", MaxAge: int(auth.MaxTokenTTL.Seconds()), HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https",
	})
}

// portForward carries raw TCP to a port inside the session over a
// WebSocket of binary messages (warren port-forward).
func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkHandshake(w, r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.cfg.Origins.CheckWebSocket(r, identity(r).Method == auth.MethodToken); err != nil {
		s.writeError(w, r, errdefs.New(errdefs.ErrPermissionDenied, "%w", err))
		return
	}
	conn, err := s.m.DialPort(r.Context(), tenant(r), r.PathValue("id"), port)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer conn.Close()
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true}) // origin checked above
	if err != nil {
		return
	}
	defer c.CloseNow()
	// The connection's own context: the request's ends with the hijack.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	ws := websocket.NetConn(ctx, c, websocket.MessageBinary)
	splice(ws, conn)
}

// splice copies between a and b both ways until either side ends, then
// closes both.
func splice(a, b io.ReadWriteCloser) {
	done := make(chan struct{}, 2)
	cp := func(dst, src io.ReadWriteCloser) {
		_, _ = io.Copy(dst, src) // either side ending ends the splice
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	a.Close()
	b.Close()
	<-done
}

// Preview serves the preview hosts, {port}-{id}.{preview_domain}, in
// front of next: such a request is the path form's for that session and
// port, with the whole path for the server inside, and never reaches
// warren's own API. A browser authenticates its first visit with
// ?token= (kept in a cookie of that host only); requests with the cookie
// must come from the host's own pages (Sec-Fetch-Site, Origin), so that a
// page of another preview host (same site) cannot borrow it.
func (s *Server) Preview(next http.Handler) http.Handler {
	domain := strings.ToLower(s.cfg.PreviewDomain)
	if domain == "" {
		return next
	}
	routed := s.routed()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, port, ok := previewTarget(r.Host, domain)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		r2 := r.Clone(context.WithValue(r.Context(), previewKey{}, true))
		// The path is made canonical here: the mux would otherwise
		// redirect an unclean one to the path form's URL, which means
		// nothing on this host.
		prefix := fmt.Sprintf("/v1/sessions/%s/ports/%d", id, port)
		r2.URL.Path = prefix + cleanPath(r.URL.Path)
		if r.URL.RawPath != "" {
			r2.URL.RawPath = prefix + cleanPath(r.URL.RawPath)
		}
		r2.RequestURI = r2.URL.RequestURI()
		if !hasCredentials(r2) {
			if c, err := r2.Cookie(previewCookie); err == nil && strings.HasPrefix(c.Value, auth.TokenPrefix) && sameOrigin(r2) {
				r2.Header.Set("Authorization", "Bearer "+c.Value)
			}
		}
		routed.ServeHTTP(w, r2)
	})
}

// cleanPath is p made canonical, as net/http's mux wants it, keeping a
// final slash.
func cleanPath(p string) string {
	c := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// previewTarget parses a preview host: {port}-{id}.{domain}, any port of
// the daemon's after it.
func previewTarget(host, domain string) (id string, port int, ok bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, ok := strings.CutSuffix(strings.ToLower(host), "."+domain)
	if !ok || strings.Contains(label, ".") {
		return "", 0, false
	}
	p, id, ok := strings.Cut(label, "-")
	if !ok || id == "" {
		return "", 0, false
	}
	port, err := parsePort(p)
	if err != nil {
		return "", 0, false
	}
	return id, port, true
}

// sameOrigin reports whether a browser sent r from a page of r's own host,
// or by the user's own navigation: what a cookie of a preview host may
// authenticate. A request without Sec-Fetch-Site (an older browser, a
// program) must then carry no foreign Origin.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
		o := r.Header.Get("Origin")
		if o == "" {
			return true
		}
		_, host, _ := strings.Cut(o, "://")
		return strings.EqualFold(host, r.Host)
	}
	return false
}
