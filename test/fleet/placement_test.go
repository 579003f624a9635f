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
// node of two, as many as the fleet holds, REST and E2B mixed. Every node
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
	e2bCreate := func() (int, string, string) {
		req, _ := http.NewRequest("POST", n0.url+"/e2b/sandboxes", strings.NewReader(`{"templateID":"base","timeout":120}`))
		req.Header.Set("Authorization", "Bearer "+k.Secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1, "", err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var sb struct{ SandboxID string }
		_ = json.Unmarshal(b, &sb)
		return resp.StatusCode, sb.SandboxID, string(b)
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
			if i%2 == 0 {
				id := fmt.Sprint("burst", i)
				_, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: id})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Sprintf("REST create %s: %v", id, err))
					return
				}
				ids = append(ids, id)
				return
			}
			st, id, body := e2bCreate()
			mu.Lock()
			defer mu.Unlock()
			if st != http.StatusCreated {
				errs = append(errs, fmt.Sprintf("E2B create: %d %s", st, body))
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
