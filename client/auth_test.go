package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/warrenhq/warren/api"
)

var (
	expiry  = t0.Add(30 * 24 * time.Hour)
	key     = api.Key{ID: "aaaaaaaaaaaa", Tenant: "team-a", Name: "ci", CreatedAt: t0, ExpiresAt: &expiry}
	tenantA = api.Tenant{Name: "team-a", Quota: api.TenantQuota{MaxSessions: 10, MaxCPUs: 1.5},
		Policy: api.TenantPolicy{Deny: []string{"curl"}}, UpdatedAt: &t0}
	record = api.AuditRecord{Time: t0, Tenant: "team-a", KeyID: "aaaaaaaaaaaa", Session: "demo", Op: "session.exec",
		Status: 200, Outcome: "ok", DurationMs: 12.5}
)

func TestAuthCalls(t *testing.T) {
	created := api.KeyCreated{Key: key, Secret: "wrn_aaaaaaaaaaaa_secret"}
	withTenant := session
	withTenant.Tenant = "team-a"
	tests := []struct {
		name       string
		call       func(context.Context, *Client) (any, error)
		wantMethod string
		wantPath   string     // escaped
		wantQuery  url.Values // nil: none
		wantBody   string     // JSON, compared as JSON; "" for none
		status     int
		respBody   string
		want       any
	}{
		{
			name: "CreateKey",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateKey(ctx, &api.CreateKeyRequest{Tenant: "team-a", Name: "ci", Admin: true, ExpiresInSeconds: 60})
			},
			wantMethod: "POST", wantPath: "/v1/keys",
			wantBody: `{"tenant":"team-a","name":"ci","admin":true,"expires_in_seconds":60}`,
			status:   201, respBody: mustJSON(t, created), want: &created,
		},
		{
			name:       "ListKeys of every tenant",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.ListKeys(ctx, "") },
			wantMethod: "GET", wantPath: "/v1/keys",
			status: 200, respBody: mustJSON(t, api.KeyList{Keys: []api.Key{key}}), want: []api.Key{key},
		},
		{
			name:       "ListKeys of a tenant",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.ListKeys(ctx, "team a&b") },
			wantMethod: "GET", wantPath: "/v1/keys", wantQuery: url.Values{"tenant": {"team a&b"}},
			status: 200, respBody: `{"keys":[]}`, want: []api.Key{},
		},
		{
			name:       "RevokeKey escapes the id",
			call:       func(ctx context.Context, c *Client) (any, error) { return nil, c.RevokeKey(ctx, "a/b?c") },
			wantMethod: "DELETE", wantPath: "/v1/keys/a%2Fb%3Fc", status: 204,
		},
		{
			name: "CreateToken with a ttl rounded up",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateToken(ctx, 90*time.Second+time.Millisecond)
			},
			wantMethod: "POST", wantPath: "/v1/tokens", wantBody: `{"ttl_seconds":91}`,
			status: 201, respBody: `{"token":"wrt_p.m","expires_at":"2026-11-22T10:01:31Z"}`,
			want: &api.Token{Token: "wrt_p.m", ExpiresAt: t0.Add(91 * time.Second)},
		},
		{
			name:       "CreateToken with the daemon's ttl",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.CreateToken(ctx, 0) },
			wantMethod: "POST", wantPath: "/v1/tokens", wantBody: `{}`,
			status: 201, respBody: `{"token":"wrt_p.m","expires_at":"2026-11-22T10:05:00Z"}`,
			want: &api.Token{Token: "wrt_p.m", ExpiresAt: t0.Add(5 * time.Minute)},
		},
		{
			name:       "ListTenants",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.ListTenants(ctx) },
			wantMethod: "GET", wantPath: "/v1/tenants",
			status: 200, respBody: mustJSON(t, api.TenantList{Tenants: []api.Tenant{tenantA}}), want: []api.Tenant{tenantA},
		},
		{
			name:       "GetTenant escapes the name",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.GetTenant(ctx, "../x y") },
			wantMethod: "GET", wantPath: "/v1/tenants/..%2Fx%20y",
			status: 200, respBody: mustJSON(t, tenantA), want: &tenantA,
		},
		{
			name: "PutTenant",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.PutTenant(ctx, "team-a", &api.Tenant{Name: "team-a", Quota: api.TenantQuota{MaxSessions: 10, MaxCPUs: 1.5},
					Policy: api.TenantPolicy{Deny: []string{"curl"}}})
			},
			wantMethod: "PUT", wantPath: "/v1/tenants/team-a",
			wantBody: `{"name":"team-a","quota":{"max_sessions":10,"max_cpus":1.5},"policy":{"deny":["curl"]}}`,
			status:   200, respBody: mustJSON(t, tenantA), want: &tenantA,
		},
		{
			name:       "DeleteTenant",
			call:       func(ctx context.Context, c *Client) (any, error) { return nil, c.DeleteTenant(ctx, "team-a") },
			wantMethod: "DELETE", wantPath: "/v1/tenants/team-a", status: 204,
		},
		{
			name: "QueryAudit with every filter",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.QueryAudit(ctx, AuditQuery{Tenant: "team-a", Session: "demo", Op: "session.exec",
					Since: "1h", Until: "2026-11-22T10:00:00Z", Limit: 50})
			},
			wantMethod: "GET", wantPath: "/v1/audit",
			wantQuery: url.Values{"tenant": {"team-a"}, "session": {"demo"}, "op": {"session.exec"},
				"since": {"1h"}, "until": {"2026-11-22T10:00:00Z"}, "limit": {"50"}},
			status: 200, respBody: mustJSON(t, api.AuditList{Records: []api.AuditRecord{record}}), want: []api.AuditRecord{record},
		},
		{
			name:       "QueryAudit without filters",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.QueryAudit(ctx, AuditQuery{}) },
			wantMethod: "GET", wantPath: "/v1/audit",
			status: 200, respBody: `{"records":[]}`, want: []api.AuditRecord{},
		},
		{
			name:       "ListAllSessions",
			call:       func(ctx context.Context, c *Client) (any, error) { return c.ListAllSessions(ctx) },
			wantMethod: "GET", wantPath: "/v1/sessions", wantQuery: url.Values{"all": {"true"}},
			status: 200, respBody: mustJSON(t, api.SessionList{Sessions: []api.Session{withTenant}}),
			want: []api.Session{withTenant},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, got := fakeDaemon(t, tc.status, http.Header{"Content-Type": {"application/json"}}, tc.respBody)
			res, err := tc.call(t.Context(), New(srv.URL, WithToken("s3cret")))
			if err != nil {
				t.Fatalf("%s: unexpected error: %v", tc.name, err)
			}
			if diff := cmp.Diff(tc.want, res); diff != "" {
				t.Errorf("%s result mismatch (-want +got):\n%s", tc.name, diff)
			}
			if got.method != tc.wantMethod || got.path != tc.wantPath {
				t.Errorf("request = %s %s, want %s %s", got.method, got.path, tc.wantMethod, tc.wantPath)
			}
			wantQuery := tc.wantQuery
			if wantQuery == nil {
				wantQuery = url.Values{}
			}
			if diff := cmp.Diff(wantQuery, got.query); diff != "" {
				t.Errorf("query mismatch (-want +got):\n%s", diff)
			}
			if got.auth != "Bearer s3cret" {
				t.Errorf("Authorization = %q, want %q", got.auth, "Bearer s3cret")
			}
			if tc.wantBody == "" {
				if len(got.body) != 0 {
					t.Errorf("request body = %q, want none", got.body)
				}
				return
			}
			if got.contentType != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", got.contentType)
			}
			var w, g any
			if err := json.Unmarshal([]byte(tc.wantBody), &w); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(got.body, &g); err != nil {
				t.Fatalf("request body is not JSON: %v: %q", err, got.body)
			}
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("request body mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAuthErrors(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		wantCode string
	}{
		{"missing credentials", 401, `{"error":{"code":"unauthenticated","message":"no credentials: send an API key"}}`, "unauthenticated"},
		{"401 without an envelope", 401, "", "unauthenticated"},
		{"not an admin", 403, `{"error":{"code":"permission_denied","message":"creating API keys needs an admin key"}}`, "permission_denied"},
		{"no such key", 404, `{"error":{"code":"not_found","message":"API key \"x\" not found"}}`, "not_found"},
	}
	calls := []struct {
		name string
		call func(context.Context, *Client) error
	}{
		{"CreateKey", func(ctx context.Context, c *Client) error {
			_, err := c.CreateKey(ctx, &api.CreateKeyRequest{Tenant: "a"})
			return err
		}},
		{"ListKeys", func(ctx context.Context, c *Client) error { _, err := c.ListKeys(ctx, ""); return err }},
		{"RevokeKey", func(ctx context.Context, c *Client) error { return c.RevokeKey(ctx, "x") }},
		{"CreateToken", func(ctx context.Context, c *Client) error { _, err := c.CreateToken(ctx, 0); return err }},
		{"ListTenants", func(ctx context.Context, c *Client) error { _, err := c.ListTenants(ctx); return err }},
		{"GetTenant", func(ctx context.Context, c *Client) error { _, err := c.GetTenant(ctx, "a"); return err }},
		{"PutTenant", func(ctx context.Context, c *Client) error { _, err := c.PutTenant(ctx, "a", &api.Tenant{}); return err }},
		{"DeleteTenant", func(ctx context.Context, c *Client) error { return c.DeleteTenant(ctx, "a") }},
		{"QueryAudit", func(ctx context.Context, c *Client) error { _, err := c.QueryAudit(ctx, AuditQuery{}); return err }},
		{"ListAllSessions", func(ctx context.Context, c *Client) error { _, err := c.ListAllSessions(ctx); return err }},
	}
	for _, tc := range tests {
		for _, cl := range calls {
			t.Run(tc.name+"/"+cl.name, func(t *testing.T) {
				srv, _ := fakeDaemon(t, tc.status, http.Header{"Content-Type": {"application/json"}}, tc.body)
				err := fmt.Errorf("wrapped: %w", cl.call(t.Context(), New(srv.URL)))
				if got := Code(err); got != tc.wantCode {
					t.Errorf("Code(%s() error %v) = %q, want %q", cl.name, err, got, tc.wantCode)
				}
				var e *Error
				if !errors.As(err, &e) || e.StatusCode != tc.status {
					t.Errorf("%s() error = %v, want an *Error with status %d", cl.name, err, tc.status)
				}
			})
		}
	}
}
