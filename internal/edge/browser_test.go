package edge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/audit"
	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/errdefs"
)

// memKeys is an auth.KeyStore in memory.
type memKeys struct {
	mu   sync.Mutex
	keys map[string]*auth.Key
	hash map[string][]byte
}

func (m *memKeys) CreateKey(_ context.Context, k *auth.Key, hash []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := *k
	m.keys[k.ID], m.hash[k.ID] = &c, hash
	return nil
}

func (m *memKeys) GetKey(_ context.Context, id string) (*auth.Key, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.keys[id]
	if k == nil {
		return nil, nil, errdefs.New(errdefs.ErrNotFound, "no key %s", id)
	}
	c := *k
	return &c, m.hash[id], nil
}

func (m *memKeys) ListKeys(context.Context, string) ([]*auth.Key, error) { return nil, nil }

func (m *memKeys) RevokeKey(_ context.Context, id string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k := m.keys[id]; k != nil && k.RevokedAt == nil {
		k.RevokedAt = &at
	}
	return nil
}

func (m *memKeys) CountKeys(context.Context) (int, error) { return len(m.keys), nil }

// browserEdge is an Edge with authentication and one key of tenant acme.
func browserEdge(t *testing.T) (*Edge, *auth.Authenticator, string, *auth.Key) {
	t.Helper()
	a, err := auth.New(auth.Config{Keys: &memKeys{keys: map[string]*auth.Key{}, hash: map[string][]byte{}}})
	if err != nil {
		t.Fatal(err)
	}
	secret, k, err := a.CreateKey(context.Background(), "acme", "browser", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{Auth: a}), a, secret, k
}

// wrongKey is key with the last character of its secret changed.
func wrongKey(key string) string {
	c := byte('a')
	if key[len(key)-1] == c {
		c = 'b'
	}
	return key[:len(key)-1] + string(c)
}

// signIn signs a browser in and returns its cookie and CSRF token.
func signIn(t *testing.T, e *Edge, key string) (*http.Cookie, string) {
	t.Helper()
	r := httptest.NewRequest("POST", "http://warren.test/console/api/signin", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	w := httptest.NewRecorder()
	b, err := e.SignIn(w, r)
	if err != nil {
		t.Fatalf("SignIn() = %v", err)
	}
	cs := w.Result().Cookies()
	if len(cs) != 1 {
		t.Fatalf("SignIn set %d cookies, want 1", len(cs))
	}
	return cs[0], b.CSRF
}

// TestSignInCookie: the cookie is HttpOnly, SameSite=Strict, on the whole
// daemon, Secure only over TLS, and carries no identity in its value.
func TestSignInCookie(t *testing.T) {
	e, _, key, k := browserEdge(t)
	c, csrf := signIn(t, e, key)
	if c.Name != CookieName || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
		t.Errorf("cookie = %+v, want %s HttpOnly SameSite=Strict Path=/ and not Secure over plain HTTP", c, CookieName)
	}
	if len(c.Value) < 40 || len(csrf) < 30 {
		t.Errorf("cookie value %q, CSRF %q: too short to be random", c.Value, csrf)
	}
	r := httptest.NewRequest("POST", "https://warren.test/console/api/signin", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	w := httptest.NewRecorder()
	if _, err := e.SignIn(w, r); err != nil {
		t.Fatal(err)
	}
	if cs := w.Result().Cookies(); len(cs) != 1 || !cs[0].Secure || cs[0].Name != SecureCookieName {
		t.Errorf("over TLS the cookie is %+v, want Secure and named %s", cs, SecureCookieName)
	}
	// Admitted through the cookie: the key's tenant and role.
	r = httptest.NewRequest("GET", "http://warren.test/v1/sessions", nil)
	r.AddCookie(c)
	ctx, err := e.Admit(r)
	if err != nil {
		t.Fatalf("Admit(cookie) = %v", err)
	}
	if id := IdentityOf(ctx); id.Tenant != "acme" || id.KeyID != k.ID || id.Admin || id.Method != MethodCookie {
		t.Errorf("IdentityOf = %+v, want tenant acme, key %s, not admin, method cookie", id, k.ID)
	}
}

// TestSignInRefusals: a bad key, a token, no key, and a page of another
// origin do not sign in.
func TestSignInRefusals(t *testing.T) {
	e, a, key, k := browserEdge(t)
	tok, _ := a.IssueToken(&auth.Identity{Tenant: "acme", KeyID: k.ID}, time.Minute)
	tests := []struct {
		name  string
		setup func(r *http.Request)
		want  *errdefs.Class
	}{
		{"no key", func(*http.Request) {}, errdefs.ErrUnauthenticated},
		{"bad key", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+wrongKey(key)) }, errdefs.ErrUnauthenticated},
		{"token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }, errdefs.ErrUnauthenticated},
		{"another origin", func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+key)
			r.Header.Set("Sec-Fetch-Site", "same-site")
		}, errdefs.ErrPermissionDenied},
		{"another origin without Sec-Fetch-Site", func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+key)
			r.Header.Set("Origin", "http://127.0.0.1:9999")
		}, errdefs.ErrPermissionDenied},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://warren.test/console/api/signin", nil)
			tc.setup(r)
			w := httptest.NewRecorder()
			_, err := e.SignIn(w, r)
			if !errdefs.Is(err, tc.want) {
				t.Errorf("SignIn() = %v, want %v", err, tc.want)
			}
			if len(w.Result().Cookies()) != 0 {
				t.Errorf("a refused sign-in set a cookie")
			}
		})
	}
}

