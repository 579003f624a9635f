// Package metrics exposes warren's Prometheus metrics. Everything lives on
// a registry the daemon creates and passes in, never on the global one, so
// tests can read it and two daemons in one process do not collide.
//
// Metrics implements session.Observer: the session manager, which every
// transport (REST, gRPC, MCP) calls, reports what it does, so a call is
// counted once whichever way it came in. The package never sees a session
// id; the only label whose values come from callers is tenant, and tenants
// are bounded by the API keys an administrator creates.
package metrics
