package edge

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func mustOrigins(t *testing.T, list ...string) *Origins {
	t.Helper()
	o, err := ParseOrigins(list)
	if err != nil {
		t.Fatalf("ParseOrigins(%q) error: %v", list, err)
	}
	return o
}

func TestParseOriginsRefuses(t *testing.T) {
	for _, e := range []string{
		"console.example.com",              // no scheme
		"ftp://example.com",                // not http(s)
		"https://",                         // no host
		"https://example.com/app",          // a path
		"https://example.com?x=1",          // a query
		"https://user@example.com",         // a user
		"https://ex*ample.com",             // a wildcard inside the host
		"https://*.",                       // a wildcard and no domain
		"https://*.*.example.com",          // two wildcards
		"https://example.com:99999",        // no port
		"https://example.com:http",         // no port
		"https://example.com#top",          // a fragment
		"http://[::1",                      // broken
		"https://example.com/ path",        // a path again
		"   https://example.com/x?y   ",    // trimmed, still a path
		"https://console.example.com:0",    // port 0
		"https://console.example.com:-443", // negative port
	} {
		if _, err := ParseOrigins([]string{e}); err == nil {
			t.Errorf("ParseOrigins(%q) = nil error, want one", e)
		}
	}
}

func TestOriginsAllows(t *testing.T) {
	o := mustOrigins(t,
		"https://console.example.com",
		"HTTP://LocalHost:5173/", // case and a lone slash are forgiven
		"https://app.example.com:443",
		"https://*.preview.example.net",
		"http://[::1]:8080",
		"",
	)
	tests := []struct {
		origin string
		want   bool
	}{
		{"https://console.example.com", true},
		{"https://console.example.com:443", true},
		{"https://Console.Example.com", true},
		{"http://console.example.com", false}, // another scheme is another origin
		{"https://console.example.com:8443", false},
		{"https://evil.console.example.com", false},
		{"https://console.example.com.evil.net", false},
		{"http://localhost:5173", true},
		{"http://localhost:5174", false},
		{"https://app.example.com", true},
		{"https://a.preview.example.net", true},
		{"https://a.b.preview.example.net", true},
		{"https://preview.example.net", false}, // the wildcard wants a subdomain
		{"https://xpreview.example.net", false},
		{"http://a.preview.example.net", false},
		{"https://a.preview.example.net:8443", false},
		{"http://[::1]:8080", true},
		{"null", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := o.Allows(tc.origin); got != tc.want {
			t.Errorf("Allows(%q) = %v, want %v", tc.origin, got, tc.want)
		}
	}
	if got := mustOrigins(t, "*").Allows("https://anything.example"); !got {
		t.Errorf(`"*": Allows(https://anything.example) = false, want true`)
	}
	var none *Origins
	if none.Allows("https://console.example.com") {
		t.Errorf("nil Origins allows an origin")
	}
	if mustOrigins(t).Allows("https://console.example.com") {
		t.Errorf("an empty list allows an origin")
	}
}

func TestCrossOrigin(t *testing.T) {
	tests := []struct {
		name          string
		site, origin  string
		host          string
		want          bool
		wantWebSocket bool // what CheckWebSocket says without a token: allowed?
	}{
		{name: "no browser", host: "127.0.0.1:7070", want: false, wantWebSocket: true},
		{name: "same origin by Sec-Fetch-Site behind a proxy", site: "same-origin", origin: "https://warren.example.com", host: "127.0.0.1:7070", want: false, wantWebSocket: true},
		{name: "typed in the address bar", site: "none", host: "127.0.0.1:7070", want: false, wantWebSocket: true},
		{name: "cross-site", site: "cross-site", origin: "https://evil.example", host: "127.0.0.1:7070", want: true, wantWebSocket: false},
		{name: "same site, other origin", site: "same-site", origin: "https://other.example.com", host: "warren.example.com", want: true, wantWebSocket: false},
		{name: "allowed origin", site: "cross-site", origin: "https://console.example.com", host: "127.0.0.1:7070", want: true, wantWebSocket: true},
		{name: "old browser, same host", origin: "http://127.0.0.1:7070", host: "127.0.0.1:7070", want: false, wantWebSocket: true},
		{name: "old browser, other host", origin: "http://evil.example", host: "127.0.0.1:7070", want: true, wantWebSocket: false},
		{name: "old browser, null origin", origin: "null", host: "127.0.0.1:7070", want: true, wantWebSocket: false},
	}
	o := mustOrigins(t, "https://console.example.com")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://"+tc.host+"/v1/sessions/s/shell", nil)
			r.Host = tc.host
			if tc.site != "" {
				r.Header.Set("Sec-Fetch-Site", tc.site)
			}
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if got := CrossOrigin(r); got != tc.want {
				t.Errorf("CrossOrigin() = %v, want %v", got, tc.want)
			}
			err := o.CheckWebSocket(r, false)
			if (err == nil) != tc.wantWebSocket {
				t.Errorf("CheckWebSocket(r, false) = %v, want allowed %v", err, tc.wantWebSocket)
			}
			if err != nil && !strings.Contains(err.Error(), "cors_origins") {
				t.Errorf("CheckWebSocket error %q does not say what to change", err)
			}
			if err := o.CheckWebSocket(r, true); err != nil {
				t.Errorf("CheckWebSocket(r, true) = %v; a token needs no origin check", err)
			}
		})
	}
}