// TestCookieAdmission: what Admit makes of the cookie: reads need only the
// cookie from the daemon's own origin; calls that change something need
// the CSRF token; other origins, other tokens and unknown cookies are
// refused; other credentials take precedence over the cookie.
func TestCookieAdmission(t *testing.T) {
	e, _, key, _ := browserEdge(t)
	c, csrf := signIn(t, e, key)
	tests := []struct {
		name   string
		method string
		setup  func(r *http.Request)
		want   *errdefs.Class // nil: admitted
	}{
		{"read", "GET", func(*http.Request) {}, nil},
		{"read same-origin", "GET", func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "same-origin") }, nil},
		{"write with token", "POST", func(r *http.Request) { r.Header.Set(CSRFHeader, csrf) }, nil},
		{"delete with token", "DELETE", func(r *http.Request) { r.Header.Set(CSRFHeader, csrf) }, nil},
		{"write without token", "POST", func(*http.Request) {}, errdefs.ErrPermissionDenied},
		{"write with wrong token", "PUT", func(r *http.Request) { r.Header.Set(CSRFHeader, csrf+"x") }, errdefs.ErrPermissionDenied},
		{"read from a same-site page", "GET", func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "same-site") }, errdefs.ErrUnauthenticated},
		{"write from a cross-site page", "POST", func(r *http.Request) {
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			r.Header.Set(CSRFHeader, csrf)
		}, errdefs.ErrUnauthenticated},
		{"WebSocket from another origin", "GET", func(r *http.Request) { r.Header.Set("Origin", "http://127.0.0.1:1") }, errdefs.ErrUnauthenticated},
		{"unknown cookie", "GET", func(r *http.Request) {
			r.Header.Del("Cookie")
			r.AddCookie(&http.Cookie{Name: CookieName, Value: "forged"})
		}, errdefs.ErrUnauthenticated},
		{"a bad key beside the cookie", "GET", func(r *http.Request) { r.Header.Set("Authorization", "Bearer wrn_bad") }, errdefs.ErrUnauthenticated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "http://warren.test/v1/sessions", nil)
			r.AddCookie(c)
			tc.setup(r)
			_, err := e.Admit(r)
			switch {
			case tc.want == nil && err != nil:
				t.Errorf("Admit() = %v, want admitted", err)
			case tc.want != nil && !errdefs.Is(err, tc.want):
				t.Errorf("Admit() = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestSignOut: signing out needs the CSRF token, ends the session on the
// server (a copy of the cookie stops working) and clears the cookie.
func TestSignOut(t *testing.T) {
	e, _, key, _ := browserEdge(t)
	c, csrf := signIn(t, e, key)
	r := httptest.NewRequest("POST", "http://warren.test/console/api/signout", nil)
	r.AddCookie(c)
	if err := e.SignOut(httptest.NewRecorder(), r); !errdefs.Is(err, errdefs.ErrPermissionDenied) {
		t.Fatalf("SignOut() without the CSRF token = %v, want permission_denied", err)
	}
	r.Header.Set(CSRFHeader, csrf)
	w := httptest.NewRecorder()
	if err := e.SignOut(w, r); err != nil {
		t.Fatalf("SignOut() = %v", err)
	}
	if cs := w.Result().Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 {
		t.Errorf("SignOut set %+v, want the cookie cleared", cs)
	}
	r = httptest.NewRequest("GET", "http://warren.test/v1/sessions", nil)
	r.AddCookie(c)
	if _, err := e.Admit(r); !errdefs.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("Admit() after sign-out = %v, want unauthenticated", err)
	}
	if _, err := e.WhoAmI(r); !errdefs.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("WhoAmI() after sign-out = %v, want unauthenticated", err)
	}
}

