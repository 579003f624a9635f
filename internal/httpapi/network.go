package httpapi

import (
	"net/http"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/session"
)

// getNetwork answers a session's egress policy.
func (s *Server) getNetwork(w http.ResponseWriter, r *http.Request) {
	p, err := s.m.SessionNetwork(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPINetwork(p))
}

// patchNetwork replaces a session's egress policy live: the body's mode
// (default: the current one) with its allow and deny rules, applied whole
// or not at all.
func (s *Server) patchNetwork(w http.ResponseWriter, r *http.Request) {
	var req api.NetworkPolicy
	if err := decodeJSON(r, &req, s.cfg.MaxJSONBytes, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := s.m.SetSessionNetwork(r.Context(), tenant(r), r.PathValue("id"),
		session.NetworkPolicy{Mode: req.Mode, Allow: req.Allow, Deny: req.Deny})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAPINetwork(p))
}

// networkDenials lists what a session's policy refused lately.
func (s *Server) networkDenials(w http.ResponseWriter, r *http.Request) {
	ds, err := s.m.NetworkDenials(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := api.NetworkDenials{Denials: make([]api.NetworkDenial, len(ds))}
	for i, d := range ds {
		out.Denials[i] = api.NetworkDenial{Time: d.Time, Host: d.Host, Port: d.Port, Proto: d.Proto, Reason: d.Reason}
	}
	writeJSON(w, http.StatusOK, out)
}

func toAPINetwork(p *session.NetworkPolicy) api.NetworkPolicy {
	return api.NetworkPolicy{Mode: p.Mode, Allow: p.Allow, Deny: p.Deny}
}
