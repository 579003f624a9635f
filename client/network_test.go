package client

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/warrenhq/warren/api"
)

func TestCreateSessionWithNetwork(t *testing.T) {
	srv, got := fakeDaemon(t, 201, nil, mustJSON(t, session))
	c := New(srv.URL)
	_, err := c.CreateSession(t.Context(), &api.CreateSessionRequest{ID: "dev",
		Network: &api.NetworkPolicy{Allow: []string{"pypi.org:443"}, Deny: []string{"evil.pypi.org"}}})
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(got.body, &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"id": "dev", "network": map[string]any{"allow": []any{"pypi.org:443"}, "deny": []any{"evil.pypi.org"}}}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("create body (-want +got):\n%s", diff)
	}
}

func TestNetworkCalls(t *testing.T) {
	policy := api.NetworkPolicy{Mode: "allowlist", Allow: []string{"example.com"}}

	srv, got := fakeDaemon(t, 200, nil, mustJSON(t, policy))
	p, err := New(srv.URL).GetNetwork(t.Context(), "a/b")
	if err != nil || !cmp.Equal(*p, policy) {
		t.Errorf("GetNetwork = %+v, %v; want %+v", p, err, policy)
	}
	if got.method != "GET" || got.path != "/v1/sessions/a%2Fb/network" {
		t.Errorf("GetNetwork sent %s %s", got.method, got.path)
	}

	srv, got = fakeDaemon(t, 200, nil, mustJSON(t, policy))
	p, err = New(srv.URL).UpdateNetwork(t.Context(), "dev", &api.NetworkPolicy{Allow: []string{"example.com"}})
	if err != nil || !cmp.Equal(*p, policy) {
		t.Errorf("UpdateNetwork = %+v, %v; want %+v", p, err, policy)
	}
	if got.method != "PATCH" || got.path != "/v1/sessions/dev/network" || string(got.body) != `{"allow":["example.com"]}` {
		t.Errorf("UpdateNetwork sent %s %s %s", got.method, got.path, got.body)
	}

	denials := api.NetworkDenials{Denials: []api.NetworkDenial{{Time: t0, Host: "example.org", Proto: "dns", Reason: "not on the allow-list"}}}
	srv, got = fakeDaemon(t, 200, nil, mustJSON(t, denials))
	ds, err := New(srv.URL).NetworkDenials(t.Context(), "dev")
	if err != nil || !cmp.Equal(ds, denials.Denials) {
		t.Errorf("NetworkDenials = %+v, %v; want %+v", ds, err, denials.Denials)
	}
	if got.method != "GET" || got.path != "/v1/sessions/dev/network/denials" {
		t.Errorf("NetworkDenials sent %s %s", got.method, got.path)
	}

	// The error envelope comes back as *Error with its code.
	srv, _ = fakeDaemon(t, 409, http.Header{"Content-Type": {"application/json"}},
		`{"error":{"code":"conflict","message":"session \"dev\" was created with network none"}}`)
	_, err = New(srv.URL).UpdateNetwork(t.Context(), "dev", &api.NetworkPolicy{Mode: "open"})
	var e *Error
	if !errors.As(err, &e) || e.Code != "conflict" {
		t.Errorf("UpdateNetwork on a none session: err = %v, want conflict", err)
	}
}
