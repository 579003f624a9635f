package edge

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/session"
)

// logged returns the JSON lines of buf.
func logged(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestRequestIDSanity(t *testing.T) {
	tests := []struct {
		header string
		kept   bool
	}{
		{"abc-123", true},
		{"0f8fad5b-d9cb-469f-a165-70867728950e", true},
		{"trace:1/2+3=4.5_6", true},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{"", false},
		{"with space", false},
		{"-leading", false},
		{"quote\"", false},
		{"naïve", false},
	}
	for _, tc := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.header != "" {
			r.Header.Set(RequestIDHeader, tc.header)
		}
		got := requestID(r)
		if kept := got == tc.header; kept != tc.kept {
			t.Errorf("requestID(%q) = %q, kept %v, want kept %v", tc.header, got, kept, tc.kept)
		}
		if !tc.kept && len(got) != 24 {
			t.Errorf("requestID(%q) = %q, want 24 hex characters", tc.header, got)
		}
	}
}

func TestObserve(t *testing.T) {
	var buf bytes.Buffer
	s := New(Config{Log: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	var inner string
	h := s.Observe(s.Observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner = session.RequestID(r.Context())
		SetRoute(r.Context(), "GET /v1/sessions/{id}")
		w.WriteHeader(http.StatusTeapot)
	})))
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/v1/sessions/x", nil)
	r.Header.Set(RequestIDHeader, "req-1")
	h.ServeHTTP(rec, r)
	if rec.Header().Get(RequestIDHeader) != "req-1" || inner != "req-1" {
		t.Errorf("X-Request-ID = %q, context id = %q; want req-1 for both", rec.Header().Get(RequestIDHeader), inner)
	}
	lines := logged(t, &buf)
	if len(lines) != 1 {
		t.Fatalf("a request wrapped twice wrote %d access lines, want 1: %v", len(lines), lines)
	}
	l := lines[0]
	if l["msg"] != "request" || l["status"] != float64(http.StatusTeapot) || l["route"] != "GET /v1/sessions/{id}" || l["request_id"] != "req-1" || l["level"] != "INFO" {
		t.Errorf("access line = %v", l)
	}

	// A panic is logged as aborted and passed on.
	buf.Reset()
	h = s.Observe(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	func() {
		defer func() {
			if v := recover(); v != http.ErrAbortHandler {
				t.Errorf("recovered %v, want http.ErrAbortHandler", v)
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/mcp", nil))
	}()
	if l := logged(t, &buf)[0]; l["aborted"] != true || l["path"] != "/mcp" {
		t.Errorf("access line of an aborted request = %v", l)
	}
}
