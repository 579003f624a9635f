package daemon

import (
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/e2b"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/grpcapi"
	"github.com/warrenhq/warren/internal/httpapi"
	"github.com/warrenhq/warren/internal/mcpapi"
	"github.com/warrenhq/warren/internal/metrics"
	"github.com/warrenhq/warren/internal/web"
)

// mountTransports builds everything the daemon serves on its one port,
// each transport mounted on one mux behind the one edge: REST at the root,
// gRPC/gRPC-Web/Connect (warren.v1, reflection, grpc.health.v1) and MCP
// (Streamable HTTP at /mcp) on their own paths beside it. Every request
// gets a request id and an access-log line from the edge; every transport
// admits its callers and audits through it and calls the same session
// manager. gRPC needs HTTP/2, which the daemon's server speaks in
// cleartext (h2c) beside HTTP/1.1.
func (d *Daemon) mountTransports() error {
	d.api = httpapi.New(httpapi.Config{
		Manager:       d.manager,
		Images:        d.images,
		Log:           d.log,
		Version:       Version,
		CgroupMode:    fmt.Sprintf("v%d", d.cgroups.Version()),
		Edge:          d.edge,
		Tenants:       d.authStore(),
		TenantChanged: d.tenants.forget,
		Metrics:       d.metrics.Handler(),
		Ready:         d.ready.check,
		Origins:       d.origins,
		PreviewDomain: d.cfg.PreviewDomain,
	})
	mux := http.NewServeMux()
	d.api.Mount(mux)
	// The web console at / and /console/, beside the API (internal/web),
	// with the last hour of the metrics for its charts.
	// A client that asks GET / for JSON gets the API's index.
	apiOnly := http.NewServeMux()
	d.api.Mount(apiOnly)
	d.history = metrics.NewHistory(d.metrics, 0)
	web.New(web.Config{Edge: d.edge, History: d.history, API: apiOnly, Version: Version, Docs: httpapi.DocsURL}).Mount(mux)
	grpcapi.New(grpcapi.Config{Manager: d.manager, Edge: d.edge, Log: d.log, Ready: d.ready.check}).Mount(mux)
	if err := mcpapi.Mount(mux, d.edge, d.manager, mcpapi.MountOptions{Version: Version, Log: d.log, AllowedHosts: d.cfg.MCPHosts()}); err != nil {
		return err
	}
	// The E2B-compatible API at /e2b (docs/E2B.md): always on, like every
	// transport it is one more face of the same sessions behind the same
	// edge, and E2B's SDKs take a base URL with a path, so it needs no port
	// of its own.
	var keys auth.KeyStore
	if d.edge.Authenticator() != nil {
		keys = d.authStore()
	}
	e2bAPI, err := e2b.New(e2b.Config{Manager: d.manager, Edge: d.edge, Images: d.images, Keys: keys,
		SecretFile: filepath.Join(d.cfg.DataDir, "e2b-secret"), FleetSecret: d.fleetSecret(), PreviewDomain: d.cfg.PreviewDomain, Log: d.log})
	if err != nil {
		return err
	}
	e2bAPI.Mount(mux)
	// Preview hosts ({port}-{session}.preview_domain) go to the sessions'
	// ports before anything else: their paths are the servers' inside.
	// Then browsers of cors_origins, on every transport; request bodies
	// that stall are cut (edge.IdleBodies).
	// In a fleet, a request for a session another node owns goes there
	// (fleet.go) before anything else looks at it, the E2B facade's
	// included (docs/FLEET.md).
	d.handler = d.edge.Observe(d.forward(e2bAPI.Hosts(d.api.Preview(edge.CORS(d.origins, edge.IdleBodies(edge.DefaultBodyIdleTimeout, grpcapi.Unrouted(mux)))))))
	return nil
}
