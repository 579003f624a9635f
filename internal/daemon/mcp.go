package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/httpapi"
	"github.com/warrenhq/warren/internal/mcpapi"
)

// mcpMaxBody bounds an MCP request body (the SDK answers 413 past it):
// write_file's content travels inside it, as an exec's stdin does in the
// REST API's JSON bodies.
const mcpMaxBody = 8 << 20

// mcpRoutes mounts the MCP server (Streamable HTTP) at /mcp.
//
// The handler is stateless: every POST is a call of its own, authenticated
// by the REST server's Admit like any REST request, and the tools act for
// the tenant of that request's caller (the SDK hands the request's context
// to the tool). No MCP session outlives the request that made it, so no
// caller can reach another's.
func (d *Daemon) mcpRoutes(mux *http.ServeMux) {
	backend := mcpapi.NewManagerBackend(d.manager, func(ctx context.Context) (string, error) {
		id := httpapi.IdentityOf(ctx)
		if id == nil || id.Tenant == "" {
			return "", errdefs.New(errdefs.ErrUnauthenticated, "the call was not authenticated")
		}
		return id.Tenant, nil
	})
	srv := mcpapi.NewServer(backend, mcpapi.Options{Version: Version, Log: d.log, Audit: d.api.Record})
	h := mcpapi.NewHTTPHandler(srv, mcpapi.HTTPOptions{
		AllowedHosts:    d.cfg.MCPHosts(),
		MaxRequestBytes: mcpMaxBody,
		Caller:          mcpCaller,
		Log:             d.log,
	})
	mux.Handle("/mcp", d.admitMCP(h))
}

// mcpCaller names the caller of an admitted request: a cancel
// notification reaches only the calls of the same key or JWT subject.
func mcpCaller(ctx context.Context) string {
	id := httpapi.IdentityOf(ctx)
	if id == nil {
		return ""
	}
	return id.Tenant + "\x00" + id.KeyID + "\x00" + id.Subject
}

// admitMCP authenticates each request and applies its caller's rate limit
// before the MCP handler sees it; a refusal is the REST error envelope.
func (d *Daemon) admitMCP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, err := d.api.Admit(r)
		if err != nil {
			writeMCPRefusal(w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// writeMCPRefusal answers a request that Admit refused.
func writeMCPRefusal(w http.ResponseWriter, err error) {
	c := errdefs.ClassOf(err)
	status := http.StatusInternalServerError
	switch c {
	case errdefs.ErrUnauthenticated:
		status = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", `Bearer realm="warren"`)
	case errdefs.ErrPermissionDenied:
		status = http.StatusForbidden
	case errdefs.ErrResourceExhausted:
		status = http.StatusTooManyRequests
	case errdefs.ErrUnavailable:
		status = http.StatusServiceUnavailable
	}
	if after, ok := errdefs.RetryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(1, after.Seconds()))))
	}
	b, _ := json.Marshal(api.Error{Error: api.ErrorBody{Code: c.String(), Message: err.Error()}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
