package mcpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
)

// HTTPOptions configures the Streamable HTTP endpoint that NewHTTPHandler
// returns.
type HTTPOptions struct {
	// AllowedHosts are the host names (ports aside, case aside) that a
	// request arriving on a loopback address may name in its Host header,
	// besides loopback names: those of a reverse proxy on the same host.
	// "*" allows every name. Without them such a request is refused (403),
	// which stops a DNS-rebinding page from reaching a loopback daemon.
	// Requests on other addresses are not checked (as the SDK's own
	// protection does).
	AllowedHosts []string
	// MaxRequestBytes bounds a request body (413 past it); 0 is the SDK's
	// default.
	MaxRequestBytes int64
	// Caller names who made a request, from its context as authentication
	// left it (tenant and key): a notifications/cancelled reaches only the
	// calls of the same caller. nil treats every request as one caller.
	Caller func(ctx context.Context) string
	// Log receives what is worth a warning; nil is slog.Default().
	Log *slog.Logger
}

// NewHTTPHandler serves srv over Streamable HTTP, stateless: every POST is a
// call of its own. Besides the SDK's handler it
//   - checks the Host header of loopback requests against AllowedHosts;
//   - binds each tools/call to its HTTP request, so that a client that hangs
//     up, or that sends notifications/cancelled for the call's id (in a POST
//     of its own, as clients of the 2025 revisions do), cancels the tool's
//     context and with it the command it runs;
//   - answers a body that is not JSON with JSON-RPC's -32700 and, for
//     revisions before 2026-07-28, a request for a method MCP does not have
//     with -32601 (the SDK answers both with a plain-text 400; it answers
//     -32601 itself on 2026-07-28 and later).
//
// Protocol revisions: 2026-07-28 (stateless, SEP-2575) and every older one
// the SDK speaks; a client's initialize negotiates as the SDK does.
func NewHTTPHandler(srv *mcp.Server, opts HTTPOptions) http.Handler {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.MaxRequestBytes == 0 {
		opts.MaxRequestBytes = mcp.DefaultMaxRequestBodyBytes
	}
	allowed := map[string]bool{}
	for _, h := range opts.AllowedHosts {
		allowed[strings.ToLower(strings.TrimSpace(h))] = true
	}
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: opts.MaxRequestBytes,
		// The Host check is ours (AllowedHosts), with the SDK's rule.
		DisableLocalhostProtection: true,
		// On 2026-07-28 the POST is the whole call: its end cancels it.
		// Older revisions get the same from bindCall.
		PropagateRequestCancellation: true,
	})
	return &httpHandler{sdk: sdk, opts: opts, allowed: allowed, calls: newCalls()}
}

