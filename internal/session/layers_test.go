package session_test

// The layers service (workspaces, snapshots, forks) against the fakes:
// who may mount what, what is in use, what goes with what, and what a
// restarted daemon knows again. The layers' contents and the idmapped
// mounts are tested on the real kernel (internal/daemon, internal/snapshot).

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/session/sessiontest"
	"github.com/warrenhq/warren/internal/workspace"
)

// withLayers returns fakes whose manager has a layers service over an
// in-memory layer store and plain workspace directories.
func withLayers(t *testing.T) (*fixture, *sessiontest.LayerStore) {
	t.Helper()
	f := fakes(t)
	ls := sessiontest.NewLayerStore()
	ws, err := workspace.Open(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	f.layers = &session.LayersConfig{Store: ls, Workspaces: ws, SnapshotDir: t.TempDir()}
	return f, ls
}

func TestLayersOff(t *testing.T) {
	f := start(t, session.Config{}, nil)
	_, err := f.m.Layers().ListWorkspaces(bg, "t1")
	wantClass(t, "ListWorkspaces without layers", err, errdefs.ErrUnavailable)
	_, _, err = f.m.Create(bg, "t1", &session.CreateRequest{Workspace: "w"})
	wantClass(t, "Create(workspace) without layers", err, errdefs.ErrUnavailable)

	g, _ := withLayers(t)
	g.rt.Feat.UserNS = false
	start(t, session.Config{}, g)
	_, err = g.m.Layers().Snapshot(bg, "t1", "a", "s")
	wantClass(t, "Snapshot without user namespaces", err, errdefs.ErrInvalidArgument)
	_, _, err = g.m.Create(bg, "t1", &session.CreateRequest{Snapshot: "s"})
	wantClass(t, "Create(snapshot) without user namespaces", err, errdefs.ErrInvalidArgument)
}

func TestWorkspaceMounts(t *testing.T) {
	f, ls := withLayers(t)
	start(t, session.Config{}, f)
	lay := f.m.Layers()
	ls.CreateWorkspace(bg, &session.Workspace{ID: "w1", Tenant: "t1", Name: "data", CreatedAt: time.Now()})
	ls.CreateWorkspace(bg, &session.Workspace{ID: "w2", Tenant: "t1", Name: "team", Shared: true, CreatedAt: time.Now()})

	a := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "a", Workspace: "data"})
	binds := f.rt.Sandbox(a.Name).Config().Binds
	if want := (session.SandboxBind{Source: f.layers.Workspaces.Path("w1"), Target: "/workspace"}); len(binds) != 1 || binds[0] != want {
		t.Errorf("binds = %+v, want %+v", binds, want)
	}
	_, _, err := f.m.Create(bg, "t1", &session.CreateRequest{ID: "b", Workspace: "data"})
	wantClass(t, "Create(second writer)", err, errdefs.ErrConflict)
	c := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "c", Workspace: "data", WorkspaceMode: "ro"})
	if b := f.rt.Sandbox(c.Name).Config().Binds; len(b) != 1 || !b[0].ReadOnly {
		t.Errorf("read-only mount = %+v", b)
	}
	_, _, err = f.m.Create(bg, "t1", &session.CreateRequest{Workspace: "data", WorkspaceMode: "rwx"})
	wantClass(t, "Create(bad mode)", err, errdefs.ErrInvalidArgument)
	_, _, err = f.m.Create(bg, "t1", &session.CreateRequest{Workspace: "nope"})
	wantClass(t, "Create(unknown workspace)", err, errdefs.ErrNotFound)
	_, _, err = f.m.Create(bg, "t2", &session.CreateRequest{Workspace: "data"})
	wantClass(t, "Create(another tenant's workspace)", err, errdefs.ErrNotFound)
	// A shared workspace takes several writers.
	mustCreate(t, f.m, "t1", &session.CreateRequest{Workspace: "team"})
	mustCreate(t, f.m, "t1", &session.CreateRequest{Workspace: "team"})

	info, err := lay.GetWorkspace(bg, "t1", "data")
	want := []session.WorkspaceMount{{Session: "a", Mode: "rw"}, {Session: "c", Mode: "ro"}}
	if err != nil || !slices.Equal(info.MountedBy, want) {
		t.Errorf("GetWorkspace(data) = %+v, %v; want mounted by %v", info, err, want)
	}
	wantClass(t, "DeleteWorkspace(mounted)", lay.DeleteWorkspace(bg, "t1", "data"), errdefs.ErrConflict)
	if l, err := lay.ListWorkspaces(bg, "t1"); err != nil || len(l) != 2 {
		t.Errorf("ListWorkspaces = %v, %v", l, err)
	}
	// The writer goes: another may come.
	if err := f.m.Delete(bg, "t1", "a"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "b", Workspace: "data"})
	if atts := ls.Attachments(); len(atts) != 4 {
		t.Errorf("stored attachments = %v, want the 4 live sessions'", atts)
	}
}

