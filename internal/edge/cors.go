package edge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Origins is the operator's list of browser origins that may call the
// daemon from pages of their own (cors_origins). The zero value and nil
// allow none: the daemon then serves its own origin only, as browsers do
// by default.
//
// An entry is an origin as a browser writes it, scheme://host[:port]
// ("https://console.example.com", "http://localhost:5173"); a host that
// starts with "*." allows every subdomain of the rest, in that scheme and
// port ("https://*.example.com" allows https://a.example.com and
// https://a.b.example.com, not https://example.com); and "*" allows every
// origin. Origins is immutable once parsed.
type Origins struct {
	any    bool
	exact  map[string]bool
	suffix []wildcardOrigin
}

// wildcardOrigin is a "scheme://*.domain[:port]" entry.
type wildcardOrigin struct {
	scheme, domain, port string // domain with its leading dot: ".example.com"
}

// ParseOrigins checks and parses the entries of a cors_origins list. Empty
// entries are skipped.
func ParseOrigins(list []string) (*Origins, error) {
	o := &Origins{exact: map[string]bool{}}
	for _, e := range list {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
			continue
		case e == "*":
			o.any = true
			continue
		}
		scheme, host, port, err := splitOrigin(e)
		if err != nil {
			return nil, fmt.Errorf("allowed origin %q: %w", e, err)
		}
		if rest, ok := strings.CutPrefix(host, "*."); ok {
			if rest == "" || strings.Contains(rest, "*") {
				return nil, fmt.Errorf("allowed origin %q: a wildcard is \"*.\" and a domain, at the start of the host", e)
			}
			o.suffix = append(o.suffix, wildcardOrigin{scheme: scheme, domain: "." + rest, port: port})
			continue
		}
		if strings.Contains(host, "*") {
			return nil, fmt.Errorf("allowed origin %q: a wildcard is \"*.\" and a domain, at the start of the host", e)
		}
		o.exact[joinOrigin(scheme, host, port)] = true
	}
	return o, nil
}

// splitOrigin parses a serialized origin, scheme://host[:port] with nothing
// after it, into its lower-case parts; a scheme's default port is dropped,
// as browsers drop it in the Origin header.
func splitOrigin(s string) (scheme, host, port string, err error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", "", "", fmt.Errorf("not a URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", "", "", fmt.Errorf("want an http:// or https:// origin such as https://console.example.com")
	case u.Host == "" || u.Hostname() == "":
		return "", "", "", fmt.Errorf("the origin has no host")
	case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", "", "", fmt.Errorf("an origin is scheme://host[:port], with no path, query or user")
	}
	scheme, host, port = u.Scheme, strings.ToLower(u.Hostname()), u.Port()
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", "", "", fmt.Errorf("port %q is not a port number", port)
		}
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	return scheme, host, port, nil
}

func joinOrigin(scheme, host, port string) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // an IPv6 literal
	}
	if port == "" {
		return scheme + "://" + host
	}
	return scheme + "://" + host + ":" + port
}

// Allows reports whether a page of origin (an Origin header's value) may
// call the daemon.
func (o *Origins) Allows(origin string) bool {
	if o == nil {
		return false
	}
	if o.any {
		return true
	}
	scheme, host, port, err := splitOrigin(origin)
	if err != nil {
		return false // "null" (sandboxed frames, files) among others
	}
	if o.exact[joinOrigin(scheme, host, port)] {
		return true
	}
	for _, w := range o.suffix {
		if w.scheme == scheme && w.port == port && strings.HasSuffix(host, w.domain) {
			return true
		}
	}
	return false
}

// CrossOrigin reports whether a browser sent r from a page of another
// origin. It believes the browser's Sec-Fetch-Site header (sent by every
// browser since 2023, and which a page cannot forge), so that a page served
// through a proxy that rewrites Host still counts as same-origin; without
// it, it compares the Origin header's host with r's Host. A request
// without either header comes from no browser, and is not cross-origin.
// This is the rule of net/http's CrossOriginProtection.
func CrossOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return false
	case "":
		origin := r.Header.Get("Origin")
		if origin == "" {
			return false
		}
		u, err := url.Parse(origin)
		return err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host)
	}
	return true // same-site (another origin of the same site) or cross-site
}

