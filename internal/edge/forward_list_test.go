package edge

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/internal/session"
)

// TestFleetList: a's FleetLister asks b (signed, answered by b alone,
// for the caller's tenant), names the node that did not answer and the
// dead one as missing, and adds the lost records, each with its node.
func TestFleetList(t *testing.T) {
	secret := []byte(strings.Repeat("k", 32))
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	var peersCalled [2]atomic.Int32
	var served [2]atomic.Int32
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // a node whose entry is still there but which does not answer
	var bURL string
	type answer struct {
		infos   []*session.Info
		missing []string
	}
	answers := make(chan answer, 4)
	mk := func(i int, name string, own ...string) *httptest.Server {
		e := New(Config{Log: slog.New(slog.DiscardHandler)})
		f := &Forwarding{Node: name, Secret: func() []byte { return secret },
			Locate: func(string, string) Owner { return Owner{} },
			Peers: func(tenant string) ([]Owner, []LostSession) {
				peersCalled[i].Add(1)
				return []Owner{{Known: true, Node: "b", Addr: bURL, Alive: true}, {Known: true, Node: "c", Addr: gone.URL, Alive: true}, {Known: true, Node: "d"}},
					[]LostSession{{Tenant: tenant, ID: "l1", Node: "d", Created: t0.Add(2 * time.Minute), LostAt: t0.Add(5 * time.Minute)}}
			}}
		lister := e.FleetLister(f)
		inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, err := e.Admit(r)
			if err != nil {
				e.WriteError(w, r, err)
				return
			}
			served[i].Add(1)
			infos, missing := lister(ctx, TenantOf(ctx))
			answers <- answer{infos, missing}
			l := api.SessionList{Sessions: []api.Session{}}
			for j, id := range own {
				l.Sessions = append(l.Sessions, api.Session{ID: id, State: "running", CreatedAt: t0.Add(time.Duration(j) * time.Minute)})
			}
			WriteJSON(w, http.StatusOK, l)
		})
		return httptest.NewServer(e.Forward(f, inner))
	}
	a := mk(0, "a", "a1")
	b := mk(1, "b", "b0", "b2")
	bURL = b.URL
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)

	if st, body := do(t, "GET", a.URL+"/v1/sessions", "", nil); st != http.StatusOK {
		t.Fatalf("list = %d %s", st, body)
	}
	bAns, aAns := <-answers, <-answers // b answers inside a's call
	if len(bAns.infos) != 0 || len(bAns.missing) != 0 {
		t.Fatalf("b, asked by a, listed peers too: %+v", bAns)
	}
	var got []string
	for _, in := range aAns.infos {
		got = append(got, fmt.Sprintf("%s/%s:%s@%s", in.Tenant, in.ID, in.State, in.Node))
	}
	tn := noAuthIdentity.Tenant
	if want := fmt.Sprintf("%s/b0:running@b %s/b2:running@b %s/l1:lost@d", tn, tn, tn); strings.Join(got, " ") != want {
		t.Fatalf("a's peers' sessions = %v, want %s", got, want)
	}
	if lost := aAns.infos[2]; !lost.ExpiresAt().Equal(t0.Add(5 * time.Minute)) {
		t.Fatalf("the lost session expires at %v, want when it was lost", lost.ExpiresAt())
	}
	if strings.Join(aAns.missing, ",") != "c,d" {
		t.Fatalf("missing = %v, want c,d", aAns.missing)
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
