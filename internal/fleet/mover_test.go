package fleet_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/edge"
	"github.com/warrenhq/warren/internal/fleet"
	"github.com/warrenhq/warren/internal/fleet/registry"
	"github.com/warrenhq/warren/internal/fleet/registrytest"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/session/sessiontest"
	"github.com/warrenhq/warren/internal/workspace"
)

// moveTarget stands in for the node a session moves to: it takes the
// mover's snapshot import and answers its create as told, and records
// every call.
type moveTarget struct {
	mu                         sync.Mutex
	calls                      []string
	importStatus, createStatus int
}

func (tg *moveTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	tg.mu.Lock()
	call := r.Method + " " + r.URL.Path
	if r.Header.Get(edge.ForwardHeader) == "" {
		call += " (unsigned)"
	}
	tg.calls = append(tg.calls, call)
	st := http.StatusNoContent
	switch {
	case strings.HasSuffix(r.URL.Path, "/import"):
		st = tg.importStatus
	case r.URL.Path == "/v1/sessions":
		st = tg.createStatus
	}
	tg.mu.Unlock()
	if st >= 400 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st)
		io.WriteString(w, `{"error":{"code":"unavailable","message":"the stand-in target refuses"}}`)
		return
	}
	w.WriteHeader(st)
}

// saw returns the calls that start with prefix.
func (tg *moveTarget) saw(prefix string) []string {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	var out []string
	for _, c := range tg.calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

func (tg *moveTarget) set(importStatus, createStatus int) {
	tg.mu.Lock()
	tg.importStatus, tg.createStatus = importStatus, createStatus
	tg.calls = nil
	tg.mu.Unlock()
}

// TestMoverKeepsWhatItCannotMove: a node marked moving whose target fails
// keeps its session. A failed import leaves it untouched; a create that
// fails after the session was deleted here has it made here again from its
// snapshot, with the tenant at its quota. No move snapshot stays on either
// side, and the target was asked to delete its copy each time.
func TestMoverKeepsWhatItCannotMove(t *testing.T) {
	f := newFleet(t, 1) // the tenant's one session is all its quota
	ws, err := workspace.Open(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	src := f.startWith("src", session.LayersConfig{Store: sessiontest.NewLayerStore(), Workspaces: ws, SnapshotDir: t.TempDir()})
	if _, _, err := src.m.Create(bg, "t", &session.CreateRequest{ID: "s1", Env: map[string]string{"A": "b"}, Labels: map[string]string{"team": "x"}}); err != nil {
		t.Fatal(err)
	}
	before, err := src.m.Get(bg, "t", "s1")
	if err != nil {
		t.Fatal(err)
	}

	tg := &moveTarget{}
	tg.set(http.StatusServiceUnavailable, http.StatusCreated)
	srv := httptest.NewServer(tg)
	defer srv.Close()
	reg := f.registry()
	defer reg.Close()
	m, err := reg.Join(bg, registry.Node{Name: "tgt", Addr: srv.URL, Capacity: 10, Free: 10}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	src.fn.StartMover(src.m, nil)
	if err := reg.DrainMove(bg, "src"); err != nil {
		t.Fatal(err)
	}

	// The import fails: nothing happens to the session.
	registrytest.Eventually(t, 10*time.Second, "the mover asks the target to drop its copy after a failed import", func() bool {
		return len(tg.saw("DELETE /v1/snapshots/")) > 0
	})
	if got := tg.saw(""); len(got) != 2 || !strings.HasPrefix(got[0], "PUT /v1/snapshots/fleet-move-") || strings.Contains(strings.Join(got, " "), "unsigned") {
		t.Fatalf("calls of the target: %q; want a signed import, then the delete of its snapshot", got)
	}
	if s, err := src.m.Get(bg, "t", "s1"); err != nil || s.Name != before.Name {
		t.Fatalf("the session after a failed import: %+v, %v; want it untouched (sandbox %s)", s, err, before.Name)
	}
	registrytest.Eventually(t, 5*time.Second, "its record is live on src again after a failed import", func() bool {
		r, err := reg.GetSession(bg, "t", "s1")
		return err == nil && r.Node == "src" && r.State == registry.Live
	})
	registrytest.Eventually(t, 5*time.Second, "the move's snapshot is deleted here", func() bool {
		l, err := src.m.Layers().ListSnapshots(bg, "t")
		return err == nil && len(l) == 0
	})

	// The create there fails after the delete here: the session is made
	// here again, from its files.
	tg.set(http.StatusCreated, http.StatusServiceUnavailable)
	registrytest.Eventually(t, 15*time.Second, "the session is made here again", func() bool {
		s, err := src.m.Get(bg, "t", "s1")
		return err == nil && s.Name != before.Name && s.State == session.StateRunning
	})
	if err := reg.Drain(bg, "src", false); err != nil { // no more tries
		t.Fatal(err)
	}
	if got := tg.saw(""); len(got) != 3 || got[1] != "POST /v1/sessions" || !strings.HasPrefix(got[2], "DELETE /v1/snapshots/fleet-move-") {
		t.Fatalf("calls of the target: %q; want the import, the create, the delete of its snapshot", got)
	}
	s, err := src.m.Get(bg, "t", "s1")
	if err != nil || s.Env["A"] != "b" || s.Labels["team"] != "x" {
		t.Fatalf("the session made again: %+v, %v; want its env and labels", s, err)
	}
	if r, err := reg.GetSession(bg, "t", "s1"); err != nil || r.Node != "src" || r.State != registry.Live {
		t.Fatalf("its record: %+v, %v; want it live on src", r, err)
	}
	if u, err := reg.Usage(bg, "t"); err != nil || u != 1 {
		t.Fatalf("the tenant's usage: %d, %v; want 1", u, err)
	}
	// The session runs on a copy of the snapshot that goes with it; the
	// move's own goes once the mover is done with it.
	registrytest.Eventually(t, 5*time.Second, "the only snapshot here is the one s1 runs on", func() bool {
		l, err := src.m.Layers().ListSnapshots(bg, "t")
		return err == nil && len(l) == 1 && l[0].AutoDelete && len(l[0].UsedBy) == 1 && l[0].UsedBy[0] == "s1"
	})
	if err := src.m.Delete(bg, "t", "s1"); err != nil {
		t.Fatal(err)
	}
	if l, err := src.m.Layers().ListSnapshots(bg, "t"); err != nil || len(l) != 0 {
		t.Fatalf("snapshots after the delete: %+v, %v; want none", l, err)
	}
}

// startWith starts a node whose manager has a layers service.
func (f *fleetT) startWith(name string, layers session.LayersConfig) *node {
	t := f.t
	t.Helper()
	local, rt := sessiontest.NewStore(), sessiontest.NewRuntime(t.TempDir())
	n := &node{name: name, reg: f.registry(), local: local, rt: rt}
	var err error
	n.fn, err = fleet.Join(bg, fleet.Config{Registry: n.reg, Name: name, Addr: "http://" + name, Capacity: 10,
		TTL: time.Second, Grace: time.Second, Count: func() int { return count(n.local) },
		Quota: func(context.Context, string) (registry.Quota, error) {
			return registry.Quota{MaxSessions: f.quota}, nil
		},
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	registrytest.Eventually(t, 5*time.Second, name+" registered", n.fn.Registered)
	n.m = session.NewManager(session.Config{MinFreeDiskMB: -1}, session.Deps{Store: n.fn.Store(local), Runtime: rt,
		Images: sessiontest.NewImages(), Layers: &layers, Log: slog.New(slog.DiscardHandler)})
	if err := n.m.Recover(bg); err != nil {
		t.Fatal(err)
	}
	if err := n.fn.Reconcile(bg, local, n.m.Delete); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	t.Cleanup(n.stop)
	return n
}

// TestMoveCutShortByRestart: a node that stopped in the middle of moving
// its sessions finds, at its next start, a session still here Moving (its
// record becomes Live again) and one it had deleted already (its record
// goes, with the quota slot).
func TestMoveCutShortByRestart(t *testing.T) {
	f := newFleet(t, 0)
	a := f.start("a", nil, nil)
	for _, id := range []string{"here", "gone"} {
		if err := a.create("t", id); err != nil {
			t.Fatal(err)
		}
		if err := a.reg.MarkMoving(bg, "t", id, "a", true); err != nil {
			t.Fatal(err)
		}
	}
	local, rt := a.local, a.rt
	a.stop()
	// "gone" was deleted here before the stop, its record left Moving for
	// the target's create that never came.
	if err := local.DeleteSession(bg, "t", "gone"); err != nil {
		t.Fatal(err)
	}
	a2 := f.start("a", local, rt)
	if r, err := a2.reg.GetSession(bg, "t", "here"); err != nil || r.State != registry.Live || r.Node != "a" {
		t.Fatalf("record of the session still here = %+v, %v; want live on a", r, err)
	}
	if r, err := a2.reg.GetSession(bg, "t", "gone"); err == nil {
		t.Fatalf("record of the session deleted here = %+v; want none", r)
	}
	if u, err := a2.reg.Usage(bg, "t"); err != nil || u != 1 {
		t.Fatalf("usage = %d, %v; want 1", u, err)
	}
}
