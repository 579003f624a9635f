package mcpapi

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/errdefs"
)

// netBackend keeps the create request and answers denials for session
// "dev" only.
type netBackend struct {
	Backend
	got     *api.CreateSessionRequest
	denials []api.NetworkDenial
}

func (b *netBackend) CreateSession(_ context.Context, req *api.CreateSessionRequest) (*api.Session, error) {
	b.got = req
	return &api.Session{ID: "dev", State: "running"}, nil
}

func (b *netBackend) NetworkDenials(_ context.Context, id string) ([]api.NetworkDenial, error) {
	if id != "dev" {
		return nil, errdefs.New(errdefs.ErrNotFound, "session %q not found", id)
	}
	return b.denials, nil
}

func TestCreateSessionNetwork(t *testing.T) {
	b := &netBackend{}
	cs := connect(t, b)
	var s Session
	if text, isErr := callTool(t, cs, "create_session", map[string]any{"id": "dev",
		"network": map[string]any{"allow": []string{"pypi.org:443"}, "deny": []string{"evil.pypi.org"}}}, &s); isErr {
		t.Fatalf("create_session failed: %s", text)
	}
	want := &api.NetworkPolicy{Allow: []string{"pypi.org:443"}, Deny: []string{"evil.pypi.org"}}
	if b.got == nil || !cmp.Equal(b.got.Network, want) {
		t.Errorf("create request network = %+v, want %+v", b.got, want)
	}
	// Without network the request has none: the daemon's default (none).
	if text, isErr := callTool(t, cs, "create_session", map[string]any{"id": "dev"}, &s); isErr {
		t.Fatalf("create_session failed: %s", text)
	}
	if b.got.Network != nil {
		t.Errorf("create without network sent %+v", b.got.Network)
	}
	// A mode that is not a string is refused by the schema.
	if _, isErr := callTool(t, cs, "create_session", map[string]any{"network": map[string]any{"mode": 3}}, nil); !isErr {
		t.Error("create_session with a numeric mode succeeded")
	}
}

func TestNetworkDenialsTool(t *testing.T) {
	at := time.Date(2026, 11, 26, 13, 0, 0, 0, time.UTC)
	b := &netBackend{denials: []api.NetworkDenial{
		{Time: at, Host: "example.com", Proto: "dns", Reason: "not on the allow-list"},
		{Time: at, Host: "198.51.100.20", Port: 443, Proto: "tcp", Reason: "no allowed name resolved to this address"},
	}}
	cs := connect(t, b)
	var out NetworkDenials
	if text, isErr := callTool(t, cs, "network_denials", map[string]any{"session_id": "dev"}, &out); isErr {
		t.Fatalf("network_denials failed: %s", text)
	}
	if diff := cmp.Diff(b.denials, out.Denials); diff != "" {
		t.Errorf("denials (-want +got):\n%s", diff)
	}

	// None yet is an empty list, not null.
	b.denials = nil
	out = NetworkDenials{}
	if text, isErr := callTool(t, cs, "network_denials", map[string]any{"session_id": "dev"}, &out); isErr || out.Denials == nil {
		t.Errorf("network_denials with none = %+v (%s), want an empty list", out, text)
	}

	text, isErr := callTool(t, cs, "network_denials", map[string]any{"session_id": "nope"}, nil)
	if !isErr {
		t.Errorf("network_denials of a missing session succeeded: %s", text)
	}
	if code, _, _ := ParseToolError(text); code != "not_found" {
		t.Errorf("error text %q: want code not_found", text)
	}
}
