package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/audit"
	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
)

// This file serves the endpoints that manage access: API keys, tokens,
// tenants' settings and the audit log.

var errNoTenants = errdefs.New(errdefs.ErrUnavailable, "this daemon keeps no tenant settings")

// DefaultTokenTTL is how long a token lives unless the caller asks.
const DefaultTokenTTL = 5 * time.Minute

func toAPIKey(k *auth.Key) api.Key {
	return api.Key{ID: k.ID, Tenant: k.Tenant, Name: k.Name, Admin: k.Admin, CreatedAt: k.CreatedAt,
		ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt}
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	if s.edge.Authenticator() == nil {
		s.writeError(w, r, errNoAuth)
		return
	}
	if err := requireAdmin(r, "creating API keys"); err != nil {
		s.writeError(w, r, err)
		return
	}
	var req api.CreateKeyRequest
	if err := decodeJSON(r, &req, s.cfg.MaxJSONBytes, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if !auth.ValidTenant(req.Tenant) {
		s.writeError(w, r, errdefs.New(errdefs.ErrInvalidArgument,
			"tenant %q: want 1 to 63 of a-z, 0-9, '_' and '-', starting with a letter or digit", req.Tenant))
		return
	}
	var expires *time.Time
	switch {
	case req.ExpiresInSeconds < 0:
		s.writeError(w, r, errdefs.New(errdefs.ErrInvalidArgument, "expires_in_seconds must be positive"))
		return
	case req.ExpiresInSeconds > 0:
		if req.ExpiresInSeconds > 100*365*24*3600 {
			s.writeError(w, r, errdefs.New(errdefs.ErrInvalidArgument, "expires_in_seconds is more than a century"))
			return
		}
		t := time.Now().Add(time.Duration(req.ExpiresInSeconds) * time.Second)
		expires = &t
	}
	secret, k, err := s.edge.Authenticator().CreateKey(r.Context(), req.Tenant, req.Name, req.Admin, expires)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.KeyCreated{Key: toAPIKey(k), Secret: secret})
}

// listKeys lists the caller's tenant's keys; an admin may list another
// tenant's, or every tenant's.
func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	if s.edge.Authenticator() == nil {
		s.writeError(w, r, errNoAuth)
		return
	}
	id := identity(r)
	tn := r.URL.Query().Get("tenant")
	switch {
	case id.Admin:
	case tn == "" || tn == id.Tenant:
		tn = id.Tenant
	default:
		s.writeError(w, r, errdefs.New(errdefs.ErrPermissionDenied, "listing another tenant's keys needs an admin key"))
		return
	}
	ks, err := s.edge.Authenticator().ListKeys(r.Context(), tn)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.KeyList{Keys: make([]api.Key, 0, len(ks))}
	for _, k := range ks {
		out.Keys = append(out.Keys, toAPIKey(k))
	}
	writeJSON(w, http.StatusOK, out)
}

