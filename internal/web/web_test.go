package web

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/metrics"
)

// TestVendored: the vendored files are what make web copies from
// web/package-lock.json's packages: each file's checksum matches
// vendor/SOURCES, SOURCES names the lockfile's versions, and, where
// web/node_modules is installed, the files are byte for byte the
// packages'. Change the lockfile without running make web and this fails.
func TestVendored(t *testing.T) {
	lock, err := os.ReadFile("../../web/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	if err := json.Unmarshal(lock, &l); err != nil {
		t.Fatal(err)
	}
	src, err := fs.ReadFile(Static(), "vendor/SOURCES")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{"SOURCES": true}
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			t.Fatalf("vendor/SOURCES line %q: want file package@version path sha256", sc.Text())
		}
		file, pkgver, path, sum := f[0], f[1], f[2], f[3]
		listed[file] = true
		at := strings.LastIndex(pkgver, "@")
		pkg, ver := pkgver[:at], pkgver[at+1:]
		if got := l.Packages["node_modules/"+pkg].Version; got != ver {
			t.Errorf("vendor/%s comes from %s %s, the lockfile has %q: run make web", file, pkg, ver, got)
		}
		b, err := fs.ReadFile(Static(), "vendor/"+file)
		if err != nil {
			t.Errorf("vendor/%s: %v", file, err)
			continue
		}
		if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum {
			t.Errorf("vendor/%s does not match its checksum in vendor/SOURCES: run make web", file)
		}
		installed, err := os.ReadFile(filepath.Join("../../web/node_modules", pkg, path))
		if err == nil && !bytes.Equal(installed, b) {
			t.Errorf("vendor/%s differs from web/node_modules/%s/%s: run make web", file, pkg, path)
		}
	}
	entries, err := fs.ReadDir(Static(), "vendor")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !listed[e.Name()] {
			t.Errorf("vendor/%s is not in vendor/SOURCES: make web did not put it there", e.Name())
		}
	}
}

