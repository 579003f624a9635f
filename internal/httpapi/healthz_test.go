package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestHealthzBuild: /healthz says which build answers, without a
// credential.
func TestHealthzBuild(t *testing.T) {
	s := New(Config{Version: "v1.2.3"})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /healthz: %d %s", rec.Code, rec.Body)
	}
	var body map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("GET /healthz body %q: %v", rec.Body, err)
	}
	if body["status"] != "ok" || body["version"] != "v1.2.3" || body["commit"] == "" {
		t.Errorf("GET /healthz = %v, want status ok, version v1.2.3 and a commit", body)
	}
}
