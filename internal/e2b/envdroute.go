package e2b

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/auth"
	"github.com/warrenhq/warren/internal/e2b/envd"
	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// serveEnvd authenticates a request for envd and hands it on with its
// Target. What proves the caller, in order:
//
//   - X-Access-Token: the sandbox's access token, which create and connect
//     gave (the SDK sends it on every envd call; the facade issues one to
//     every sandbox, secure or not, so envd traffic is never
//     unauthenticated);
//   - a signed /files URL: signature = v1_ + base64(sha256(path:operation:
//     user:token[:expiration])), made with that token. Such URLs carry no
//     sandbox id, so the sandbox is the one whose token makes the
//     signature;
//   - otherwise any credential the control plane takes (an E2B or warren
//     key), for the sandbox of that tenant.
//
// The request is then admitted by the edge as the key that created the
// sandbox (rate limits, a revoked key) and audited when it changes
// something. A sandbox that is not running answers 502, as E2B's proxy
// does; a paused one created with autoResume wakes up.
func (s *Server) serveEnvd(w http.ResponseWriter, r *http.Request, id string) {
	start := time.Now()
	edge.SetRoute(r.Context(), r.Method+" "+Prefix+" envd "+r.URL.Path)
	rec, status, msg := s.envdSession(r, id)
	if rec == nil {
		if status == http.StatusBadGateway {
			sandboxGone(w, id, msg)
			return
		}
		writeJSON(w, status, apiError{Code: status, Message: msg})
		return
	}
	ctx, err := s.admitEnvd(r, rec)
	r = r.WithContext(ctx)
	if err != nil {
		s.edge.Refuse(ctx, w, r, err, "e2b envd", rec.ID, r.Method != http.MethodGet, start)
		s.writeError(w, r, err)
		return
	}
	edge.SetSession(ctx, rec.ID)
	if rec.Paused() {
		if rec.Labels[labelAutoResume] == "" {
			sandboxGone(w, rec.ID, "sandbox "+rec.ID+" is paused; connect to it to resume it")
			return
		}
		if rec, err = s.wake(ctx, rec); err != nil {
			s.writeError(w, r, err)
			return
		}
		if _, err := s.setEnd(ctx, rec, time.Now().Add(defaultTimeout), true); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	user := rec.User
	if user == "" {
		user = "root"
	}
	r = r.WithContext(envd.WithTarget(ctx, envd.Target{Tenant: rec.Tenant, Session: rec.ID, User: user}))
	if r.Method == http.MethodGet || r.URL.Path == "/health" || isReadRPC(r.URL.Path) {
		s.envd.ServeHTTP(w, r)
		return
	}
	sw := &edge.StatusWriter{ResponseWriter: w}
	s.envd.ServeHTTP(sw, r)
	s.edge.RecordHTTP(ctx, "e2b envd "+strings.TrimPrefix(r.URL.Path, "/"), rec.ID, "", sw.Status(), start)
}

// isReadRPC reports whether an envd RPC only reads, and so is not audited.
func isReadRPC(p string) bool {
	switch p {
	case "/filesystem.Filesystem/Stat", "/filesystem.Filesystem/ListDir", "/filesystem.Filesystem/WatchDir",
		"/filesystem.Filesystem/CreateWatcher", "/filesystem.Filesystem/GetWatcherEvents", "/filesystem.Filesystem/RemoveWatcher",
		"/process.Process/List", "/process.Process/Connect":
		return true
	}
	return false
}

// envdSession finds the session an envd request is for and checks its
// credential; on failure it returns the status and message to answer.
func (s *Server) envdSession(r *http.Request, id string) (*session.Session, int, string) {
	if tok := r.Header.Get("X-Access-Token"); tok != "" {
		found := false
		for _, rec := range s.mgr.RecordsWithID(id) {
			found = true
			want := s.accessToken(rec)
			if want == "" {
				return nil, http.StatusServiceUnavailable, "this node has not reached its fleet's registry since it started, so it cannot check sandbox " + id + "'s access token yet; try again"
			}
			if subtle.ConstantTimeCompare([]byte(tok), []byte(want)) == 1 {
				return s.live(rec)
			}
		}
		if !found {
			return nil, http.StatusBadGateway, "sandbox " + id + " not found"
		}
		return nil, http.StatusUnauthorized, "invalid access token"
	}
	if sig := r.URL.Query().Get("signature"); sig != "" && r.URL.Path == "/files" {
		return s.signedSession(r, id, sig)
	}
	// A caller with an API key: the sandbox of its tenant.
	ar, err := withWarrenKey(r)
	if err != nil {
		return nil, http.StatusUnauthorized, err.Error()
	}
	ctx, err := s.edge.Admit(ar)
	if err != nil {
		return nil, edge.StatusOf(edge.ClassOf(ctx, err)), err.Error()
	}
	tenant := edge.TenantOf(ctx)
	for _, rec := range s.mgr.RecordsWithID(id) {
		if rec.Tenant == tenant {
			return s.live(rec)
		}
	}
	return nil, http.StatusBadGateway, "sandbox " + id + " not found"
}

// live passes a running session; any other is gone.
func (s *Server) live(rec *session.Session) (*session.Session, int, string) {
	if rec.State != session.StateRunning {
		return nil, http.StatusBadGateway, "sandbox " + rec.ID + " is " + string(rec.State)
	}
	return rec, 0, ""
}

// signedSession checks a signed /files URL (the SDK's downloadUrl and
// uploadUrl) against the sandbox id, if the request names one, or else
// every sandbox's token. In a fleet the router names the sandbox (it found
// it by its fleet token, FleetFiles) when it forwards such a URL here.
func (s *Server) signedSession(r *http.Request, id, sig string) (*session.Session, int, string) {
	q := r.URL.Query()
	op := "read"
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		op = "write"
	}
	exp := q.Get("signature_expiration")
	var expires int64
	if exp != "" {
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil {
			return nil, http.StatusBadRequest, "signature_expiration must be a Unix time in seconds"
		}
		expires = n
	}
	var cands []*session.Session
	if id != "" {
		cands = s.mgr.RecordsWithID(id)
	} else {
		cands = s.mgr.Records("")
	}
	for _, rec := range cands {
		tok := s.accessToken(rec)
		if tok == "" || !validSignature(sig, q.Get("path"), op, q.Get("username"), tok, exp) {
			continue
		}
		if exp != "" && time.Now().Unix() > expires {
			return nil, http.StatusUnauthorized, "signature is already expired"
		}
		return s.live(rec)
	}
	return nil, http.StatusUnauthorized, "invalid signature"
}

