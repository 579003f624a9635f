package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestFleetPlacementSurvivesStaleCapacity: a burst of creates through one
// node of two, as many as the fleet holds, over REST, E2B, Connect and MCP. Every node
// publishes its free capacity about 200 ms after a change, so placement
// sends some creates to a node that just filled up; it refuses them for
// its own reason (full), and the receiving node places them on the other.
// Every create lands; the one past the fleet's capacity is refused (429).
func TestFleetPlacementSurvivesStaleCapacity(t *testing.T) {
	testutil.RequiresRoot(t)
	_, nodes, reg := newFleet(t, 2, embeddedEtcd(t))
	n0, n1 := nodes[0], nodes[1]
	// The tenant may hold more than the fleet: only the nodes' capacity
	// refuses here.
	if _, err := n0.c.PutTenant(bg, "burst", &api.Tenant{Quota: api.TenantQuota{MaxSessions: 2*capacity + 1}}); err != nil {
		t.Fatal(err)
	}
	k, err := n0.c.CreateKey(bg, &api.CreateKeyRequest{Tenant: "burst"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "n1 sees burst's settings and key", func() bool {
		tn, err := n1.c.GetTenant(bg, "burst")
		_, err2 := client.New(n1.url, client.WithToken(k.Secret)).ListSessions(bg)
		return err == nil && tn.Quota.MaxSessions == 2*capacity+1 && err2 == nil
	})
	c := client.New(n0.url, client.WithToken(k.Secret))
	post := func(path, body string, hdr ...string) (int, string) {
		req, _ := http.NewRequest("POST", n0.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+k.Secret)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// create makes session i over REST, E2B, Connect (JSON) or MCP, in
	// turn, and returns its id.
	create := func(i int) (string, error) {
		id := fmt.Sprint("burst", i)
		switch i % 4 {
		case 0:
			_, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: id})
			return id, err
		case 1:
			st, b := post("/e2b/sandboxes", `{"templateID":"base","timeout":120}`)
			var sb struct{ SandboxID string }
			if st != http.StatusCreated || json.Unmarshal([]byte(b), &sb) != nil {
				return "", fmt.Errorf("E2B: %d %s", st, b)
			}
			return sb.SandboxID, nil
		case 2:
			if st, b := post("/warren.v1.SessionService/CreateSession", `{"id":"`+id+`"}`); st != http.StatusOK {
				return "", fmt.Errorf("Connect: %d %s", st, b)
			}
			return id, nil
		default:
			st, b := post("/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"create_session","arguments":{"id":"`+id+`"}}}`,
				"Accept", "application/json, text/event-stream", "Mcp-Protocol-Version", "2025-11-25")
			if st != http.StatusOK || strings.Contains(b, `"isError":true`) {
				return "", fmt.Errorf("MCP: %d %s", st, b)
			}
			return id, nil
		}
	}
	var (
		mu   sync.Mutex
		ids  []string
		errs []string
		wg   sync.WaitGroup
	)
	t.Cleanup(func() {
		for _, id := range ids {
			_ = c.DeleteSession(bg, id)
		}
	})
	for i := range 2 * capacity {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := create(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err.Error())
				return
			}
			ids = append(ids, id)
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d creates through n0 failed while the fleet had room:\n%s", len(errs), 2*capacity, strings.Join(errs, "\n"))
	}
	for _, n := range nodes {
		recs, err := reg.NodeSessions(bg, n.name)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != capacity {
			t.Fatalf("%s holds %d sessions, want %d (its capacity)", n.name, len(recs), capacity)
		}
	}
	// The fleet is full: the next create is refused by the last node it
	// tries, as a full single node refuses it.
	_, err = c.CreateSession(bg, &api.CreateSessionRequest{ID: "onetoomany"})
	if status(err) != http.StatusTooManyRequests || !strings.Contains(err.Error(), "maximum") {
		t.Fatalf("a create past the fleet's capacity = %v, want 429 (a node's maximum)", err)
	}
}