// TestCookieDiesWithKey: revoking the key ends its browser sessions.
func TestCookieDiesWithKey(t *testing.T) {
	e, a, key, k := browserEdge(t)
	c, _ := signIn(t, e, key)
	if err := a.RevokeKey(context.Background(), "acme", k.ID); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "http://warren.test/v1/sessions", nil)
	r.AddCookie(c)
	if _, err := e.Admit(r); !errdefs.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("Admit() with the cookie of a revoked key = %v, want unauthenticated", err)
	}
}

// TestCookieExpiry: a session idle for BrowserIdle, or older than
// BrowserMaxAge however used, is refused.
func TestCookieExpiry(t *testing.T) {
	e, _, key, _ := browserEdge(t)
	now := time.Now()
	e.browsers.now = func() time.Time { return now }
	c, _ := signIn(t, e, key)
	admit := func() error {
		r := httptest.NewRequest("GET", "http://warren.test/v1/sessions", nil)
		r.AddCookie(c)
		_, err := e.Admit(r)
		return err
	}
	// Used every 20 minutes, it lives until BrowserMaxAge.
	for now.Add(BrowserIdle).Before(time.Now().Add(BrowserMaxAge)) {
		if err := admit(); err != nil {
			t.Fatalf("Admit() at %v = %v", now, err)
		}
		now = now.Add(20 * time.Minute)
	}
	now = time.Now().Add(BrowserMaxAge)
	if err := admit(); !errdefs.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("Admit() after BrowserMaxAge = %v, want unauthenticated", err)
	}
	c, _ = signIn(t, e, key)
	now = now.Add(BrowserIdle)
	if err := admit(); !errdefs.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("Admit() after BrowserIdle = %v, want unauthenticated", err)
	}
}

// TestWhoAmI: a reloaded page gets its identity and CSRF token back from
// its cookie, and a page of another origin gets nothing.
func TestWhoAmI(t *testing.T) {
	e, _, key, _ := browserEdge(t)
	c, csrf := signIn(t, e, key)
	r := httptest.NewRequest("GET", "http://warren.test/console/api/whoami", nil)
	r.AddCookie(c)
	b, err := e.WhoAmI(r)
	if err != nil || b.CSRF != csrf || b.Identity.Tenant != "acme" || !b.Auth {
		t.Errorf("WhoAmI() = %+v, %v; want tenant acme and the sign-in's CSRF token", b, err)
	}
	r.Header.Set("Sec-Fetch-Site", "same-site")
	if _, err := e.WhoAmI(r); !errdefs.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("WhoAmI() from another origin = %v, want unauthenticated", err)
	}
}

// TestBrowserAudit: a sign-in is audited with the key that signed in, a
// refused one as unauthenticated, and a mutating call with the cookie but
// without the CSRF token as permission_denied.
func TestBrowserAudit(t *testing.T) {
	l, err := audit.Open(filepath.Join(t.TempDir(), "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := auth.New(auth.Config{Keys: &memKeys{keys: map[string]*auth.Key{}, hash: map[string][]byte{}}})
	if err != nil {
		t.Fatal(err)
	}
	key, k, err := a.CreateKey(context.Background(), "acme", "browser", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := New(Config{Auth: a, Audit: l, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var cookie *http.Cookie
	signin := func(cred string) {
		e.Observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := e.SignIn(w, r)
			e.RecordSignIn(r.Context(), "POST /console/api/signin", b, err, time.Now())
		})).ServeHTTP(httptest.NewRecorder(), func() *http.Request {
			r := httptest.NewRequest("POST", "http://warren.test/console/api/signin", nil)
			r.Header.Set("Authorization", "Bearer "+cred)
			return r
		}())
	}
	signin(wrongKey(key))
	cookie, _ = signIn(t, e, key)
	e.Observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, err := e.Admit(r)
		if err == nil {
			t.Error("Admit() admitted a POST without the CSRF token")
			return
		}
		e.Refuse(ctx, w, r, err, "POST /v1/sessions", "", true, start)
	})).ServeHTTP(httptest.NewRecorder(), func() *http.Request {
		r := httptest.NewRequest("POST", "http://warren.test/v1/sessions", nil)
		r.AddCookie(cookie)
		return r
	}())
	signin(key)
	recs, err := l.Query(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%s %s %s %s", r.Op, r.Tenant, r.KeyID, r.Outcome))
	}
	want := []string{
		"POST /console/api/signin   unauthenticated",
		"POST /v1/sessions   permission_denied",
		"POST /console/api/signin acme " + k.ID + " ok",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("records:\n got %q\nwant %q", got, want)
	}
}