// CheckWebSocket decides whether a WebSocket upgrade may go ahead. The
// browser's same-origin policy does not cover WebSockets: any page may open
// one to any host, and the browser sends along whatever it would send to
// that host. So a browser's upgrade must come from the daemon's own origin
// or an allowed one. A caller that authenticated with a token in the URL
// (?token=) needs no check: the page had to hold the token, which nothing
// sends by itself, so a foreign page cannot borrow the caller's access;
// such a caller passes tokenAuth. The error says what to change.
func (o *Origins) CheckWebSocket(r *http.Request, tokenAuth bool) error {
	if tokenAuth || !CrossOrigin(r) {
		return nil
	}
	origin := r.Header.Get("Origin")
	if o.Allows(origin) {
		return nil
	}
	return fmt.Errorf("a WebSocket from the page origin %q is refused: the daemon takes browser WebSockets from its own origin, "+
		"the origins its operator lists in cors_origins, or with a token from POST /v1/tokens as ?token=", origin)
}

// The headers of CORS answers. Browsers let a page send only the
// "CORS-safelisted" request headers unless the preflight allows more, and
// let it read only the safelisted response headers unless the answer
// exposes more: these are what warren's REST API, its server-sent events,
// Connect and gRPC-Web clients send and read.
var (
	corsMethods        = "GET, HEAD, POST, PUT, DELETE"
	corsAllowedHeaders = strings.Join([]string{
		"Authorization", "X-API-Key", "Content-Type", "Accept", "Last-Event-ID", "X-Request-ID",
		// Connect and gRPC-Web.
		"Connect-Protocol-Version", "Connect-Timeout-Ms", "Connect-Accept-Encoding", "Connect-Content-Encoding",
		"Grpc-Timeout", "Grpc-Accept-Encoding", "Grpc-Encoding", "X-Grpc-Web", "X-User-Agent",
	}, ", ")
	corsExposedHeaders = strings.Join([]string{
		"Retry-After", "WWW-Authenticate", "X-Request-ID", "Warren-Output-Offset", "Warren-Error-Code",
		"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin", "Connect-Content-Encoding", "Connect-Accept-Encoding",
	}, ", ")
)

// corsMaxAge is how long a browser may keep a preflight's answer, in
// seconds: two hours, the most Chromium keeps one.
const corsMaxAge = "7200"

// CORS serves next to the browser origins o allows, with Cross-Origin
// Resource Sharing: it answers their preflight requests (OPTIONS with
// Access-Control-Request-Method) itself, and marks their other answers
// readable by the page. It never sends Access-Control-Allow-Credentials:
// warren takes credentials in headers, never in cookies.
//
// A page of another origin that o does not allow gets 403 to its preflight
// and to any request that changes state (a method other than GET, HEAD and
// OPTIONS): a page can send such a request without a preflight (a form
// post, a text/plain fetch), and without this a daemon that needs no
// credentials (--no-auth on loopback) would run it for any site the user
// visits. Its GETs are served, unreadable to the page, as browsers do.
func CORS(o *Origins, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		allowed := o.Allows(origin)
		switch {
		case preflight && allowed:
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Methods", corsMethods)
			h.Set("Access-Control-Allow-Headers", corsAllowedHeaders)
			h.Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		case allowed:
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Expose-Headers", corsExposedHeaders)
		case !CrossOrigin(r):
			// The daemon's own origin: no CORS needed.
		case preflight || !safeMethod(r.Method):
			refuseOrigin(w, origin)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// refuseOrigin answers 403 with the error envelope. The page cannot read it
// (the browser hides a refused cross-origin answer), but its developer
// sees it in the browser's network panel.
func refuseOrigin(w http.ResponseWriter, origin string) {
	type body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		Error body `json:"error"`
	}{body{"permission_denied", fmt.Sprintf("requests from the page origin %q are refused: "+
		"the daemon's operator lists the browser origins it serves in cors_origins", origin)}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(http.StatusForbidden)
	w.Write(append(b, '\n'))
}
