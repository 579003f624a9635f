package e2b

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// snapshotInfo is E2B's SnapshotInfo. A warren snapshot's name is its E2B
// id: Sandbox.create(snapshotID) starts from it and DELETE
// /templates/{snapshotID} deletes it.
type snapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

func snapshotOf(sn *session.SnapshotInfo) snapshotInfo {
	return snapshotInfo{SnapshotID: sn.Name, Names: []string{sn.Name}}
}

// createSnapshot serves POST /sandboxes/{id}/snapshots: the sandbox's
// files, taken with its processes frozen for the copy (warren's layers
// service), under the name asked for or a new one.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if err := decode(r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	name := req.Name
	if name == "" {
		b := make([]byte, 8)
		rand.Read(b)
		name = "snapshot-" + hex.EncodeToString(b)
	}
	ctx := r.Context()
	rec, err := s.record(ctx, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sn, err := s.mgr.Layers().Snapshot(ctx, rec.Tenant, rec.ID, name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, snapshotOf(sn))
}

// listSnapshots serves GET /snapshots, filtered by source sandbox and by
// name, a page at a time.
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			s.writeError(w, r, invalid("limit %q: want 1 to 100", v))
			return
		}
		limit = n
	}
	after := ""
	if v := q.Get("nextToken"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil {
			s.writeError(w, r, invalid("nextToken %q is not a token this API gave", v))
			return
		}
		after = string(b)
	}
	name, _, _ := strings.Cut(q.Get("name"), ":")
	ctx := r.Context()
	all, err := s.mgr.Layers().ListSnapshots(ctx, edge.TenantOf(ctx))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var out []*session.SnapshotInfo
	for _, sn := range all {
		if sn.AutoDelete || (name != "" && sn.Name != name) || (q.Get("sandboxID") != "" && sn.Session != q.Get("sandboxID")) {
			continue
		}
		out = append(out, sn)
	}
	key := func(sn *session.SnapshotInfo) string {
		return sn.CreatedAt.UTC().Format(time.RFC3339Nano) + "/" + sn.Name
	}
	slices.SortFunc(out, func(a, b *session.SnapshotInfo) int { return strings.Compare(key(b), key(a)) })
	if after != "" {
		i := 0
		for i < len(out) && key(out[i]) >= after {
			i++
		}
		out = out[i:]
	}
	page := out[:min(len(out), limit)]
	if len(out) > len(page) {
		w.Header().Set("X-Next-Token", base64.RawURLEncoding.EncodeToString([]byte(key(page[len(page)-1]))))
	}
	res := make([]snapshotInfo, 0, len(page))
	for _, sn := range page {
		res = append(res, snapshotOf(sn))
	}
	writeJSON(w, http.StatusOK, res)
}

// deleteTemplate serves DELETE /templates/{id}, which is how the SDK
// deletes a snapshot. warren's images are not E2B templates one deletes
// through this API (warren image rm does): any other id is 404.
func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name, _, _ := strings.Cut(r.PathValue("id"), ":")
	err := s.mgr.Layers().DeleteSnapshot(ctx, edge.TenantOf(ctx), name)
	if errdefs.Is(err, errdefs.ErrNotFound) || errdefs.Is(err, errdefs.ErrInvalidArgument) {
		err = errdefs.New(errdefs.ErrNotFound, "template %q not found", r.PathValue("id"))
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// forkResult is E2B's SandboxForkResult: a sandbox or an error.
type forkResult struct {
	Sandbox *sandbox  `json:"sandbox,omitempty"`
	Error   *apiError `json:"error,omitempty"`
}

// fork serves POST /sandboxes/{id}/fork: count new sandboxes from a copy
// of the sandbox's files (warren's fork: its processes are frozen for the
// copy; the forks start fresh processes on the copied files), each with
// its own timeout from now and the source's metadata.
func (s *Server) fork(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Timeout *int64 `json:"timeout"`
		Count   *int   `json:"count"`
	}
	if err := decode(r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	timeout, err := timeoutOf(req.Timeout)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	count := 1
	if req.Count != nil {
		count = *req.Count
	}
	if count < 1 || count > 100 {
		s.writeError(w, r, invalid("count must be 1 to 100"))
		return
	}
	ctx := r.Context()
	rec, err := s.record(ctx, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	_, forks, err := s.mgr.Layers().Fork(ctx, rec.Tenant, rec.ID, &session.ForkRequest{Count: count})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]forkResult, 0, len(forks))
	for _, f := range forks {
		labels := map[string]string{}
		for _, k := range []string{labelTemplate, labelOnTimeout, labelAutoResume, labelInternet} {
			if v := rec.Labels[k]; v != "" {
				labels[k] = v
			}
		}
		if id := edge.IdentityOf(ctx); id != nil && id.KeyID != "" {
			labels[labelKey] = id.KeyID
		}
		end := time.Now().Add(timeout)
		labels[labelEnd] = end.UTC().Format(time.RFC3339Nano)
		info, err := s.mgr.Amend(ctx, rec.Tenant, f.ID, session.Amendment{Labels: labels, ExpiresAt: end})
		if err != nil {
			if derr := s.mgr.Delete(context.WithoutCancel(ctx), rec.Tenant, f.ID); derr != nil {
				s.log.Warn("e2b: delete a fork whose records failed", "tenant", rec.Tenant, "session_id", f.ID, "error", derr)
			}
			st := edge.StatusOf(edge.ClassOf(ctx, err))
			out = append(out, forkResult{Error: &apiError{Code: st, Message: err.Error()}})
			continue
		}
		sb := s.sandboxOf(&info.Session)
		out = append(out, forkResult{Sandbox: &sb})
	}
	writeJSON(w, http.StatusCreated, out)
}

// templateAlias serves GET /templates/aliases/{alias}: 200 for a template
// Sandbox.create would start (base, an image, a snapshot of the tenant),
// 404 otherwise. It checks without building the base image.
func (s *Server) templateAlias(w http.ResponseWriter, r *http.Request) {
	alias := r.PathValue("alias")
	ctx := r.Context()
	name, _, _ := strings.Cut(alias, ":")
	found := name == BaseTemplate || name == mcpTemplate
	if !found {
		if _, err := s.mgr.Layers().GetSnapshot(ctx, edge.TenantOf(ctx), name); err == nil {
			found = true
		} else if _, err := s.images.Get(alias); err == nil {
			found = true
		}
	}
	if !found {
		s.writeError(w, r, errdefs.New(errdefs.ErrNotFound, "template %q not found", alias))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"templateID": alias, "public": true})
}
