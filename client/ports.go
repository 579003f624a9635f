package client

import (
	"context"
	"net"
	"net/http"
	"strconv"

	"github.com/coder/websocket"

	"github.com/warrenhq/warren/api"
)

// ListPorts lists the TCP ports listening in a session, and its public
// ports.
func (c *Client) ListPorts(ctx context.Context, id string) ([]api.Port, error) {
	var out api.PortList
	if _, err := c.doJSON(ctx, http.MethodGet, sessionPath(id, "/ports"), nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Ports, nil
}

// SetPortPublic serves a session's port without authentication (public),
// or with it again. The tenant's settings must allow public ports.
func (c *Client) SetPortPublic(ctx context.Context, id string, port int, public bool) (*api.Port, error) {
	var out api.Port
	if _, err := c.doJSON(ctx, http.MethodPut, sessionPath(id, "/ports/"+strconv.Itoa(port)), nil, &api.PortUpdate{Public: public}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PortForward opens a raw TCP connection to port on a session's loopback,
// carried over a WebSocket through the daemon (GET
// /v1/sessions/{id}/port-forward/{port}). Closing it closes the
// connection inside. A port with nothing listening is an *Error of code
// unavailable.
func (c *Client) PortForward(ctx context.Context, id string, port int) (net.Conn, error) {
	path := sessionPath(id, "/port-forward/"+strconv.Itoa(port))
	ws, err := c.dialWS(ctx, path, nil)
	if err != nil {
		return nil, err
	}
	// The connection lives on after ctx, which bounded the dial only.
	return websocket.NetConn(context.WithoutCancel(ctx), ws, websocket.MessageBinary), nil
}

// PortURL returns the URL at which the daemon serves port of the session
// id (its HTTP and WebSocket proxy, /v1/sessions/{id}/ports/{port}/). A
// request to it needs the client's credential, or a token from
// CreateToken as the query parameter token (docs/PORTS.md).
func (c *Client) PortURL(id string, port int) string {
	return c.baseURL + sessionPath(id, "/ports/"+strconv.Itoa(port)+"/")
}
