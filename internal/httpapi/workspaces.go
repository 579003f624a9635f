package httpapi

import (
	"net/http"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// Workspaces, snapshots and fork: thin handlers over the session manager
// (internal/session/workspaces.go and snapshots.go).

func toAPIWorkspace(in *session.WorkspaceInfo) api.Workspace {
	out := api.Workspace{Name: in.Name, SizeMB: in.SizeMB, Shared: in.Shared, UsedBytes: in.UsedBytes, CreatedAt: in.CreatedAt,
		MountedBy: make([]api.WorkspaceMount, 0, len(in.MountedBy))}
	for _, mb := range in.MountedBy {
		out.MountedBy = append(out.MountedBy, api.WorkspaceMount{Session: mb.Session, Mode: mb.Mode})
	}
	return out
}

func toAPISnapshot(in *session.SnapshotInfo) api.Snapshot {
	used := in.UsedBy
	if used == nil {
		used = []string{}
	}
	return api.Snapshot{Name: in.Name, Image: in.Image, ImageDigest: in.ImageDigest, Session: in.Session, SizeBytes: in.SizeBytes,
		CreatedAt: in.CreatedAt, AutoDelete: in.AutoDelete, UsedBy: used}
}

func (s *Server) createWorkspace(w http.ResponseWriter, r *http.Request) {
	var req api.CreateWorkspaceRequest
	if err := decodeJSON(r, &req, s.cfg.MaxJSONBytes, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	ws, err := s.m.Layers().CreateWorkspace(r.Context(), tenant(r), req.Name, req.SizeMB, req.Shared)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, toAPIWorkspace(ws))
}

func (s *Server) listWorkspaces(w http.ResponseWriter, r *http.Request) {
	wss, err := s.m.Layers().ListWorkspaces(r.Context(), tenant(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.WorkspaceList{Workspaces: make([]api.Workspace, 0, len(wss))}
	for _, ws := range wss {
		out.Workspaces = append(out.Workspaces, toAPIWorkspace(ws))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getWorkspace(w http.ResponseWriter, r *http.Request) {
	ws, err := s.m.Layers().GetWorkspace(r.Context(), tenant(r), r.PathValue("name"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPIWorkspace(ws))
}

func (s *Server) deleteWorkspace(w http.ResponseWriter, r *http.Request) {
	if err := s.m.Layers().DeleteWorkspace(r.Context(), tenant(r), r.PathValue("name")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// sessionExists answers 404 for a session the caller does not have, before
// its request's body is looked at: another tenant's session is as absent
// as a missing one, whatever the body says.
func (s *Server) sessionExists(w http.ResponseWriter, r *http.Request) bool {
	if _, err := s.m.Get(r.Context(), tenant(r), r.PathValue("id")); err != nil {
		s.writeError(w, r, err)
		return false
	}
	return true
}

func (s *Server) snapshotSession(w http.ResponseWriter, r *http.Request) {
	if !s.sessionExists(w, r) {
		return
	}
	var req api.SnapshotRequest
	if err := decodeJSON(r, &req, s.cfg.MaxJSONBytes, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	sn, err := s.m.Layers().Snapshot(r.Context(), tenant(r), r.PathValue("id"), req.Name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, toAPISnapshot(sn))
}

func (s *Server) forkSession(w http.ResponseWriter, r *http.Request) {
	if !s.sessionExists(w, r) {
		return
	}
	var req api.ForkRequest
	if err := decodeJSON(r, &req, s.cfg.MaxJSONBytes, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Count == 0 && len(req.IDs) == 0 {
		req.Count = 1
	}
	sn, sessions, err := s.m.Layers().Fork(r.Context(), tenant(r), r.PathValue("id"), &session.ForkRequest{Count: req.Count, IDs: req.IDs, Snapshot: req.Snapshot})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.ForkResult{Snapshot: toAPISnapshot(sn), Sessions: make([]api.Session, 0, len(sessions))}
	for _, info := range sessions {
		out.Sessions = append(out.Sessions, toAPISession(info))
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	sns, err := s.m.Layers().ListSnapshots(r.Context(), tenant(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.SnapshotList{Snapshots: make([]api.Snapshot, 0, len(sns))}
	for _, sn := range sns {
		out.Snapshots = append(out.Snapshots, toAPISnapshot(sn))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	sn, err := s.m.Layers().GetSnapshot(r.Context(), tenant(r), r.PathValue("name"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPISnapshot(sn))
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	if err := s.m.Layers().DeleteSnapshot(r.Context(), tenant(r), r.PathValue("name")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// startedWriter notes whether the response has begun.
type startedWriter struct {
	w       http.ResponseWriter
	started bool
}

func (sw *startedWriter) Write(b []byte) (int, error) {
	if !sw.started {
		sw.started = true
		sw.w.Header().Set("Content-Type", "application/zstd")
		sw.w.WriteHeader(http.StatusOK)
	}
	return sw.w.Write(b)
}

func (s *Server) exportSnapshot(w http.ResponseWriter, r *http.Request) {
	sw := &startedWriter{w: w}
	if err := s.m.Layers().ExportSnapshot(r.Context(), tenant(r), r.PathValue("name"), sw); err != nil {
		if !sw.started {
			s.writeError(w, r, err)
			return
		}
		// The archive is cut short: break the connection so the client
		// cannot take it for a whole one.
		panic(http.ErrAbortHandler)
	}
}

func (s *Server) importSnapshot(w http.ResponseWriter, r *http.Request) {
	var opts []session.ImportOption
	switch r.URL.Query().Get("auto_delete") {
	case "", "false":
	case "true":
		opts = append(opts, session.ImportAutoDelete())
	default:
		s.writeError(w, r, errdefs.New(errdefs.ErrInvalidArgument, "auto_delete must be true or false"))
		return
	}
	sn, err := s.m.Layers().ImportSnapshot(r.Context(), tenant(r), r.PathValue("name"), http.MaxBytesReader(w, r.Body, s.cfg.MaxImageBytes), opts...)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, toAPISnapshot(sn))
}
