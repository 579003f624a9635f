package edge

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// placeNode is one node of a fake fleet for placement: its edge in front of
// a handler that creates, or refuses the create for the node's own reason
// (full, draining: session.NodeRefused) or for the tenant's quota.
type placeNode struct {
	name   string
	srv    *httptest.Server
	hits   atomic.Int32
	refuse atomic.Value // "", "full", "draining" or "quota"
}

// placeFleet is nodes a, b, c; a receives the creates, and its placement
// picks from order (the first not excluded), as a best-of-K with fresh
// numbers might.
type placeFleet struct {
	nodes map[string]*placeNode
	mu    sync.Mutex
	order []string
	// known, if set, is the owner of session "s" in the fleet's records.
	known string
}

func newPlaceFleet(t *testing.T) *placeFleet {
	pf := &placeFleet{nodes: map[string]*placeNode{}, order: []string{"b", "c", "a"}}
	secret := []byte(strings.Repeat("k", 32))
	for _, name := range []string{"a", "b", "c"} {
		n := &placeNode{name: name}
		n.refuse.Store("")
		e := New(Config{Log: slog.New(slog.DiscardHandler)})
		inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, err := e.Admit(r)
			if err != nil {
				e.WriteError(w, r, err)
				return
			}
			n.hits.Add(1)
			body, _ := io.ReadAll(r.Body)
			switch n.refuse.Load().(string) {
			case "full":
				e.WriteError(w, r, session.NodeRefused(ctx, errdefs.New(errdefs.ErrResourceExhausted, "the daemon holds its maximum of 1 sessions")))
			case "draining":
				e.WriteError(w, r, session.NodeRefused(ctx, errdefs.WithRetryAfter(errdefs.ErrUnavailable, time.Second, "this node is draining")))
			case "quota":
				e.WriteError(w, r, errdefs.New(errdefs.ErrResourceExhausted, "tenant default is over its sessions quota"))
			default:
				w.Header().Set("X-Created-By", name)
				w.Write([]byte(name + " " + string(body)))
			}
		})
		n.srv = httptest.NewServer(e.Forward(&Forwarding{Node: name, Secret: func() []byte { return secret },
			Locate: func(tenant, id string) Owner {
				pf.mu.Lock()
				defer pf.mu.Unlock()
				if id != "s" || pf.known == "" {
					return Owner{}
				}
				return pf.owner(name, pf.known)
			},
			Place: func(exclude []string) Owner {
				pf.mu.Lock()
				defer pf.mu.Unlock()
				for _, c := range pf.order {
					if !slices.Contains(exclude, c) {
						return pf.owner(name, c)
					}
				}
				return Owner{}
			}}, inner))
		t.Cleanup(n.srv.Close)
		pf.nodes[name] = n
	}
	return pf
}

// owner is node c as node here sees it. Preconditions: pf.mu is locked.
func (pf *placeFleet) owner(here, c string) Owner {
	return Owner{Known: true, Here: c == here, Node: c, Addr: pf.nodes[c].srv.URL, Alive: true}
}

func (pf *placeFleet) hits() string {
	var b strings.Builder
	for _, n := range []string{"a", "b", "c"} {
		b.WriteString(n + "=" + string(rune('0'+pf.nodes[n].hits.Load())) + " ")
		pf.nodes[n].hits.Store(0)
	}
	return strings.TrimSpace(b.String())
}

func (pf *placeFleet) create(t *testing.T, body string) (*http.Response, string) {
	t.Helper()
	return pf.post(t, "/v1/sessions", body)
}

