package session

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestMergeInfos: a fleet-wide list is in List's order (created, then id)
// and names each (tenant, id) once, this node's record first.
func TestMergeInfos(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	in := func(tenant, id string, min int, node string) *Info {
		return &Info{Session: Session{Tenant: tenant, ID: id, CreatedAt: t0.Add(time.Duration(min) * time.Minute)}, Node: node}
	}
	local := []*Info{in("t", "a1", 1, "a"), in("t", "same", 2, "a")}
	remote := []*Info{in("t", "b0", 0, "b"), in("u", "same", 2, "b"), in("t", "same", 2, "b"), in("t", "b1", 1, "b")}
	var got []string
	for _, x := range mergeInfos(local, remote) {
		got = append(got, fmt.Sprintf("%s/%s@%s", x.Tenant, x.ID, x.Node))
	}
	if want := "t/b0@b t/a1@a t/b1@b t/same@a u/same@b"; strings.Join(got, " ") != want {
		t.Fatalf("merged = %v, want %s", got, want)
	}
}

// TestListFleetSingleNode: without a fleet, ListFleet is List and misses
// no node; with one, the lister is asked for the same tenant and this
// node's sessions carry its name.
func TestListFleetSingleNode(t *testing.T) {
	m := &Manager{live: map[key]*entry{}}
	if infos, missing := m.ListFleet(context.Background(), "t"); len(infos) != 0 || missing != nil {
		t.Fatalf("single node: %v, %v", infos, missing)
	}
	var asked string
	m.SetFleetLister("a", func(_ context.Context, tenant string) ([]*Info, []string) {
		asked = tenant
		return []*Info{{Session: Session{Tenant: "t", ID: "x", State: StateLost}, Node: "d"}}, []string{"d"}
	})
	infos, missing := m.ListFleet(context.Background(), "t")
	if asked != "t" || len(infos) != 1 || infos[0].ID != "x" || strings.Join(missing, ",") != "d" {
		t.Fatalf("fleet: asked %q, got %+v, missing %v", asked, infos, missing)
	}
	if recs, _ := m.RecordsFleet(context.Background(), "t"); len(recs) != 0 {
		t.Fatalf("RecordsFleet kept a lost session: %+v", recs)
	}
}