// signature is envd's URL signature for a path, an operation ("read" or
// "write"), a user ("" for the default) and the sandbox's token, with an
// expiry (Unix seconds) or none ("").
func signature(path, op, user, token, exp string) string {
	raw := path + ":" + op + ":" + user + ":" + token
	if exp != "" {
		raw += ":" + exp
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

func validSignature(sig, path, op, user, token, exp string) bool {
	return subtle.ConstantTimeCompare([]byte(sig), []byte(signature(path, op, user, token, exp))) == 1
}

// admitEnvd admits an envd request through the edge as the key that
// created the sandbox: the facade mints a short-lived warren token of that
// key (or of the tenant, for a sandbox no key created), so the key's rate
// limit applies and a revoked key's sandboxes refuse envd traffic.
func (s *Server) admitEnvd(r *http.Request, rec *session.Session) (context.Context, error) {
	a := s.edge.Authenticator()
	r2 := r.Clone(r.Context())
	r2.Header.Del("X-API-Key")
	r2.Header.Del("Authorization")
	q := r2.URL.Query()
	if q.Has("token") {
		q.Del("token")
		r2.URL.RawQuery = q.Encode()
	}
	if a != nil {
		r2.Header.Set("Authorization", "Bearer "+s.envdToken(a, rec))
	}
	ctx, err := s.edge.Admit(r2)
	if err == nil && edge.TenantOf(ctx) != rec.Tenant {
		err = errdefs.New(errdefs.ErrPermissionDenied, "sandbox %q is not of your tenant", rec.ID)
	}
	return ctx, err
}

// envdToken returns a warren token for the sandbox's key, minted again a
// minute before it expires.
func (s *Server) envdToken(a *auth.Authenticator, rec *session.Session) string {
	k := rec.Tenant + "/" + rec.Labels[labelKey]
	s.tokenMu.Lock()
	defer s.tokenMu.Unlock()
	if t, ok := s.tokens[k]; ok && time.Until(t.expires) > time.Minute {
		return t.token
	}
	if len(s.tokens) > 10000 {
		clear(s.tokens)
	}
	id := &auth.Identity{Tenant: rec.Tenant, KeyID: rec.Labels[labelKey]}
	if id.KeyID == "" {
		id.Subject = "e2b-sandbox"
	}
	tok, exp := a.IssueToken(id, 5*time.Minute)
	s.tokens[k] = cachedToken{token: tok, expires: exp}
	return tok
}
