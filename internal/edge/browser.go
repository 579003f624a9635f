package edge

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/errdefs"
)

// The web console signs browsers in with a cookie. An API key is
// exchanged for it once (SignIn); after that the browser's requests carry
// the cookie, which Admit accepts on three conditions:
//
//   - the request comes from the daemon's own origin (CrossOrigin is
//     false). SameSite=Strict keeps the cookie from cross-site pages, but
//     a page of another port of the same host is the same site, and
//     browsers send it the cookie: the origin check refuses it;
//   - a request that may change something (any method but GET, HEAD and
//     OPTIONS) carries the session's CSRF token in CSRFHeader. A page of
//     another origin cannot read the token (the daemon's answers never
//     allow credentials across origins) nor send the header without a
//     preflight the daemon refuses;
//   - the browser session is alive: signed out, idle for BrowserIdle or
//     older than BrowserMaxAge, or behind a key revoked since, it is
//     refused.
//
// Nothing secret reaches a URL or the page's storage: the cookie is
// HttpOnly, and the CSRF token, readable by the page, is kept in its
// memory and asked for again (BrowserWhoAmI) after a reload.
const (
	// CookieName is the console's session cookie over plain HTTP.
	CookieName = "warren_console"
	// SecureCookieName is its name over TLS: the __Host- prefix makes
	// browsers refuse it unless it is Secure, host-only and for path /, so
	// a page of a sibling host (a preview host under the same domain) cannot
	// plant its own in the daemon's name (cookie tossing).
	SecureCookieName = "__Host-warren_console"
	// CSRFHeader carries the session's CSRF token on mutating calls.
	CSRFHeader = "X-CSRF-Token"
	// MethodCookie is the Identity.Method of a caller the cookie admitted.
	MethodCookie = "cookie"

	// BrowserIdle ends a browser session nobody used for this long.
	BrowserIdle = 30 * time.Minute
	// BrowserMaxAge ends a browser session this long after its sign-in,
	// used or not.
	BrowserMaxAge = 12 * time.Hour

	// maxBrowserSessions bounds the table: a sign-in past it first drops
	// the expired ones, then refuses.
	maxBrowserSessions = 10000
)

// browserSession is one signed-in browser.
type browserSession struct {
	id      *auth.Identity // the key's identity at sign-in (immutable)
	csrf    string         // (immutable)
	created time.Time      // (immutable)
	used    time.Time      // guarded by browserSessions.mu
}

// browserSessions are the signed-in browsers, by the SHA-256 of their
// cookie: the table holds no cookie a memory dump could replay.
type browserSessions struct {
	now func() time.Time

	mu sync.Mutex // guards m
	m  map[[sha256.Size]byte]*browserSession
}

func newBrowserSessions() *browserSessions {
	return &browserSessions{now: time.Now, m: map[[sha256.Size]byte]*browserSession{}}
}

func (s *browserSession) expired(now time.Time) bool {
	return now.Sub(s.used) >= BrowserIdle || now.Sub(s.created) >= BrowserMaxAge
}

