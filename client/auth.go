package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/warrenhq/warren/api"
)

// This file holds the calls that manage credentials, tenants and the audit
// log. The daemon decides which of them a caller's key may make: a
// tenant's own key reaches its own keys, settings and audit records, an
// admin key every tenant's.

// CreateKey creates an API key. The answer carries the key's secret, which
// the daemon never shows again.
func (c *Client) CreateKey(ctx context.Context, req *api.CreateKeyRequest) (*api.KeyCreated, error) {
	var k api.KeyCreated
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/keys", nil, req, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// ListKeys lists the API keys of tenant, or of every tenant when tenant is
// empty. Revoked and expired keys are listed too.
func (c *Client) ListKeys(ctx context.Context, tenant string) ([]api.Key, error) {
	var q url.Values
	if tenant != "" {
		q = url.Values{"tenant": {tenant}}
	}
	var l api.KeyList
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/keys", q, nil, &l); err != nil {
		return nil, err
	}
	return l.Keys, nil
}

// RevokeKey revokes the API key id: it stops working at once.
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	_, err := c.doJSON(ctx, http.MethodDelete, "/v1/keys/"+url.PathEscape(id), nil, nil, nil)
	return err
}

// CreateToken issues a short-lived token that acts as the caller, for
// clients that cannot send headers (a browser's WebSocket passes it as
// ?token=). A ttl of 0 leaves the lifetime to the daemon; a ttl that is not
// a whole number of seconds is rounded up.
func (c *Client) CreateToken(ctx context.Context, ttl time.Duration) (*api.Token, error) {
	req := api.TokenRequest{TTLSeconds: int64(ttl / time.Second)}
	if ttl > 0 && ttl%time.Second != 0 {
		req.TTLSeconds++
	}
	var tok api.Token
	if _, err := c.doJSON(ctx, http.MethodPost, "/v1/tokens", nil, &req, &tok); err != nil {
		return nil, err
	}
	return &tok, nil
}

// tenantPath returns the escaped path of a tenant.
func tenantPath(name string) string {
	return "/v1/tenants/" + url.PathEscape(name)
}

// ListTenants lists the tenants that have settings.
func (c *Client) ListTenants(ctx context.Context) ([]api.Tenant, error) {
	var l api.TenantList
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/tenants", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Tenants, nil
}

// GetTenant returns the settings of the tenant name.
func (c *Client) GetTenant(ctx context.Context, name string) (*api.Tenant, error) {
	var t api.Tenant
	if _, err := c.doJSON(ctx, http.MethodGet, tenantPath(name), nil, nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// PutTenant replaces the settings of the tenant name with t and returns
// them as stored. Zero fields of t take the daemon's defaults.
func (c *Client) PutTenant(ctx context.Context, name string, t *api.Tenant) (*api.Tenant, error) {
	var out api.Tenant
	if _, err := c.doJSON(ctx, http.MethodPut, tenantPath(name), nil, t, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteTenant deletes the settings of the tenant name; the tenant then
// runs on the daemon's defaults.
func (c *Client) DeleteTenant(ctx context.Context, name string) error {
	_, err := c.doJSON(ctx, http.MethodDelete, tenantPath(name), nil, nil, nil)
	return err
}

// AuditQuery selects audit records. Zero fields select everything.
type AuditQuery struct {
	Tenant  string
	Session string
	// Op is an operation's name, such as "session.create".
	Op string
	// Since is an RFC 3339 time, or a Go duration before now such as "1h".
	// It is sent as it is: the daemon parses it.
	Since string
	// Until is an RFC 3339 time.
	Until string
	// Limit caps the number of records; 0 leaves it to the daemon.
	Limit int
}

// values returns q as query parameters, leaving out zero fields.
func (q *AuditQuery) values() url.Values {
	v := url.Values{}
	for _, p := range []struct{ key, val string }{
		{"tenant", q.Tenant}, {"session", q.Session}, {"op", q.Op}, {"since", q.Since}, {"until", q.Until},
	} {
		if p.val != "" {
			v.Set(p.key, p.val)
		}
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// QueryAudit returns the audit records that q selects.
func (c *Client) QueryAudit(ctx context.Context, q AuditQuery) ([]api.AuditRecord, error) {
	var l api.AuditList
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/audit", q.values(), nil, &l); err != nil {
		return nil, err
	}
	return l.Records, nil
}

// ListAllSessions lists the sessions of every tenant, each naming its
// Tenant.
func (c *Client) ListAllSessions(ctx context.Context) ([]api.Session, error) {
	var l api.SessionList
	if _, err := c.doJSON(ctx, http.MethodGet, "/v1/sessions", url.Values{"all": {"true"}}, nil, &l); err != nil {
		return nil, err
	}
	return l.Sessions, nil
}