func TestSnapshotAndFork(t *testing.T) {
	f, ls := withLayers(t)
	f.tenants = &tenants{limits: map[string]session.TenantLimits{"small": {MaxSnapshots: 1}}}
	start(t, session.Config{}, f)
	lay := f.m.Layers()
	mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "src", Env: map[string]string{"K": "v"}, Labels: map[string]string{"l": "1"}})
	if _, err := f.m.Exec(bg, "t1", "src", &session.ExecRequest{Command: "cd /srv"}, nil); err != nil {
		t.Fatal(err)
	}
	sn, err := lay.Snapshot(bg, "t1", "src", "s1")
	if err != nil || sn.Image != "base" || sn.ImageDigest != "sha256:b1" || sn.Session != "src" {
		t.Fatalf("Snapshot = %+v, %v", sn, err)
	}
	dir := filepath.Join(f.layers.SnapshotDir, sn.ID)
	if _, err := os.Stat(filepath.Join(dir, "root")); err != nil {
		t.Errorf("the snapshot's layer: %v", err)
	}
	if got := f.images.Leases()["snapshot:"+sn.ID]; got != "sha256:b1" {
		t.Errorf("the snapshot leases %q, want sha256:b1", got)
	}
	_, err = lay.Snapshot(bg, "t1", "src", "s1")
	wantClass(t, "Snapshot(name taken)", err, errdefs.ErrConflict)
	_, err = lay.Snapshot(bg, "t1", "src", "Bad Name")
	wantClass(t, "Snapshot(bad name)", err, errdefs.ErrInvalidArgument)
	_, err = lay.Snapshot(bg, "t1", "nope", "s2")
	wantClass(t, "Snapshot(missing session)", err, errdefs.ErrNotFound)

	// A session from the snapshot runs on its layer, above the image.
	from := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "from", Snapshot: "s1"})
	if got, want := f.rt.Sandbox(from.Name).Config().Lower, []string{filepath.Join(dir, "root"), "/images/b1"}; !slices.Equal(got, want) {
		t.Errorf("Lower = %v, want %v", got, want)
	}
	_, _, err = f.m.Create(bg, "t1", &session.CreateRequest{Snapshot: "s1", Image: "other"})
	wantClass(t, "Create(snapshot of another image)", err, errdefs.ErrInvalidArgument)
	wantClass(t, "DeleteSnapshot(in use)", lay.DeleteSnapshot(bg, "t1", "s1"), errdefs.ErrConflict)
	if info, err := lay.GetSnapshot(bg, "t1", "s1"); err != nil || !slices.Equal(info.UsedBy, []string{"from"}) {
		t.Errorf("GetSnapshot = %+v, %v; want used by from", info, err)
	}
	// A snapshot of that session lies on top of s1.
	s2, err := lay.Snapshot(bg, "t1", "from", "s2")
	if err != nil || s2.Parent != sn.ID {
		t.Fatalf("Snapshot(from) = %+v, %v; want parent %s", s2, err, sn.ID)
	}
	if err := f.m.Delete(bg, "t1", "from"); err != nil {
		t.Fatal(err)
	}
	wantClass(t, "DeleteSnapshot(a base of another)", lay.DeleteSnapshot(bg, "t1", "s1"), errdefs.ErrConflict)

	// Export flattens the chain; import makes it a snapshot again.
	var buf bytes.Buffer
	if err := lay.ExportSnapshot(bg, "t1", "s2", &buf); err != nil {
		t.Fatalf("ExportSnapshot = %v", err)
	}
	imp, err := lay.ImportSnapshot(bg, "t2", "copy", &buf)
	if err != nil || imp.Image != "base" || imp.ImageDigest != "sha256:b1" || imp.Parent != "" {
		t.Fatalf("ImportSnapshot = %+v, %v", imp, err)
	}
	mustCreate(t, f.m, "t2", &session.CreateRequest{Snapshot: "copy"})

	// Forks carry the session's settings and directory, not its processes.
	_, _, err = lay.Fork(bg, "t1", "src", &session.ForkRequest{Count: 11})
	wantClass(t, "Fork(11)", err, errdefs.ErrInvalidArgument)
	_, _, err = lay.Fork(bg, "t1", "src", &session.ForkRequest{IDs: []string{"x", "x"}})
	wantClass(t, "Fork(same id twice)", err, errdefs.ErrInvalidArgument)
	fsn, forks, err := lay.Fork(bg, "t1", "src", &session.ForkRequest{Count: 3})
	if err != nil || len(forks) != 3 || !fsn.AutoDelete {
		t.Fatalf("Fork(3) = %+v, %v, %v", fsn, forks, err)
	}
	for _, fk := range forks {
		if fk.State != session.StateRunning || fk.Env["K"] != "v" || fk.Labels["l"] != "1" || fk.BaseDir != "/srv" || fk.Usage == nil {
			t.Errorf("fork = %+v, want running with src's env, labels and directory, and usage", fk)
		}
	}
	// One fork that cannot be made undoes them all, and the snapshot.
	before := f.m.Count()
	_, _, err = lay.Fork(bg, "t1", "src", &session.ForkRequest{IDs: []string{"new1", "src"}})
	wantClass(t, "Fork(an id that exists)", err, errdefs.ErrConflict)
	if f.m.Count() != before {
		t.Errorf("a failed fork left %d sessions", f.m.Count()-before)
	}
	// The fork's snapshot goes with its last session.
	for _, fk := range forks {
		if err := f.m.Delete(bg, "t1", fk.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ls.GetSnapshot(bg, "t1", fsn.Name); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the fork's snapshot outlived its sessions: %v", err)
	}
	if l, _ := lay.ListSnapshots(bg, "t1"); len(l) != 2 {
		t.Errorf("ListSnapshots(t1) = %d snapshots, want s1 and s2", len(l))
	}
	// Quotas.
	mustCreate(t, f.m, "small", &session.CreateRequest{ID: "q"})
	if _, err := lay.Snapshot(bg, "small", "q", "one"); err != nil {
		t.Fatal(err)
	}
	_, err = lay.Snapshot(bg, "small", "q", "two")
	wantClass(t, "Snapshot(over max_snapshots)", err, errdefs.ErrResourceExhausted)
	// Deleting works bottom-up.
	for _, n := range []string{"s2", "s1"} {
		if err := lay.DeleteSnapshot(bg, "t1", n); err != nil {
			t.Errorf("DeleteSnapshot(%s) = %v", n, err)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("s1's layer outlived it: %v", err)
	}
	if _, ok := f.images.Leases()["snapshot:"+sn.ID]; ok {
		t.Errorf("s1's image lease outlived it")
	}
}

func TestLayersSurviveRestart(t *testing.T) {
	f, ls := withLayers(t)
	start(t, session.Config{}, f)
	ls.CreateWorkspace(bg, &session.Workspace{ID: "w1", Tenant: "t1", Name: "data", CreatedAt: time.Now()})
	mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "src"})
	if _, err := f.m.Layers().Snapshot(bg, "t1", "src", "s1"); err != nil {
		t.Fatal(err)
	}
	w := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "w", Workspace: "data", Snapshot: "s1"})
	if err := f.m.Detach(bg); err != nil {
		t.Fatal(err)
	}
	// Debris: a layer no record owns, and the attachment of a session
	// that is gone.
	os.Mkdir(filepath.Join(f.layers.SnapshotDir, "n-debris"), 0o700)
	ls.PutAttachment(bg, &session.Attachment{Session: "gone", Tenant: "t1", SessionID: "gone", Workspace: "w1", WorkspaceMode: "rw"})

	start(t, session.Config{}, f)
	lay := f.m.Layers()
	_, _, err := f.m.Create(bg, "t1", &session.CreateRequest{Workspace: "data"})
	wantClass(t, "Create(second writer after restart)", err, errdefs.ErrConflict)
	wantClass(t, "DeleteSnapshot(in use after restart)", lay.DeleteSnapshot(bg, "t1", "s1"), errdefs.ErrConflict)
	if _, err := os.Stat(filepath.Join(f.layers.SnapshotDir, "n-debris")); !os.IsNotExist(err) {
		t.Errorf("a layer no record owns survived the restart: %v", err)
	}
	if got := ls.Attachments(); !slices.Equal(got, []string{w.Name}) {
		t.Errorf("attachments after restart = %v, want only %s", got, w.Name)
	}
	// Once the session goes, both are free.
	if err := f.m.Delete(bg, "t1", "w"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, f.m, "t1", &session.CreateRequest{Workspace: "data"})
	if err := lay.DeleteSnapshot(bg, "t1", "s1"); err != nil {
		t.Errorf("DeleteSnapshot after its user went = %v", err)
	}
}

// TestCreateWhileListing: a create in progress is already listed, so every
// change it makes to its record happens under the entry's lock (a fork
// while another caller listed sessions was a data race; run with -race).
func TestCreateWhileListing(t *testing.T) {
	f, _ := withLayers(t)
	start(t, session.Config{}, f)
	mustCreate(t, f.m, "t1", &session.CreateRequest{ID: "src"})
	if _, err := f.m.Layers().Snapshot(bg, "t1", "src", "s1"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, s := range f.m.List(bg, "t1") {
				_ = s.Image + s.User + s.BaseDir
			}
		}
	})
	for i := range 20 {
		info := mustCreate(t, f.m, "t1", &session.CreateRequest{ID: fmt.Sprintf("c%d", i), Snapshot: "s1"})
		if info.Image != "base" || info.BaseDir == "" {
			t.Errorf("session from a snapshot = image %q, base dir %q", info.Image, info.BaseDir)
		}
	}
	close(stop)
	wg.Wait()
}
