package edge

import (
	"context"
	"sync"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/errdefs"
)

// DefaultTenant is the tenant of every caller when authentication is off.
const DefaultTenant = "default"

// noAuthIdentity is every caller when authentication is off.
var noAuthIdentity = &auth.Identity{Tenant: DefaultTenant, Admin: true, Method: "none"}

// call is what the edge learns about one request as it is served: for the
// access line, the audit record and the handlers that ask who the caller
// is. Observe makes it (or Admit, for a request Observe did not see).
type call struct {
	id string // the request id (immutable)

	mu       sync.Mutex     // guards the fields below: inner layers set them
	route    string         // the REST route's pattern, "" for other transports
	who      *auth.Identity // the caller, once Admit ran; empty if refused
	admitted bool           // Admit let the caller in
	code     string         // the class of the error envelope written, if one was
	session  string         // the session acted on, when the path does not name it
}

type callKey struct{}

func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

func (c *call) snapshot() (route string, who *auth.Identity, sess, code string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.route, c.who, c.session, c.code
}

// IdentityOf is the caller Admit let in with ctx; nil for a context Admit
// did not make, or whose caller it refused.
func IdentityOf(ctx context.Context) *auth.Identity {
	c := callOf(ctx)
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.admitted {
		return nil
	}
	return c.who
}

// TenantOf is the tenant the caller of ctx acts for. It panics for a
// context Admit did not admit: every handler that acts for a tenant sits
// behind Admit, and a call without a caller is a wiring bug, never a reason
// to act for "every tenant" ("").
func TenantOf(ctx context.Context) string {
	id := IdentityOf(ctx)
	if id == nil {
		panic("edge: a call reached a handler without passing Admit")
	}
	return id.Tenant
}

// RequireAdmin refuses a call that only administrators may make; what
// names it in the error ("reading the metrics").
func RequireAdmin(ctx context.Context, what string) error {
	if id := IdentityOf(ctx); id != nil && id.Admin {
		return nil
	}
	return errdefs.New(errdefs.ErrPermissionDenied, "%s needs an admin key", what)
}

// SetRoute names the REST route a request matched, for its access line.
func SetRoute(ctx context.Context, pattern string) {
	if c := callOf(ctx); c != nil {
		c.mu.Lock()
		c.route = pattern
		c.mu.Unlock()
	}
}

// SetSession names the session a request acts on when its path does not
// (a create, a gRPC or MCP call), for the access line and the audit
// record. The first one set stays.
func SetSession(ctx context.Context, id string) {
	if c := callOf(ctx); c != nil && id != "" {
		c.mu.Lock()
		if c.session == "" {
			c.session = id
		}
		c.mu.Unlock()
	}
}
