package httpapi

import (
	"net/http/httptest"
	"testing"
)

// TestStripCredentials: what the port proxy forwards to a session's
// server keeps the app's own cookies and Basic auth, and none of warren's
// credentials: keys, tokens, the preview cookie and the console's session
// cookie (which would let the sandbox act as the signed-in user).
func TestStripCredentials(t *testing.T) {
	r := httptest.NewRequest("GET", "http://warren.test/v1/sessions/s/ports/8000/x?token=wrt_x&q=1", nil)
	r.Header.Set("X-API-Key", "wrn_x")
	r.Header.Add("Cookie", "app=1; warren_console=secret; warren_preview_token=wrt_y")
	r.Header.Add("Cookie", "__Host-warren_console=secret2; theme=dark")
	stripCredentials(r)
	got := r.Header.Values("Cookie")
	if len(got) != 2 || got[0] != "app=1" || got[1] != "theme=dark" {
		t.Errorf("Cookie = %q, want the app's cookies only", got)
	}
	if r.Header.Get("X-API-Key") != "" || r.URL.RawQuery != "q=1" {
		t.Errorf("X-API-Key %q, query %q: want neither a key nor a token", r.Header.Get("X-API-Key"), r.URL.RawQuery)
	}
	r = httptest.NewRequest("GET", "http://warren.test/", nil)
	r.Header.Set("Authorization", "Basic YTpi")
	stripCredentials(r)
	if r.Header.Get("Authorization") != "Basic YTpi" {
		t.Error("the app's own Basic auth was stripped")
	}
}