func TestCORS(t *testing.T) {
	served := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTeapot)
	})
	h := CORS(mustOrigins(t, "https://console.example.com"), next)
	do := func(method, origin, site string, hdr map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "http://127.0.0.1:7070/v1/sessions", nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if site != "" {
			r.Header.Set("Sec-Fetch-Site", site)
		}
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	t.Run("preflight of an allowed origin", func(t *testing.T) {
		served = 0
		w := do("OPTIONS", "https://console.example.com", "cross-site", map[string]string{
			"Access-Control-Request-Method":  "POST",
			"Access-Control-Request-Headers": "authorization,content-type,connect-protocol-version",
		})
		if w.Code != http.StatusNoContent || served != 0 {
			t.Fatalf("preflight = %d (next served %d times), want 204 answered by CORS", w.Code, served)
		}
		if got := w.Header().Get("Access-Control-Allow-Origin"); got != "https://console.example.com" {
			t.Errorf("Access-Control-Allow-Origin = %q", got)
		}
		if w.Header().Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("the preflight allows credentials; warren takes none from cookies")
		}
		allowed := strings.ToLower(w.Header().Get("Access-Control-Allow-Headers"))
		for _, want := range []string{"authorization", "content-type", "connect-protocol-version", "x-grpc-web", "x-user-agent", "last-event-id", "grpc-timeout", "connect-timeout-ms"} {
			if !strings.Contains(", "+allowed+",", ", "+want+",") {
				t.Errorf("Access-Control-Allow-Headers %q lacks %s", allowed, want)
			}
		}
		for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
			if !strings.Contains(w.Header().Get("Access-Control-Allow-Methods"), m) {
				t.Errorf("Access-Control-Allow-Methods %q lacks %s", w.Header().Get("Access-Control-Allow-Methods"), m)
			}
		}
		if w.Header().Get("Access-Control-Max-Age") == "" {
			t.Errorf("no Access-Control-Max-Age: every call would preflight")
		}
	})

	t.Run("request of an allowed origin", func(t *testing.T) {
		served = 0
		w := do("POST", "https://console.example.com", "cross-site", nil)
		if w.Code != http.StatusTeapot || served != 1 {
			t.Fatalf("POST = %d (served %d), want it served", w.Code, served)
		}
		if got := w.Header().Get("Access-Control-Allow-Origin"); got != "https://console.example.com" {
			t.Errorf("Access-Control-Allow-Origin = %q", got)
		}
		exposed := w.Header().Get("Access-Control-Expose-Headers")
		for _, want := range []string{"Grpc-Status", "Grpc-Message", "Retry-After", "Warren-Output-Offset"} {
			if !strings.Contains(exposed, want) {
				t.Errorf("Access-Control-Expose-Headers %q lacks %s", exposed, want)
			}
		}
		if !strings.Contains(strings.Join(w.Header().Values("Vary"), ","), "Origin") {
			t.Errorf("Vary = %q, want Origin: the answer differs by origin", w.Header().Values("Vary"))
		}
	})

	for _, tc := range []struct {
		name, method string
		hdr          map[string]string
	}{
		{"preflight", "OPTIONS", map[string]string{"Access-Control-Request-Method": "POST"}},
		{"text/plain POST", "POST", nil},
		{"DELETE", "DELETE", nil},
		{"PUT", "PUT", nil},
	} {
		t.Run("foreign "+tc.name+" is refused", func(t *testing.T) {
			served = 0
			w := do(tc.method, "https://evil.example", "cross-site", tc.hdr)
			if w.Code != http.StatusForbidden || served != 0 {
				t.Fatalf("%s = %d (served %d), want 403 before the handler", tc.method, w.Code, served)
			}
			var env struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || env.Error.Code != "permission_denied" || !strings.Contains(env.Error.Message, "cors_origins") {
				t.Errorf("body = %s, want a permission_denied envelope naming cors_origins", w.Body)
			}
			if w.Header().Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("a refused origin got Access-Control-Allow-Origin")
			}
		})
	}

	t.Run("foreign GET is served, unreadable", func(t *testing.T) {
		served = 0
		w := do("GET", "https://evil.example", "cross-site", nil)
		if w.Code != http.StatusTeapot || served != 1 || w.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("GET = %d (served %d), Allow-Origin %q; want served without CORS headers", w.Code, served, w.Header().Get("Access-Control-Allow-Origin"))
		}
	})
	t.Run("same origin and no browser", func(t *testing.T) {
		for _, c := range []struct{ origin, site string }{
			{"https://warren.example.com", "same-origin"}, // behind a proxy that rewrites Host
			{"http://127.0.0.1:7070", ""},                 // an old browser
			{"", ""},                                      // curl, SDKs
		} {
			served = 0
			w := do("POST", c.origin, c.site, nil)
			if w.Code != http.StatusTeapot || served != 1 {
				t.Errorf("POST from %q (Sec-Fetch-Site %q) = %d, want served", c.origin, c.site, w.Code)
			}
			if w.Header().Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("POST from %q got CORS headers it does not need", c.origin)
			}
		}
	})
	t.Run("default allows no foreign origin", func(t *testing.T) {
		h := CORS(nil, next)
		r := httptest.NewRequest("POST", "http://127.0.0.1:7070/v1/sessions", nil)
		r.Header.Set("Origin", "https://console.example.com")
		r.Header.Set("Sec-Fetch-Site", "cross-site")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusForbidden {
			t.Errorf("POST from a foreign origin without a list = %d, want 403", w.Code)
		}
	})
}
