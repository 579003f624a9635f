package client

import (
	"context"
	"net/http"

	"github.com/warrenhq/warren/api"
)

// GetNetwork returns a session's egress policy (GET
// /v1/sessions/{id}/network). A session without a network has mode none.
func (c *Client) GetNetwork(ctx context.Context, id string) (*api.NetworkPolicy, error) {
	var out api.NetworkPolicy
	if _, err := c.doJSON(ctx, http.MethodGet, sessionPath(id, "/network"), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateNetwork replaces a running session's egress rules whole, and its
// mode when p.Mode is set (PATCH /v1/sessions/{id}/network), and returns
// the policy now in force. The change applies at once and whole, or not at
// all: a malformed rule is an *Error of code invalid_argument and leaves the
// old policy in force; a session created with mode none, or a change to
// none, is conflict.
func (c *Client) UpdateNetwork(ctx context.Context, id string, p *api.NetworkPolicy) (*api.NetworkPolicy, error) {
	var out api.NetworkPolicy
	if _, err := c.doJSON(ctx, http.MethodPatch, sessionPath(id, "/network"), nil, p, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// NetworkDenials returns the latest connections and names a session's
// policy refused, oldest first, each with a reason (GET
// /v1/sessions/{id}/network/denials; the daemon keeps the last 256).
func (c *Client) NetworkDenials(ctx context.Context, id string) ([]api.NetworkDenial, error) {
	var out api.NetworkDenials
	if _, err := c.doJSON(ctx, http.MethodGet, sessionPath(id, "/network/denials"), nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Denials, nil
}