func (pf *placeFleet) post(t *testing.T, path, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(pf.nodes["a"].srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestPlacementRetriesNodeRefusals: a placed create that its node refuses
// for a reason of its own (full, draining), or that cannot be reached,
// goes to another candidate, with its body, each one hop from the
// receiving node, at most three nodes in all; a refusal for the tenant's quota, a create of an id the fleet knows
// and the last try's refusal reach the client as they are.
func TestPlacementRetriesNodeRefusals(t *testing.T) {
	pf := newPlaceFleet(t)
	set := func(a, b, c string) {
		pf.nodes["a"].refuse.Store(a)
		pf.nodes["b"].refuse.Store(b)
		pf.nodes["c"].refuse.Store(c)
	}

	// b (the first pick) is full: c takes the create, body and all.
	set("", "full", "")
	resp, body := pf.create(t, `{"image":"x"}`)
	if resp.StatusCode != 200 || body != `c {"image":"x"}` || resp.Header.Get(NodeRefusedHeader) != "" {
		t.Fatalf("create with b full = %d %q (%v), want c creating it", resp.StatusCode, body, resp.Header)
	}
	if h := pf.hits(); h != "a=0 b=1 c=1" {
		t.Fatalf("hits %s, want b refusing once and c creating", h)
	}

	// The creates of the other transports that carry a whole body: MCP's
	// create_session and a Connect (JSON) CreateSession, and E2B's.
	for _, c := range []struct{ path, body string }{
		{"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_session","arguments":{"id":"m1"}}}`},
		{rpcCreate, `{"id":"r1"}`},
		{"/e2b/sandboxes", `{"templateID":"base"}`},
	} {
		if resp, body := pf.post(t, c.path, c.body); resp.StatusCode != 200 || body != "c "+c.body {
			t.Fatalf("%s with b full = %d %q, want c creating it", c.path, resp.StatusCode, body)
		}
		if h := pf.hits(); h != "a=0 b=1 c=1" {
			t.Fatalf("%s: hits %s, want b refusing once and c creating", c.path, h)
		}
	}

	// A draining node is passed over the same way.
	set("", "draining", "")
	if resp, body := pf.create(t, `{}`); resp.StatusCode != 200 || !strings.HasPrefix(body, "c ") || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("create with b draining = %d %q (%v), want c creating it", resp.StatusCode, body, resp.Header)
	}
	pf.hits()

	// The tenant's quota holds fleet-wide: b's refusal is the client's,
	// and no other node is asked.
	set("", "quota", "")
	if resp, body := pf.create(t, `{}`); resp.StatusCode != 429 || !strings.Contains(body, "quota") {
		t.Fatalf("create over the tenant's quota = %d %q, want b's 429", resp.StatusCode, body)
	}
	if h := pf.hits(); h != "a=0 b=1 c=0" {
		t.Fatalf("hits %s, want b alone", h)
	}

	// Every node full: b, c, then a itself (the third and last try),
	// whose own refusal is the answer; nothing is asked twice.
	set("full", "full", "full")
	if resp, body := pf.create(t, `{}`); resp.StatusCode != 429 || !strings.Contains(body, "maximum") || resp.Header.Get(NodeRefusedHeader) != "" {
		t.Fatalf("create with every node full = %d %q (%v), want 429", resp.StatusCode, body, resp.Header)
	}
	if h := pf.hits(); h != "a=1 b=1 c=1" {
		t.Fatalf("hits %s, want each node asked once", h)
	}

	// This node is the first pick and is full (its own free count was
	// stale): its refusal is dropped, headers and all, and b takes it.
	pf.mu.Lock()
	pf.order = []string{"a", "b", "c"}
	pf.mu.Unlock()
	set("draining", "", "")
	resp, body = pf.create(t, `{"id":"new"}`)
	if resp.StatusCode != 200 || body != `b {"id":"new"}` || resp.Header.Get("Retry-After") != "" || resp.Header.Get("X-Created-By") != "b" {
		t.Fatalf("create with a (picked) draining = %d %q (%v), want b creating it", resp.StatusCode, body, resp.Header)
	}
	if h := pf.hits(); h != "a=1 b=1 c=0" {
		t.Fatalf("hits %s, want a refusing and b creating", h)
	}

	// A node that cannot be reached (dead, its entry not gone yet): the
	// create never reached it and goes to the next.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	pf.mu.Lock()
	pf.order = []string{"dead", "c", "b"}
	pf.nodes["dead"] = &placeNode{name: "dead", srv: dead}
	pf.mu.Unlock()
	set("", "", "")
	if resp, body := pf.create(t, `{"id":"x"}`); resp.StatusCode != 200 || body != `c {"id":"x"}` {
		t.Fatalf("create with the first pick unreachable = %d %q, want c creating it", resp.StatusCode, body)
	}
	if h := pf.hits(); h != "a=0 b=0 c=1" {
		t.Fatalf("hits %s, want c alone", h)
	}

	// A create of an id the fleet knows goes to its owner, whose refusal
	// is the client's: it is not placed.
	pf.mu.Lock()
	pf.known = "c"
	pf.mu.Unlock()
	set("", "", "full")
	if resp, _ := pf.create(t, `{"id":"s"}`); resp.StatusCode != 429 {
		t.Fatalf("create of a known id on a full owner = %d, want 429", resp.StatusCode)
	}
	if h := pf.hits(); h != "a=0 b=0 c=1" {
		t.Fatalf("hits %s, want c alone", h)
	}
}
