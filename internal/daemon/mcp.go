package daemon

import "net/http"

// mcpRoutes mounts the MCP server (Streamable HTTP) at /mcp.
func (d *Daemon) mcpRoutes(mux *http.ServeMux) {}