// httpHandler is NewHTTPHandler's handler.
type httpHandler struct {
	sdk     http.Handler
	opts    HTTPOptions
	allowed map[string]bool // lower-case host names
	calls   *calls
}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.hostAllowed(r) {
		writeEnvelope(w, errdefs.ErrPermissionDenied,
			fmt.Sprintf("host %q is not allowed on a loopback address (DNS-rebinding protection); a reverse proxy's name goes in the daemon's mcp_allowed_hosts", r.Host))
		return
	}
	if r.Method != http.MethodPost {
		h.sdk.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeEnvelope(w, errdefs.ErrTooLarge, fmt.Sprintf("an MCP request may have at most %d bytes", mbe.Limit))
			return
		}
		writeEnvelope(w, errdefs.ErrInvalidArgument, "reading the request body: "+err.Error())
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	msg, err := peek(body)
	if err != nil {
		writeRPCError(w, http.StatusBadRequest, nil, err.(*jsonrpc.Error))
		return
	}
	if msg == nil { // a batch (2025-03-26 and before): the SDK's
		h.sdk.ServeHTTP(w, r)
		return
	}
	newProtocol := r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28"
	switch {
	case msg.isCall() && !knownMethods[msg.Method] && !newProtocol:
		// A JSON-RPC answer in an HTTP 200: clients hand it to the call
		// that made it, where an HTTP error would only break the stream.
		writeRPCError(w, http.StatusOK, msg.ID, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method %q not found", msg.Method)})
		return
	case msg.isCall() && msg.Method == "tools/call":
		caller := h.callerOf(r.Context())
		ctx, done := h.calls.bind(r.Context(), caller, msg.id())
		defer done()
		r = r.WithContext(ctx)
	case msg.Method == "notifications/cancelled":
		var n struct {
			Params struct {
				RequestID any `json:"requestId"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &n) == nil {
			if id, err := jsonrpc.MakeID(n.Params.RequestID); err == nil && id.IsValid() {
				if c := h.calls.cancel(h.callerOf(r.Context()), idKey(id)); c > 1 {
					h.opts.Log.Warn("mcp cancel matched more than one call of its caller; cancelled none", "request_id", n.Params.RequestID, "calls", c)
				}
			}
		}
	}
	h.sdk.ServeHTTP(w, r)
}

func (h *httpHandler) callerOf(ctx context.Context) string {
	if h.opts.Caller == nil {
		return ""
	}
	return h.opts.Caller(ctx)
}

// hostAllowed applies the SDK's DNS-rebinding rule, widened by
// AllowedHosts: a request that arrived on a loopback address must name a
// loopback host or an allowed one.
func (h *httpHandler) hostAllowed(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !isLoopback(local.String()) || isLoopback(r.Host) || h.allowed["*"] {
		return true
	}
	host := r.Host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		host = hh
	}
	return h.allowed[strings.ToLower(strings.Trim(host, "[]"))]
}

// isLoopback reports whether a host or host:port names a loopback address.
func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// knownMethods are the client-to-server requests of the MCP revisions the
// SDK speaks. A request for any other method is answered -32601 here.
var knownMethods = map[string]bool{
	"initialize": true, "ping": true, "server/discover": true,
	"tools/list": true, "tools/call": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true, "subscriptions/listen": true,
	"prompts/list": true, "prompts/get": true,
	"completion/complete": true, "logging/setLevel": true,
}

// rpcMessage is what the handler reads of a JSON-RPC message: not its
// params, which may be megabytes (write_file's content).
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
}

func (m *rpcMessage) isCall() bool {
	return m.Method != "" && len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null"))
}

// id is the message's id as the SDK reads it.
func (m *rpcMessage) id() string {
	var v any
	if json.Unmarshal(m.ID, &v) != nil {
		return ""
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		return ""
	}
	return idKey(id)
}

// idKey tells ids apart by type: 1 and "1" are different requests.
func idKey(id jsonrpc.ID) string { return fmt.Sprintf("%T:%v", id.Raw(), id.Raw()) }

// peek reads the one message of a POST body, nil for a batch. An error is
// the JSON-RPC error to answer with: -32700 for what is not JSON, -32600
// for JSON that is not a message.
func peek(body []byte) (*rpcMessage, error) {
	parseErr := &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "parse error: the body is not JSON"}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		if !json.Valid(body) {
			return nil, parseErr
		}
		return nil, nil
	}
	var m rpcMessage
	err := json.Unmarshal(body, &m)
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) || errors.Is(err, io.ErrUnexpectedEOF) || len(bytes.TrimSpace(body)) == 0 {
		return nil, parseErr
	}
	if err != nil || m.JSONRPC != "2.0" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: `invalid request: not a JSON-RPC 2.0 message (an object with "jsonrpc":"2.0")`}
	}
	return &m, nil
}

// writeRPCError answers with a JSON-RPC error response; id nil is null.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, e *jsonrpc.Error) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpc.Error  `json:"error"`
	}{"2.0", id, e})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// writeEnvelope answers an HTTP-level refusal with the REST error envelope
// and the edge's status for its class.
func writeEnvelope(w http.ResponseWriter, c *errdefs.Class, msg string) {
	edge.WriteJSON(w, edge.StatusOf(c), api.Error{Error: api.ErrorBody{Code: c.String(), Message: msg}})
}
