package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/cli"
	"github.com/warrenhq/warren/internal/fleet/registry"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestFleetDrainMove: three sessions of a tenant at its quota live on n0;
// "warren node drain n0 --move" (the command's own code) has n0 move them:
// each ends on another node with the same id, its files, environment and
// labels, the tenant's usage never passes its quota, no move snapshot stays
// behind, and n0 holds nothing.
func TestFleetDrainMove(t *testing.T) {
	testutil.RequiresRoot(t)
	f, nodes, reg := newFleet(t, 3, embeddedEtcd(t))
	n0 := nodes[0]
	k, err := n0.c.CreateKey(bg, &api.CreateKeyRequest{Tenant: "mover", Name: "move"})
	if err != nil {
		t.Fatal(err)
	}
	const held = 3 // the tenant's sessions: all its quota
	if _, err := n0.c.PutTenant(bg, "mover", &api.Tenant{Quota: api.TenantQuota{MaxSessions: held}}); err != nil {
		t.Fatal(err)
	}
	tc := map[string]*client.Client{}
	for _, n := range nodes {
		tc[n.name] = client.New(n.url, client.WithToken(k.Secret))
	}
	// Every session on n0: the others are drained while they are made.
	for _, n := range []string{"n1", "n2"} {
		if err := reg.Drain(bg, n, true); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 3*time.Second, "n0 sees n1 and n2 draining", func() bool {
		req, _ := http.NewRequest("GET", n0.url+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+n0.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(b), `warren_fleet_nodes{state="draining"} 2`+"\n")
	})
	ids := []string{"mv-a", "mv-b", "mv-c"}
	for _, id := range ids {
		if _, err := tc["n0"].CreateSession(bg, &api.CreateSessionRequest{ID: id, Env: map[string]string{"MOVED": "env of " + id},
			Labels: map[string]string{"team": "movers"}, TTLSeconds: 900, Limits: &api.Limits{MemoryMB: 256}}); err != nil {
			t.Fatal(err)
		}
		if r, err := reg.GetSession(bg, "mover", id); err != nil || r.Node != "n0" {
			t.Fatalf("session %s: %+v, %v; want it on n0", id, r, err)
		}
		if _, err := tc["n0"].WriteFile(bg, id, "/opt/moved.txt", strings.NewReader("files of "+id), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tc["n0"].CreateSession(bg, &api.CreateSessionRequest{ID: "mv-d", Limits: &api.Limits{MemoryMB: 256}}); status(err) != 429 {
		t.Fatalf("a fourth session of the tenant: %v; want 429 (at its quota)", err)
	}
	for _, n := range []string{"n1", "n2"} {
		if err := reg.Drain(bg, n, false); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = reg.Drain(bg, "n0", false) })

	// While they move, clients reading them through n2 are told to retry
	// (503), never that they do not exist.
	stop := make(chan struct{})
	polled := make(chan map[int]int)
	go func() {
		seen := map[int]int{}
		for {
			select {
			case <-stop:
				polled <- seen
				return
			default:
			}
			for _, id := range ids {
				_, err := tc["n2"].GetSession(bg, id)
				seen[status(err)]++
			}
		}
	}()
	// The command: it marks n0, then reports each move and waits for none.
	start := time.Now()
	code := cli.Main([]string{"node", "drain", "n0", "--move", "--timeout", "3m", "--fleet-etcd", f.endpoints, "--fleet-prefix", f.prefix})
	if code != 0 {
		t.Fatalf("warren node drain n0 --move exited %d (log: %s)", code, f.logf.Name())
	}
	t.Logf("moved %d sessions in %v", len(ids), time.Since(start).Round(time.Millisecond))
	close(stop)
	seen := <-polled
	t.Logf("reads through n2 during the move, by status (0: ok): %v", seen)
	for st := range seen {
		if st != 0 && st != 503 {
			t.Errorf("a read through n2 during the move answered %d; want 200 or 503 (%v)", st, seen)
		}
	}
	if nodes, err := reg.Nodes(bg); err != nil || !nodes[0].Moving || !nodes[0].Draining {
		t.Fatalf("n0's entry after the move: %+v, %v; want draining and moving", nodes, err)
	}
	if ss, err := reg.NodeSessions(bg, "n0"); err != nil || len(ss) != 0 {
		t.Fatalf("n0's records after the move: %+v, %v; want none", ss, err)
	}
	if local, err := n0.c.ListSessions(bg); err != nil || len(local) != 0 {
		t.Fatalf("n0's own sessions after the move: %+v, %v; want none", local, err)
	}
	if u, err := reg.Usage(bg, "mover"); err != nil || u != held {
		t.Fatalf("the tenant's usage after the move: %d, %v; want %d", u, err, held)
	}
	owners := map[string]string{}
	for _, id := range ids {
		r, err := reg.GetSession(bg, "mover", id)
		if err != nil || r.State != registry.Live || r.Node == "n0" {
			t.Fatalf("session %s after the move: %+v, %v; want it live on another node", id, r, err)
		}
		owners[id] = r.Node
		// Through n0 too: the routes follow the move.
		for _, n := range nodes {
			rc, err := tc[n.name].ReadFile(bg, id, "/opt/moved.txt")
			if err != nil {
				t.Fatalf("read %s's file through %s: %v", id, n.name, err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			if string(b) != "files of "+id {
				t.Fatalf("%s's file through %s: %q; want %q", id, n.name, b, "files of "+id)
			}
		}
		res, err := tc["n0"].Exec(bg, id, &api.ExecRequest{Command: "echo $MOVED"})
		if err != nil || strings.TrimSpace(res.Stdout) != "env of "+id {
			t.Fatalf("%s's environment after the move: %+v, %v", id, res, err)
		}
		s, err := tc["n0"].GetSession(bg, id)
		if err != nil || s.Labels["team"] != "movers" || s.Limits.MemoryMB != 256 {
			t.Fatalf("%s after the move: %+v, %v; want its label and limits", id, s, err)
		}
	}
	t.Logf("owners after the move: %v", owners)
	// What each move took, from n0's log.
	if b, err := os.ReadFile(f.logf.Name()); err == nil {
		for line := range strings.Lines(string(b)) {
			var l struct {
				Msg       string
				SessionID string `json:"session_id"`
				Took      time.Duration
			}
			if rest, ok := strings.CutPrefix(line, "n0 "); ok && json.Unmarshal([]byte(rest), &l) == nil && l.Msg == "moved a session to another node" {
				t.Logf("n0 moved %s in %v", l.SessionID, l.Took)
			}
		}
	}
	// Each target keeps only the snapshot its moved session runs on, which
	// goes with the session; n0 keeps none.
	snaps := func() map[string][]api.Snapshot {
		out := map[string][]api.Snapshot{}
		for _, n := range nodes {
			l, err := tc[n.name].ListSnapshots(bg)
			if err != nil {
				t.Fatal(err)
			}
			out[n.name] = l
		}
		return out
	}
	// n0 deletes each move's snapshot just after the target took the
	// session over, which the command may have seen first.
	eventually(t, 5*time.Second, "n0 keeps no snapshot", func() bool {
		l, err := tc["n0"].ListSnapshots(bg)
		return err == nil && len(l) == 0
	})
	var used []string
	for name, l := range snaps() {
		for _, sn := range l {
			if name == "n0" || !sn.AutoDelete || len(sn.UsedBy) != 1 || owners[sn.UsedBy[0]] != name {
				t.Errorf("snapshot %+v on %s; want only those the moved sessions run on", sn, name)
			}
			used = append(used, sn.UsedBy...)
		}
	}
	slices.Sort(used)
	if fmt.Sprint(used) != fmt.Sprint(ids) {
		t.Errorf("snapshots used by %v; want one for each of %v", used, ids)
	}
	// Deleted (through n0), the sessions take their snapshots along.
	for _, id := range ids {
		if err := tc["n0"].DeleteSession(bg, id); err != nil {
			t.Fatal(err)
		}
	}
	for name, l := range snaps() {
		if len(l) != 0 {
			t.Errorf("snapshots on %s after the moved sessions were deleted: %+v", name, l)
		}
	}
	if u, err := reg.Usage(bg, "mover"); err != nil || u != 0 {
		t.Fatalf("the tenant's usage at the end: %d, %v; want 0", u, err)
	}
	// The import's auto_delete is a boolean.
	req, _ := http.NewRequest(http.MethodPut, n0.url+"/v1/snapshots/x/import?auto_delete=maybe", strings.NewReader("x"))
	req.Header.Set("Authorization", "Bearer "+k.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"invalid_argument"`) {
		t.Fatalf("import with auto_delete=maybe: %d %s; want 400 invalid_argument", resp.StatusCode, body)
	}
}
