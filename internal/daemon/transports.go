package daemon

import (
	"net/http"

	"github.com/warrenhq/warren/internal/edge"
)

// handler is everything the daemon serves on its one port: the REST API at
// the root, and the other transports (gRPC/Connect, MCP) on their own paths
// beside it. Every transport authenticates through the REST server's Admit
// and calls the same session manager, and every request gets a request id
// and an access-log line (httpapi's Observe).
func (d *Daemon) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", d.api.Handler())
	d.grpcRoutes(mux)
	d.mcpRoutes(mux)
	return d.api.Observe(edge.CORS(d.origins, mux)) // browsers of cors_origins, on every transport
}