// TestNoInlineCode: the page has no inline script, style element, style
// attribute or event handler attribute, which the CSP would refuse, and
// the modules never build markup from strings.
func TestNoInlineCode(t *testing.T) {
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|<style|\sstyle=|\son[a-z]+=`)
	markup := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write`)
	err := fs.WalkDir(Static(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(p, "vendor/") {
			return err
		}
		b, err := fs.ReadFile(Static(), p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".html") && inline.Match(b) {
			t.Errorf("%s has inline code or style: %q", p, inline.Find(b))
		}
		if strings.HasSuffix(p, ".js") && markup.Match(b) {
			t.Errorf("%s builds markup from a string (%s): use DOM calls", p, markup.Find(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// console is a Console with authentication, its mux, an admin key and a
// key of tenant acme.
func console(t *testing.T) (http.Handler, string, string) {
	t.Helper()
	a, err := auth.New(auth.Config{Keys: newMemKeys()})
	if err != nil {
		t.Fatal(err)
	}
	admin, _, err := a.CreateKey(context.Background(), "default", "admin", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	user, _, err := a.CreateKey(context.Background(), "acme", "user", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(prometheus.NewRegistry())
	hist := metrics.NewHistory(m, time.Hour)
	t.Cleanup(hist.Stop)
	hist.Sample(time.Now().Add(time.Second))
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		edge.WriteJSON(w, http.StatusOK, map[string]string{"name": "warren"})
	})
	e := edge.New(edge.Config{Auth: a})
	mux := http.NewServeMux()
	New(Config{Edge: e, History: hist, API: api}).Mount(mux)
	return e.Observe(mux), admin, user
}

func do(h http.Handler, method, url string, hdr map[string]string, cookies ...*http.Cookie) *http.Response {
	r := httptest.NewRequest(method, url, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	for _, c := range cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

// TestHeaders: the page and its files carry the strict CSP and forbid
// framing; a client asking GET / for JSON gets the API's index; the file
// directory has no listing.
func TestHeaders(t *testing.T) {
	h, _, _ := console(t)
	for _, p := range []string{"/", "/console/app.js", "/console/style.css", "/console/vendor/xterm.mjs"} {
		res := do(h, "GET", "http://warren.test"+p, nil)
		csp := res.Header.Get("Content-Security-Policy")
		if res.StatusCode != 200 || !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "style-src 'self';") ||
			!strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "connect-src 'self' ws://warren.test") ||
			strings.Contains(csp, "unsafe") || res.Header.Get("X-Frame-Options") != "DENY" || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d, CSP %q, X-Frame-Options %q", p, res.StatusCode, csp, res.Header.Get("X-Frame-Options"))
		}
	}
	if ct := do(h, "GET", "http://warren.test/console/app.js", nil).Header.Get("Content-Type"); !strings.Contains(ct, "javascript") {
		t.Errorf("app.js is served as %q, want JavaScript (modules need it)", ct)
	}
	res := do(h, "GET", "http://warren.test/", map[string]string{"Accept": "application/json"})
	if ct := res.Header.Get("Content-Type"); ct != "application/json" || res.Header.Get("Content-Security-Policy") != "" {
		t.Errorf("GET / for JSON: Content-Type %q, CSP %q; want the API's JSON index", ct, res.Header.Get("Content-Security-Policy"))
	}
	if res := do(h, "GET", "http://warren.test/console/", nil); res.StatusCode != 404 {
		t.Errorf("GET /console/ = %d, want 404 (no listing)", res.StatusCode)
	}
	if res := do(h, "GET", "http://warren.test/console/nope.js", nil); res.StatusCode != 404 {
		t.Errorf("GET /console/nope.js = %d, want 404", res.StatusCode)
	}
}

// TestSignInFlow: through the console's calls: sign in, who am I (with
// the CSRF token), the history for admins only, sign out.
func TestSignInFlow(t *testing.T) {
	h, admin, user := console(t)
	same := map[string]string{"Sec-Fetch-Site": "same-origin"}
	res := do(h, "POST", "http://warren.test/console/api/signin", map[string]string{"Authorization": "Bearer " + user, "Sec-Fetch-Site": "same-origin"})
	if res.StatusCode != 200 || len(res.Cookies()) != 1 || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("sign-in: %d, cookies %v, Cache-Control %q", res.StatusCode, res.Cookies(), res.Header.Get("Cache-Control"))
	}
	c := res.Cookies()[0]
	var me whoami
	json.NewDecoder(res.Body).Decode(&me)
	if me.Tenant != "acme" || me.Admin || me.CSRF == "" || !me.Auth {
		t.Errorf("sign-in answered %+v", me)
	}
	res = do(h, "GET", "http://warren.test/console/api/whoami", same, c)
	var again whoami
	json.NewDecoder(res.Body).Decode(&again)
	if again != me {
		t.Errorf("whoami = %+v, want %+v", again, me)
	}
	if res := do(h, "GET", "http://warren.test/console/api/history", same, c); res.StatusCode != http.StatusForbidden {
		t.Errorf("history for a non-admin = %d, want 403", res.StatusCode)
	}
	res = do(h, "POST", "http://warren.test/console/api/signin", map[string]string{"Authorization": "Bearer " + admin})
	var pts historyAnswer
	if res := do(h, "GET", "http://warren.test/console/api/history", nil, res.Cookies()[0]); res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&pts) != nil || len(pts.Points) != 1 {
		t.Errorf("history for an admin = %d, %d points; want 200 and 1", res.StatusCode, len(pts.Points))
	}
	if res := do(h, "POST", "http://warren.test/console/api/signout", same, c); res.StatusCode != http.StatusForbidden {
		t.Errorf("sign-out without the CSRF token = %d, want 403", res.StatusCode)
	}
	if res := do(h, "POST", "http://warren.test/console/api/signout", map[string]string{edge.CSRFHeader: me.CSRF}, c); res.StatusCode != http.StatusNoContent {
		t.Errorf("sign-out = %d, want 204", res.StatusCode)
	}
	if res := do(h, "GET", "http://warren.test/console/api/whoami", same, c); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("whoami after sign-out = %d, want 401", res.StatusCode)
	}
	res = do(h, "POST", "http://warren.test/console/api/signin", map[string]string{"Authorization": "Bearer " + user, "Sec-Fetch-Site": "cross-site"})
	var env struct{ Error struct{ Code string } }
	json.NewDecoder(res.Body).Decode(&env)
	if res.StatusCode != http.StatusForbidden || env.Error.Code != errdefs.ErrPermissionDenied.String() || len(res.Cookies()) != 0 {
		t.Errorf("sign-in from another site = %d %q, cookies %v; want 403 permission_denied, no cookie", res.StatusCode, env.Error.Code, res.Cookies())
	}
}

// TestNoAuth: without authentication the page opens as the admin of the
// default tenant, with no cookie and no CSRF token to ask for.
func TestNoAuth(t *testing.T) {
	mux := http.NewServeMux()
	e := edge.New(edge.Config{})
	New(Config{Edge: e}).Mount(mux)
	h := e.Observe(mux)
	for _, p := range []string{"whoami", "signin"} {
		method := "GET"
		if p == "signin" {
			method = "POST"
		}
		res := do(h, method, "http://warren.test/console/api/"+p, nil)
		var me whoami
		json.NewDecoder(res.Body).Decode(&me)
		if res.StatusCode != 200 || me.Auth || !me.Admin || me.Tenant != edge.DefaultTenant || me.CSRF != "" || len(res.Cookies()) != 0 {
			t.Errorf("%s without auth = %d %+v, cookies %v; want the default tenant's admin, no cookie", p, res.StatusCode, me, res.Cookies())
		}
	}
}