// randomString is n random bytes in base64url.
func randomString(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Browser is what the console learns of its signed-in caller.
type Browser struct {
	Identity *auth.Identity
	// CSRF is the token the page sends in CSRFHeader; empty when
	// authentication is off (no cookie, nothing to forge).
	CSRF string
	// Auth is false when the daemon runs without authentication.
	Auth bool
}

// SignIn exchanges the API key r carries (Authorization: Bearer or
// X-API-Key, as for every call) for a browser session: it sets the
// session cookie on w and returns the CSRF token the page must send with
// every mutating call. Only an API key signs in (a token would make the
// session outlive it, a JWT has no key to revoke it with), and only from
// the daemon's own origin, so that a foreign page cannot sign a browser in
// as someone else (login CSRF). Without authentication there is nothing
// to sign in to: it sets no cookie and says so (Browser.Auth false).
func (e *Edge) SignIn(w http.ResponseWriter, r *http.Request) (*Browser, error) {
	if CrossOrigin(r) {
		return nil, errdefs.New(errdefs.ErrPermissionDenied, "sign-in is accepted from the daemon's own pages only")
	}
	if e.auth == nil {
		return &Browser{Identity: noAuthIdentity}, nil
	}
	if !hasCredentials(r) {
		return nil, unauthenticatedf("missing credentials: sign in with Authorization: Bearer <API key>")
	}
	id, err := e.auth.Authenticate(r.Context(), r)
	if err != nil {
		return nil, err
	}
	if id.Method != auth.MethodKey {
		return nil, unauthenticatedf("only an API key signs a browser in, not a %s", id.Method)
	}
	cookie := randomString(32)
	s := &browserSession{id: id, csrf: randomString(24), created: e.browsers.now()}
	s.used = s.created
	if err := e.browsers.add(sha256.Sum256([]byte(cookie)), s); err != nil {
		return nil, err
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName(r), Value: cookie, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	return &Browser{Identity: browserIdentity(id), CSRF: s.csrf, Auth: true}, nil
}

// SignOut ends the browser session r's cookie names, on the server (the
// cookie no longer works anywhere, copied or not), and clears the cookie.
// It is a mutating call: it needs the CSRF token, so that a foreign page
// cannot sign the browser out.
func (e *Edge) SignOut(w http.ResponseWriter, r *http.Request) error {
	if e.auth == nil {
		return nil
	}
	c, err := r.Cookie(cookieName(r))
	if err != nil {
		return unauthenticatedf("not signed in")
	}
	if _, err := e.browserIdentity(r, c.Value); err != nil {
		return err
	}
	e.browsers.remove(sha256.Sum256([]byte(c.Value)))
	http.SetCookie(w, &http.Cookie{Name: cookieName(r), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return nil
}

// WhoAmI returns the browser session of r's cookie, with its CSRF token,
// for a page that was reloaded and lost the token it kept in memory. A
// page of another origin gets nothing: the cookie is refused across
// origins, and its answer could not be read there anyway.
func (e *Edge) WhoAmI(r *http.Request) (*Browser, error) {
	if e.auth == nil {
		return &Browser{Identity: noAuthIdentity}, nil
	}
	c, err := r.Cookie(cookieName(r))
	if err != nil {
		return nil, unauthenticatedf("not signed in")
	}
	id, err := e.browserIdentity(r, c.Value)
	if err != nil {
		return nil, err
	}
	s := e.browsers.get(sha256.Sum256([]byte(c.Value)))
	if s == nil {
		return nil, unauthenticatedf("signed out")
	}
	return &Browser{Identity: id, CSRF: s.csrf, Auth: true}, nil
}

// RecordSignIn audits a sign-in attempt, as op: who signed in (b, nil
// for a refusal) and the outcome.
func (e *Edge) RecordSignIn(ctx context.Context, op string, b *Browser, err error, start time.Time) {
	if c := callOf(ctx); c != nil && b != nil {
		c.mu.Lock()
		c.who = b.Identity
		c.mu.Unlock()
	}
	e.Record(ctx, op, "", "", err, start)
}

// cookieName is the console cookie's name on r's connection.
func cookieName(r *http.Request) string {
	if r.TLS != nil {
		return SecureCookieName
	}
	return CookieName
}

// hasCookie reports whether r carries the console's cookie.
func hasCookie(r *http.Request) bool {
	_, err := r.Cookie(cookieName(r))
	return err == nil
}

// browserIdentity is who the cookie value signs in, if r may use it: see
// the conditions at the top of this file.
func (e *Edge) browserIdentity(r *http.Request, cookie string) (*auth.Identity, error) {
	if CrossOrigin(r) {
		return nil, unauthenticatedf("the console's cookie is accepted from the daemon's own pages only; " +
			"other pages send Authorization: Bearer <API key or token>")
	}
	h := sha256.Sum256([]byte(cookie))
	s := e.browsers.use(h)
	if s == nil {
		return nil, unauthenticatedf("the console's session ended (signed out, idle for %v or older than %v): sign in again", BrowserIdle, BrowserMaxAge)
	}
	if mutating(r.Method) && subtle.ConstantTimeCompare([]byte(r.Header.Get(CSRFHeader)), []byte(s.csrf)) != 1 {
		return nil, errdefs.New(errdefs.ErrPermissionDenied, "a call that changes something needs the console's CSRF token in %s", CSRFHeader)
	}
	// The key may have been revoked or may have expired since sign-in.
	// The authenticator checks that for a token issued for the key, so
	// the identity goes through one, short-lived and never sent anywhere.
	tok, _ := e.auth.IssueToken(s.id, time.Minute)
	probe, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "/", nil)
	probe.Header.Set("Authorization", "Bearer "+tok)
	id, err := e.auth.Authenticate(r.Context(), probe)
	if err != nil {
		if errdefs.Is(err, errdefs.ErrUnauthenticated) {
			e.browsers.remove(h)
		}
		return nil, err
	}
	return browserIdentity(id), nil
}

// browserIdentity is id as admitted through the cookie.
func browserIdentity(id *auth.Identity) *auth.Identity {
	c := *id
	c.Method = MethodCookie
	return &c
}

// mutating reports whether a request of this method may change something.
func mutating(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

func (b *browserSessions) add(h [sha256.Size]byte, s *browserSession) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.m) >= maxBrowserSessions {
		now := b.now()
		for k, v := range b.m {
			if v.expired(now) {
				delete(b.m, k)
			}
		}
		if len(b.m) >= maxBrowserSessions {
			return errdefs.New(errdefs.ErrResourceExhausted, "too many signed-in browsers (%d): sign some out", maxBrowserSessions)
		}
	}
	b.m[h] = s
	return nil
}

// use returns the live session h names and marks it used; nil if there is
// none, or it expired (then it is dropped).
func (b *browserSessions) use(h [sha256.Size]byte) *browserSession {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.m[h]
	if s == nil {
		return nil
	}
	now := b.now()
	if s.expired(now) {
		delete(b.m, h)
		return nil
	}
	s.used = now
	return s
}

func (b *browserSessions) get(h [sha256.Size]byte) *browserSession {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.m[h]
}

func (b *browserSessions) remove(h [sha256.Size]byte) {
	b.mu.Lock()
	delete(b.m, h)
	b.mu.Unlock()
}

func unauthenticatedf(format string, args ...any) error {
	return errdefs.New(errdefs.ErrUnauthenticated, format, args...)
}
