package httpapi

import (
	"net/http"

	"github.com/warrenhq/warren/internal/errdefs"
)

// metrics serves the Prometheus metrics to admins: they name tenants
// (warren_tenant_sessions), which no tenant may learn of another.
// Prometheus sends the admin key with its scrape config's bearer_token.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if err := requireAdmin(r, "reading the metrics"); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.cfg.Metrics == nil {
		s.writeError(w, r, errdefs.New(errdefs.ErrNotFound, "this daemon keeps no metrics"))
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}
