package edge

import (
	"log/slog"

	"github.com/warrenhq/warren/internal/audit"
	"github.com/warrenhq/warren/internal/auth"
)

// Config configures an Edge.
type Config struct {
	// Auth authenticates callers; nil admits everyone as the admin of
	// DefaultTenant (the daemon allows that on loopback only).
	Auth *auth.Authenticator
	// Audit, if set, records every call that changes something.
	Audit *audit.Log
	// RateLimit is each caller's requests per second, in bursts of
	// RateBurst; 0 for no limit.
	RateLimit float64
	RateBurst int
	// Log receives the access log and internal errors; nil is
	// slog.Default().
	Log *slog.Logger
}

// Edge is the part of the daemon every transport passes through. It is
// safe for concurrent use.
type Edge struct {
	auth   *auth.Authenticator // (immutable)
	audit  *audit.Log          // (immutable)
	log    *slog.Logger        // (immutable)
	limits *limiters

	browsers *browserSessions // the console's signed-in browsers (browser.go)
	hops     *hopNonces       // fleet hops served, against replays (forward.go)
}

// New returns an Edge.
func New(cfg Config) *Edge {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Edge{auth: cfg.Auth, audit: cfg.Audit, log: cfg.Log, limits: newLimiters(cfg.RateLimit, cfg.RateBurst),
		browsers: newBrowserSessions(), hops: newHopNonces()}
}

// Authenticator is the authenticator callers are admitted with; nil when
// authentication is off.
func (e *Edge) Authenticator() *auth.Authenticator { return e.auth }

// AuditLog is the audit log; nil when the daemon keeps none.
func (e *Edge) AuditLog() *audit.Log { return e.audit }

// Log is the logger of the access log and of internal errors.
func (e *Edge) Log() *slog.Logger { return e.log }
