package mcpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// DefaultMaxBodyBytes bounds an MCP request body (the SDK answers 413 past
// it): write_file's content travels inside it, as an exec's stdin does in
// the REST API's JSON bodies.
const DefaultMaxBodyBytes = 8 << 20

// MountOptions configures the daemon's /mcp endpoint.
type MountOptions struct {
	// Version is the server's version in the MCP handshake.
	Version string
	// Log receives internal errors; nil is the edge's.
	Log *slog.Logger
	// MaxBodyBytes caps a request body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// AllowedHosts are the Host names a loopback request may carry besides
	// loopback names (mcp_allowed_hosts; HTTPOptions.AllowedHosts).
	AllowedHosts []string
}

// Mount serves the tools over Streamable HTTP at /mcp on mux, over the
// session manager m, behind the edge.
//
// The handler is stateless: every POST is a call of its own, admitted by
// the edge like any REST request, and the tools act for the tenant of that
// request's caller (the SDK hands the request's context to the tool). No
// MCP session outlives the request that made it, so no caller can reach
// another's. Tool calls that change something are audited through the
// edge, and so is a refused attempt at one, as on every transport.
func Mount(mux *http.ServeMux, e *edge.Edge, m *session.Manager, opts MountOptions) error {
	if opts.Log == nil {
		opts.Log = e.Log()
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	backend := NewManagerBackend(m, func(ctx context.Context) (string, error) {
		id := edge.IdentityOf(ctx)
		if id == nil || id.Tenant == "" {
			return "", errdefs.New(errdefs.ErrUnauthenticated, "the call was not authenticated")
		}
		return id.Tenant, nil
	})
	srv := NewServer(backend, Options{Version: opts.Version, Log: opts.Log, Audit: e.Record})
	readOnly, err := readOnlyTools(srv)
	if err != nil {
		return fmt.Errorf("list the MCP tools: %w", err)
	}
	h := NewHTTPHandler(srv, HTTPOptions{
		AllowedHosts:    opts.AllowedHosts,
		MaxRequestBytes: opts.MaxBodyBytes,
		Caller:          caller,
		Log:             opts.Log,
	})
	mux.Handle("/mcp", admit(e, h, readOnly))
	return nil
}

// caller names the caller of an admitted request: a cancel notification
// reaches only the calls of the same key or JWT subject.
func caller(ctx context.Context) string {
	id := edge.IdentityOf(ctx)
	if id == nil {
		return ""
	}
	return id.Tenant + "\x00" + id.KeyID + "\x00" + id.Subject
}

// readOnlyTools names the tools whose annotations say they change nothing;
// a refused call of any other tool is audited. They are learned from the
// server itself, so the list cannot drift from the tools.
func readOnlyTools(srv *mcp.Server) (map[string]bool, error) {
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "warren-mount"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	out := map[string]bool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		out[t.Name] = t.Annotations != nil && t.Annotations.ReadOnlyHint
	}
	return out, nil
}

// maxRefusedPeek bounds how much of a refused request's body is read to
// name the tool it called: the caller is not admitted, so the daemon reads
// no more than it must.
const maxRefusedPeek = 1 << 20

// admit passes each request through the edge's admission (authentication,
// the caller's rate limit) before the MCP handler sees it. A refusal is
// the REST error envelope with the edge's status, and an unauthenticated
// call of a tool that is not read-only is audited as "mcp <tool>".
func admit(e *edge.Edge, next http.Handler, readOnly map[string]bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, err := e.Admit(r)
		if err != nil {
			op, mutating := refusedCall(r, readOnly)
			e.Refuse(ctx, w, r, err, op, "", mutating, start)
			e.WriteError(w, r.WithContext(ctx), err)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// refusedCall names the call a refused request made ("mcp exec") and
// whether it would have changed something. Only POSTs carry calls; one
// whose body cannot be read as a JSON-RPC request counts as changing
// something, as a refused REST POST does.
func refusedCall(r *http.Request, readOnly map[string]bool) (op string, mutating bool) {
	if r.Method != http.MethodPost {
		return "mcp", false
	}
	if r.Body == nil || r.Body == http.NoBody {
		return "mcp", true
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxRefusedPeek)).Decode(&msg); err != nil {
		return "mcp", true
	}
	if msg.Method != "tools/call" {
		return "mcp " + msg.Method, false
	}
	ro, known := readOnly[msg.Params.Name]
	if !known {
		return "mcp tools/call", true
	}
	return "mcp " + msg.Params.Name, !ro
}
