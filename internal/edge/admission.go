package edge

import (
	"context"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// Admit authenticates r and applies its caller's rate limit. The context
// it returns carries the caller (IdentityOf) and the request id
// (session.RequestID) for the calls that follow; on a refusal it still
// carries the request id, for the audit record. Its errors are classified:
// unauthenticated, permission_denied (the console's cookie without its
// CSRF token), or resource_exhausted with a retry delay. Every
// transport calls it before it decodes a call; on a refusal it calls
// Refuse, then answers in its own protocol.
func (e *Edge) Admit(r *http.Request) (context.Context, error) {
	ctx := r.Context()
	c := callOf(ctx)
	if c == nil {
		// Not seen by Observe (a transport served on its own, in a
		// test): the manager's log lines still get an id.
		c = &call{id: requestID(r)}
		ctx = context.WithValue(ctx, callKey{}, c)
		if session.RequestID(ctx) == "" {
			ctx = session.WithRequestID(ctx, c.id)
		}
	}
	who := noAuthIdentity
	if fwd := forwardedIdentity(ctx); fwd != nil {
		// Forward verified the fleet node's signature and the node
		// applied the caller's rate limit (forward.go).
		c.mu.Lock()
		c.who, c.admitted = fwd, true
		c.mu.Unlock()
		return ctx, nil
	}
	if e.auth != nil {
		authenticate := e.auth.Authenticate
		if !hasCredentials(r) && hasCookie(r) {
			// The console's cookie, for a browser without other
			// credentials (browser.go).
			authenticate = func(context.Context, *http.Request) (*auth.Identity, error) {
				c, _ := r.Cookie(cookieName(r))
				return e.browserIdentity(r, c.Value)
			}
		}
		id, err := authenticate(r.Context(), r)
		if err != nil {
			c.mu.Lock()
			c.who, c.admitted = &auth.Identity{}, false
			c.mu.Unlock()
			return ctx, err
		}
		who = id
	}
	c.mu.Lock()
	c.who, c.admitted = who, true
	c.mu.Unlock()
	if err := e.limits.allow(who); err != nil {
		c.mu.Lock()
		c.admitted = false
		c.mu.Unlock()
		return ctx, err
	}
	return ctx, nil
}

// Refuse does what every transport does with a call Admit refused, before
// the transport answers in its own protocol (REST and MCP with
// WriteError, gRPC with its status): an unauthenticated caller is told how
// to authenticate (WWW-Authenticate), and an unauthenticated attempt at a
// call that would change something (mutating) is audited as op, with the
// target it names. Rate-limited refusals are not audited: a client that
// hammers the daemon must not fill the audit log.
func (e *Edge) Refuse(ctx context.Context, w http.ResponseWriter, r *http.Request, err error, op, target string, mutating bool, start time.Time) {
	if errdefs.Is(err, errdefs.ErrPermissionDenied) && mutating {
		// A browser's call with the console's cookie but without its
		// CSRF token: a forgery attempt, or a broken page.
		e.Record(ctx, op, "", target, err, start)
		return
	}
	if !errdefs.Is(err, errdefs.ErrUnauthenticated) {
		return
	}
	w.Header().Set("WWW-Authenticate", Challenge(r, err))
	if mutating {
		e.Record(ctx, op, "", target, err, start)
	}
}

// Challenge is the WWW-Authenticate value of a refusal (RFC 6750 §3): a
// request without credentials gets the bare scheme and realm; one with a
// credential that failed gets error="invalid_token" and warren's message
// as the error_description. MCP hosts (MCP Inspector, mcp-remote) show
// that description, where without it they start an OAuth flow warren does
// not serve and report its failure instead (docs/SECURITY.md).
func Challenge(r *http.Request, err error) string {
	if !hasCredentials(r) {
		return `Bearer realm="warren"`
	}
	return `Bearer realm="warren", error="invalid_token", error_description="` + quotable(err.Error()) + `"`
}

// hasCredentials reports whether r presents any credential Authenticate
// looks at.
func hasCredentials(r *http.Request) bool {
	return r.Header.Get("Authorization") != "" || r.Header.Get("X-API-Key") != "" || r.URL.Query().Has("token")
}

// quotable makes s fit RFC 6750's error_description: printable ASCII
// without '"' and '\'.
func quotable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '"':
			return '\''
		case r == '\\':
			return '/'
		case r < 0x20 || r > 0x7e:
			return '?'
		}
		return r
	}, s)
}