// revokeKey revokes a key of the caller's tenant, or any key for an admin.
func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) {
	if s.edge.Authenticator() == nil {
		s.writeError(w, r, errNoAuth)
		return
	}
	id := identity(r)
	scope := id.Tenant
	if id.Admin {
		scope = ""
	}
	kid := r.PathValue("key_id")
	if !auth.ValidKeyID(kid) {
		s.writeError(w, r, errdefs.New(errdefs.ErrNotFound, "API key %q not found", kid))
		return
	}
	if err := s.edge.Authenticator().RevokeKey(r.Context(), scope, kid); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// createToken issues a short-lived token for the caller, for clients that
// cannot send headers (a browser's WebSocket or EventSource).
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	if s.edge.Authenticator() == nil {
		s.writeError(w, r, errNoAuth)
		return
	}
	var req api.TokenRequest
	if err := decodeJSON(r, &req, s.cfg.MaxJSONBytes, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	ttl := DefaultTokenTTL
	if req.TTLSeconds != 0 {
		if req.TTLSeconds < 0 || req.TTLSeconds > int64(auth.MaxTokenTTL/time.Second) {
			s.writeError(w, r, errdefs.New(errdefs.ErrInvalidArgument, "ttl_seconds must be between 1 and %d", int64(auth.MaxTokenTTL/time.Second)))
			return
		}
		ttl = time.Duration(req.TTLSeconds) * time.Second
	}
	tok, exp := s.edge.Authenticator().IssueToken(identity(r), ttl)
	writeJSON(w, http.StatusCreated, api.Token{Token: tok, ExpiresAt: exp})
}

func toAPITenant(t *auth.Tenant) api.Tenant {
	out := api.Tenant{
		Name: t.Name,
		Quota: api.TenantQuota{
			MaxSessions:           t.Quota.MaxSessions,
			MaxMemoryMB:           t.Quota.MaxMemoryMB,
			MaxCPUs:               t.Quota.MaxCPUs,
			MaxLifetimeSeconds:    int64(t.Quota.MaxLifetime / time.Second),
			MaxExecTimeoutSeconds: int64(t.Quota.MaxExecTimeout / time.Second),
			MaxWorkspaces:         t.Quota.MaxWorkspaces,
			MaxSnapshots:          t.Quota.MaxSnapshots,
		},
		Policy: api.TenantPolicy{Allow: t.Policy.Allow, Deny: t.Policy.Deny, AllowPublicPorts: t.Policy.PublicPorts},
	}
	if t.Policy.NetworkMaxMode != "" || len(t.Policy.NetworkAllow) > 0 {
		out.Policy.Network = &api.TenantNetwork{MaxMode: t.Policy.NetworkMaxMode, Allow: t.Policy.NetworkAllow}
	}
	if !t.UpdatedAt.IsZero() {
		u := t.UpdatedAt
		out.UpdatedAt = &u
	}
	return out
}

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Tenants == nil {
		s.writeError(w, r, errNoTenants)
		return
	}
	if err := requireAdmin(r, "listing tenants"); err != nil {
		s.writeError(w, r, err)
		return
	}
	ts, err := s.cfg.Tenants.ListTenants(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.TenantList{Tenants: make([]api.Tenant, 0, len(ts))}
	for _, t := range ts {
		out.Tenants = append(out.Tenants, toAPITenant(t))
	}
	writeJSON(w, http.StatusOK, out)
}

// getTenant shows a tenant's settings to an admin or to the tenant itself.
// A tenant without settings answers with empty ones: the defaults apply.
func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Tenants == nil {
		s.writeError(w, r, errNoTenants)
		return
	}
	name := r.PathValue("name")
	if id := identity(r); !id.Admin && id.Tenant != name {
		s.writeError(w, r, errdefs.New(errdefs.ErrPermissionDenied, "reading another tenant's settings needs an admin key"))
		return
	}
	if !auth.ValidTenant(name) {
		s.writeError(w, r, errdefs.New(errdefs.ErrInvalidArgument, "tenant name %q is not valid", name))
		return
	}
	t, err := s.cfg.Tenants.GetTenant(r.Context(), name)
	if errdefs.Is(err, errdefs.ErrNotFound) {
		t, err = &auth.Tenant{Name: name}, nil
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPITenant(t))
}

