package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRenewSession checks that RenewSession uses the session (a stat of
// "/") before it describes it, so that the answer has the renewed expiry.
func TestRenewSession(t *testing.T) {
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, r.Method+" "+r.URL.EscapedPath()+"?"+r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/sessions/demo/files/stat" {
			json.NewEncoder(w).Encode(entry)
			return
		}
		json.NewEncoder(w).Encode(session)
	}))
	defer srv.Close()
	s, err := New(srv.URL).RenewSession(context.Background(), "demo")
	if err != nil {
		t.Fatalf("RenewSession: %v", err)
	}
	if !s.ExpiresAt.Equal(session.ExpiresAt) {
		t.Errorf("RenewSession().ExpiresAt = %v, want %v", s.ExpiresAt, session.ExpiresAt)
	}
	want := []string{"GET /v1/sessions/demo/files/stat?path=%2F", "GET /v1/sessions/demo?"}
	if len(calls) != 2 || calls[0] != want[0] || calls[1] != want[1] {
		t.Errorf("RenewSession called %q, want %q", calls, want)
	}
}

func TestPortURL(t *testing.T) {
	got := New("http://127.0.0.1:7433/prefix/").PortURL("a b", 8000)
	if want := "http://127.0.0.1:7433/prefix/v1/sessions/a%20b/ports/8000/"; got != want {
		t.Errorf("PortURL = %q, want %q", got, want)
	}
}
