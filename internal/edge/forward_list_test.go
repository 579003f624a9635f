package edge

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestFleetList: a list through a asks b (signed, answered by b alone),
// names the node that did not answer and the dead one in PartialHeader,
// adds the lost records and merges everything by created_at, then id.
func TestFleetList(t *testing.T) {
	secret := []byte(strings.Repeat("k", 32))
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var peersCalled [2]atomic.Int32
	var served [2]atomic.Int32
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // a node whose entry is still there but which does not answer
	var bURL string
	mk := func(i int, name string, sessions string) *httptest.Server {
		e := New(Config{Log: slog.New(slog.DiscardHandler)})
		inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, err := e.Admit(r)
			if err != nil {
				e.WriteError(w, r, err)
				return
			}
			served[i].Add(1)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"sessions":[%s]}`, strings.ReplaceAll(sessions, "TENANT", TenantOf(ctx)))
		})
		return httptest.NewServer(e.Forward(&Forwarding{Node: name, Secret: func() []byte { return secret },
			Locate: func(string, string) Owner { return Owner{} },
			Peers: func(tenant string) ([]Owner, []LostSession) {
				peersCalled[i].Add(1)
				return []Owner{{Known: true, Node: "b", Addr: bURL, Alive: true}, {Known: true, Node: "c", Addr: gone.URL, Alive: true}, {Known: true, Node: "d"}},
					[]LostSession{{Tenant: tenant, ID: "l1", Node: "d", Created: t0.Add(2 * time.Minute)}}
			}}, inner))
	}
	ses := func(id string, min int) string {
		return fmt.Sprintf(`{"id":%q,"state":"running","created_at":%q,"x":"TENANT"}`, id, t0.Add(time.Duration(min)*time.Minute).Format(time.RFC3339))
	}
	a := mk(0, "a", ses("a3", 3)+","+ses("a1", 1))
	b := mk(1, "b", ses("b0", 0)+","+ses("b2", 2))
	bURL = b.URL
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)

	resp, err := http.Get(a.URL + "/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct {
		Sessions []struct{ ID, State, X string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || resp.StatusCode != 200 {
		t.Fatalf("list = %d, %v", resp.StatusCode, err)
	}
	var got []string
	for _, s := range l.Sessions {
		got = append(got, s.ID+":"+s.State)
		if s.State == "running" && s.X != noAuthIdentity.Tenant {
			t.Errorf("%s was listed for tenant %q, want the caller's %q", s.ID, s.X, noAuthIdentity.Tenant)
		}
	}
	if want := "b0:running a1:running b2:running l1:lost a3:running"; strings.Join(got, " ") != want {
		t.Fatalf("merged list = %v, want %s", got, want)
	}
	if p := resp.Header.Get(PartialHeader); p != "c,d" {
		t.Fatalf("%s = %q, want c,d", PartialHeader, p)
	}
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	// b answered once, alone: a signed list does not fan out again.
	if served[1].Load() != 1 || peersCalled[1].Load() != 0 || peersCalled[0].Load() != 1 {
		t.Fatalf("b served %d, b's peers asked %d times, a's %d; want 1, 0, 1", served[1].Load(), peersCalled[1].Load(), peersCalled[0].Load())
	}
	// A list with a forged or an anonymous hop header is refused.
	for name, v := range map[string]string{"forged": "e30.AAAA", "anonymous": sign(secret, nil, httptest.NewRequest("GET", "/v1/sessions", nil), "x")} {
		if st, body := do(t, "GET", b.URL+"/v1/sessions", "", map[string]string{ForwardHeader: v}); st != http.StatusUnauthorized {
			t.Fatalf("a %s hop on a list = %d %s, want 401", name, st, body)
		}
	}
}