func (s *Server) putTenant(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Tenants == nil {
		s.writeError(w, r, errNoTenants)
		return
	}
	if err := requireAdmin(r, "changing a tenant's settings"); err != nil {
		s.writeError(w, r, err)
		return
	}
	name := r.PathValue("name")
	var req api.Tenant
	if err := decodeJSON(r, &req, s.cfg.MaxJSONBytes, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Name != "" && req.Name != name {
		s.writeError(w, r, errdefs.New(errdefs.ErrInvalidArgument, "the body names tenant %q, the path %q", req.Name, name))
		return
	}
	q := req.Quota
	const maxSeconds = int64(100 * 365 * 24 * 3600)
	if q.MaxLifetimeSeconds > maxSeconds || q.MaxExecTimeoutSeconds > maxSeconds {
		s.writeError(w, r, errdefs.New(errdefs.ErrInvalidArgument, "a quota of more than a century"))
		return
	}
	t := &auth.Tenant{
		Name: name,
		Quota: auth.Quota{
			MaxSessions:    q.MaxSessions,
			MaxMemoryMB:    q.MaxMemoryMB,
			MaxCPUs:        q.MaxCPUs,
			MaxLifetime:    time.Duration(q.MaxLifetimeSeconds) * time.Second,
			MaxExecTimeout: time.Duration(q.MaxExecTimeoutSeconds) * time.Second,
			MaxWorkspaces:  q.MaxWorkspaces,
			MaxSnapshots:   q.MaxSnapshots,
		},
		Policy:    auth.Policy{Allow: req.Policy.Allow, Deny: req.Policy.Deny, PublicPorts: req.Policy.AllowPublicPorts},
		UpdatedAt: time.Now().UTC(),
	}
	if n := req.Policy.Network; n != nil {
		t.Policy.NetworkMaxMode, t.Policy.NetworkAllow = n.MaxMode, n.Allow
	}
	if err := t.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.cfg.Tenants.PutTenant(r.Context(), t); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.tenantChanged(name)
	writeJSON(w, http.StatusOK, toAPITenant(t))
}

func (s *Server) deleteTenant(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Tenants == nil {
		s.writeError(w, r, errNoTenants)
		return
	}
	if err := requireAdmin(r, "deleting a tenant's settings"); err != nil {
		s.writeError(w, r, err)
		return
	}
	name := r.PathValue("name")
	if err := s.cfg.Tenants.DeleteTenant(r.Context(), name); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.tenantChanged(name)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) tenantChanged(name string) {
	if s.cfg.TenantChanged != nil {
		s.cfg.TenantChanged(name)
	}
}

// maxAuditRecords bounds one audit query's answer.
const maxAuditRecords = 10000

// queryAudit answers audit queries: an admin's over every tenant, anyone
// else's over their own tenant.
func (s *Server) queryAudit(w http.ResponseWriter, r *http.Request) {
	if s.edge.AuditLog() == nil {
		s.writeError(w, r, errdefs.New(errdefs.ErrUnavailable, "this daemon keeps no audit log"))
		return
	}
	q := r.URL.Query()
	f := audit.Filter{Tenant: q.Get("tenant"), Session: q.Get("session"), Op: q.Get("op")}
	if id := identity(r); !id.Admin {
		if f.Tenant != "" && f.Tenant != id.Tenant {
			s.writeError(w, r, errdefs.New(errdefs.ErrPermissionDenied, "reading another tenant's audit records needs an admin key"))
			return
		}
		f.Tenant = id.Tenant
	}
	var err error
	now := time.Now()
	if f.Since, err = parseSince(q.Get("since"), now); err != nil {
		s.writeError(w, r, err)
		return
	}
	if v := q.Get("until"); v != "" {
		if f.Until, err = time.Parse(time.RFC3339, v); err != nil {
			s.writeError(w, r, errdefs.New(errdefs.ErrInvalidArgument, "until %q: want an RFC 3339 time", v))
			return
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditRecords {
			s.writeError(w, r, errdefs.New(errdefs.ErrInvalidArgument, "limit %q: want 1 to %d", v, maxAuditRecords))
			return
		}
		f.Limit = n
	}
	recs, err := s.edge.AuditLog().Query(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.AuditList{Records: make([]api.AuditRecord, 0, len(recs))}
	for i := range recs {
		rc := &recs[i]
		out.Records = append(out.Records, api.AuditRecord{
			Time: rc.Time, Tenant: rc.Tenant, KeyID: rc.KeyID, Subject: rc.Subject, Session: rc.Session,
			Op: rc.Op, Target: rc.Target, Status: edge.AuditStatus(rc), Outcome: rc.Outcome, DurationMs: rc.DurationMs, Node: rc.Node,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// parseSince reads an RFC 3339 time, or a duration meaning that long ago.
func parseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, errdefs.New(errdefs.ErrInvalidArgument, "since %q: want an RFC 3339 time or a duration such as 1h", v)
	}
	return t, nil
}
