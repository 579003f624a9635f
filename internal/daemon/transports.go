package daemon

import (
	"fmt"
	"net/http"

	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/grpcapi"
	"github.com/warrenhq/warren/internal/httpapi"
	"github.com/warrenhq/warren/internal/mcpapi"
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
		Tenants:       d.store,
		TenantChanged: d.tenants.forget,
		Metrics:       d.metrics.Handler(),
		Ready:         d.ready.check,
		Origins:       d.origins,
		PreviewDomain: d.cfg.PreviewDomain,
	})
	mux := http.NewServeMux()
	d.api.Mount(mux)
	grpcapi.New(grpcapi.Config{Manager: d.manager, Edge: d.edge, Log: d.log, Ready: d.ready.check}).Mount(mux)
	if err := mcpapi.Mount(mux, d.edge, d.manager, mcpapi.MountOptions{Version: Version, Log: d.log, AllowedHosts: d.cfg.MCPHosts()}); err != nil {
		return err
	}
	// Preview hosts ({port}-{session}.preview_domain) go to the sessions'
	// ports before anything else: their paths are the servers' inside.
	// Then browsers of cors_origins, on every transport; request bodies
	// that stall are cut (edge.IdleBodies).
	// In a fleet, a request for a session another node owns goes there
	// (fleet.go) before anything else looks at it.
	d.handler = d.edge.Observe(d.forward(d.api.Preview(edge.CORS(d.origins, edge.IdleBodies(edge.DefaultBodyIdleTimeout, grpcapi.Unrouted(mux))))))
	return nil
}
