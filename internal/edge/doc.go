// Package edge is what every transport of the daemon (REST, gRPC/Connect,
// MCP) does before and after it decodes a call: it gives each request an id
// and an access-log line, admits the caller (authentication and the
// per-caller rate limit), carries who the caller is in the request's
// context, writes the audit record of every call that changes something
// (refused attempts included), and maps error classes to HTTP statuses and
// the error envelope of DESIGN.md in one place.
//
// A transport mounts itself on the daemon's mux with the Edge it is given
// and asks the Edge, never another transport, who the caller is. The
// package must import no transport (httpapi, grpcapi, mcpapi) and hold no
// session logic: audit records carry the error's class (errdefs), which
// every transport shares, and an HTTP status only where REST answered one.
package edge
