// Package e2b is warren's E2B-compatible facade: E2B's control-plane REST
// API (create, connect, list, kill, timeouts, pause and resume, snapshots,
// forks, metrics, templates) and a router that sends E2B's in-sandbox
// ("envd") traffic to internal/e2b/envd, all mounted at /e2b on the
// daemon's port. Code written for E2B's SDKs runs on warren by pointing
// E2B_API_URL and E2B_SANDBOX_URL at http://<daemon>/e2b (docs/E2B.md).
//
// An E2B sandbox is a warren session of the caller's tenant, with the same
// id: E2B metadata are the session's labels, and what E2B keeps besides
// (template, end of life, timeout action, paused state) are labels under
// warren.dev/, so warren's own API sees the same sessions. Callers pass the
// edge like on every transport: an E2B-format API key is another spelling
// of a warren key (keys.go), envd traffic carries the sandbox's access
// token or a signature made with it (envdroute.go), and every call is
// admitted, rate limited and audited by internal/edge.
package e2b