// limiters are the per-caller token buckets: one per API key (tokens share
// their key's), one per JWT subject.
type limiters struct {
	limit rate.Limit
	burst int

	mu sync.Mutex // guards m and shares
	m  map[string]*limiterEntry
	// shares, in a fleet, are the parts of each caller's limit this node
	// may use (SetRateShares); a caller without one has it all.
	shares map[string]float64
}

type limiterEntry struct {
	l    *rate.Limiter
	used time.Time
	// asked counts the caller's requests since RateCounts last read them
	// (refused ones too: the share follows demand).
	asked int64
}

// maxLimiters bounds the table: past it, buckets idle for a minute (full
// again by then at any sane rate) are dropped.
const maxLimiters = 10000

func newLimiters(perSecond float64, burst int) *limiters {
	return &limiters{limit: rate.Limit(perSecond), burst: burst, m: map[string]*limiterEntry{}}
}

func (l *limiters) allow(id *auth.Identity) error {
	if l == nil || l.limit <= 0 {
		return nil
	}
	k := id.KeyID
	if k == "" {
		k = "sub:" + id.Tenant + "/" + id.Subject
	}
	now := time.Now()
	l.mu.Lock()
	e := l.m[k]
	if e == nil {
		if len(l.m) >= maxLimiters {
			for k, e := range l.m {
				if now.Sub(e.used) > time.Minute {
					delete(l.m, k)
				}
			}
		}
		e = &limiterEntry{l: rate.NewLimiter(l.limit, l.burst)}
		if sh, ok := l.shares[k]; ok {
			l.applyShare(e, sh, now)
		}
		l.m[k] = e
	}
	e.used = now
	e.asked++
	res := e.l.ReserveN(now, 1)
	delay := res.DelayFrom(now)
	if delay > 0 {
		res.CancelAt(now) // a refused request takes no token
	}
	l.mu.Unlock()
	if delay > 0 {
		return errdefs.WithRetryAfter(errdefs.ErrResourceExhausted, delay,
			"rate limit: this key may make %g requests per second (bursts of %d); retry in %v", float64(l.limit), l.burst, delay.Round(time.Millisecond))
	}
	return nil
}

// applyShare sets e's bucket to share of the caller's limit and burst (a
// burst of one at least, so that a caller is never shut out here).
//
// Preconditions: l.mu is held.
func (l *limiters) applyShare(e *limiterEntry, share float64, now time.Time) {
	e.l.SetLimitAt(now, l.limit*rate.Limit(share))
	e.l.SetBurstAt(now, max(1, int(math.Round(float64(l.burst)*share))))
}

// RateCounts returns how many requests each caller made here since the
// last call (callers that made none are left out), for a fleet to share
// the callers' limits between its nodes (docs/FLEET.md, "Tenants, keys,
// quotas, rate limits"). nil without a rate limit.
func (e *Edge) RateCounts() map[string]int64 {
	l := e.limits
	if l == nil || l.limit <= 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int64{}
	for k, en := range l.m {
		if en.asked > 0 {
			out[k] = en.asked
			en.asked = 0
		}
	}
	return out
}

// SetRateShares gives each caller named in shares that part (0 to 1] of its
// limit on this node; the others get all of it.
func (e *Edge) SetRateShares(shares map[string]float64) {
	l := e.limits
	if l == nil || l.limit <= 0 {
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.shares = shares
	for k, en := range l.m {
		sh, ok := shares[k]
		if !ok {
			sh = 1
		}
		l.applyShare(en, sh, now)
	}
}
