package daemon_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/api"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon/daemontest"
)

// sh runs command in session id and returns its stdout; a failure fails t.
func sh(t *testing.T, c *client.Client, id, command string) string {
	t.Helper()
	res, err := c.Exec(bg, id, &api.ExecRequest{Command: command})
	if err != nil {
		t.Fatalf("%s: %q: %v", id, command, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s: %q: exit %d, stderr %q", id, command, res.ExitCode, res.Stderr)
	}
	return res.Stdout
}

// checkLayersGone checks that nothing of workspaces and snapshots is left
// in the data directory or mounted from it.
func checkLayersGone(t *testing.T, h *daemontest.Harness) {
	t.Helper()
	for _, d := range []string{"snapshots", "workspaces/layers"} {
		ents, err := os.ReadDir(filepath.Join(h.DataDir, d))
		if err != nil {
			t.Errorf("read %s: %v", d, err)
		}
		for _, e := range ents {
			t.Errorf("left in %s: %s", d, e.Name())
		}
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if bytes.Contains(mi, []byte(filepath.Join(h.DataDir, "workspaces"))) {
		t.Errorf("a workspace is still mounted:\n%s", mi)
	}
}

func TestWorkspaceOutlivesSessions(t *testing.T) {
	h := daemontest.Start(t, nil)
	c := h.Client
	w, err := c.CreateWorkspace(bg, &api.CreateWorkspaceRequest{Name: "proj", SizeMB: 64})
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "proj" || w.SizeMB != 64 || w.Shared || len(w.MountedBy) != 0 {
		t.Errorf("CreateWorkspace = %+v", w)
	}
	if _, err := c.CreateWorkspace(bg, &api.CreateWorkspaceRequest{Name: "proj"}); client.Code(err) != "conflict" {
		t.Errorf("creating it again = %v, want conflict", err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "s1", Workspace: "proj"}); err != nil {
		t.Fatal(err)
	}
	sh(t, c, "s1", "cd /workspace && echo hello > root.txt && mkdir -p src && echo user > src/u.txt && chown -R 1000:1000 src && ln -s root.txt link")
	if got := sh(t, c, "s1", "pwd"); got != "/workspace\n" {
		t.Errorf("the session starts in %q, want /workspace", got)
	}
	if w, _ := c.GetWorkspace(bg, "proj"); len(w.MountedBy) != 1 || w.MountedBy[0] != (api.WorkspaceMount{Session: "s1", Mode: "rw"}) || w.UsedBytes == 0 {
		t.Errorf("GetWorkspace while mounted = %+v", w)
	}
	if err := c.DeleteWorkspace(bg, "proj"); client.Code(err) != "conflict" {
		t.Errorf("DeleteWorkspace while mounted = %v, want conflict", err)
	}
	if err := c.DeleteSession(bg, "s1"); err != nil {
		t.Fatal(err)
	}
	// The files are stored in the canonical ids: root's as host root's.
	matches, _ := filepath.Glob(filepath.Join(h.DataDir, "workspaces/layers/*/data/root.txt"))
	if len(matches) != 1 {
		t.Fatalf("workspace file on the host: %v", matches)
	}
	for p, want := range map[string]uint32{matches[0]: 0, filepath.Join(filepath.Dir(matches[0]), "src/u.txt"): 1000} {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil || st.Uid != want || st.Gid != want {
			t.Errorf("%s on the host: owner %d:%d (%v), want %d", p, st.Uid, st.Gid, err, want)
		}
	}
	// The next session has another block of host ids, and sees the same
	// files with the same owners.
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "s2", Workspace: "proj"}); err != nil {
		t.Fatal(err)
	}
	got := sh(t, c, "s2", "cd /workspace && cat root.txt src/u.txt link && stat -c '%n %u %g' root.txt src src/u.txt && echo more >> root.txt && id -u")
	want := "hello\nuser\nhello\nroot.txt 0 0\nsrc 1000 1000\nsrc/u.txt 1000 1000\n0\n"
	if got != want {
		t.Errorf("the next session sees:\n%s\nwant:\n%s", got, want)
	}
	if err := c.DeleteSession(bg, "s2"); err != nil {
		t.Fatal(err)
	}
	ws, err := c.ListWorkspaces(bg)
	if err != nil || len(ws) != 1 || ws[0].Name != "proj" {
		t.Errorf("ListWorkspaces = %+v, %v", ws, err)
	}
	if err := c.DeleteWorkspace(bg, "proj"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetWorkspace(bg, "proj"); !client.IsNotFound(err) {
		t.Errorf("GetWorkspace after delete = %v", err)
	}
	checkLayersGone(t, h)
}

func TestWorkspaceOneWriter(t *testing.T) {
	h := daemontest.Start(t, nil)
	c := h.Client
	for _, req := range []api.CreateWorkspaceRequest{{Name: "solo"}, {Name: "team", Shared: true}} {
		if _, err := c.CreateWorkspace(bg, &req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "a", Workspace: "solo"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "b", Workspace: "solo"})
	if client.Code(err) != "conflict" || !strings.Contains(err.Error(), `"a"`) {
		t.Errorf("a second read-write mount = %v, want a conflict naming session a", err)
	}
	// A reader may join the writer; it cannot write.
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "r", Workspace: "solo", WorkspaceMode: "ro"}); err != nil {
		t.Fatal(err)
	}
	sh(t, c, "a", "echo from-a > /workspace/f")
	if got := sh(t, c, "r", "cat /workspace/f"); got != "from-a\n" {
		t.Errorf("the reader sees %q", got)
	}
	res, _ := c.Exec(bg, "r", &api.ExecRequest{Command: "echo x > /workspace/g"})
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "Read-only") {
		t.Errorf("writing through a read-only mount: %+v", res)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "x", WorkspaceMode: "ro"}); client.Code(err) != "invalid_argument" {
		t.Errorf("workspace_mode without workspace = %v", err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "x", Workspace: "nope"}); !client.IsNotFound(err) {
		t.Errorf("a missing workspace = %v, want not_found", err)
	}
	// Once the writer is gone, another may write.
	if err := c.DeleteSession(bg, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "b", Workspace: "solo"}); err != nil {
		t.Errorf("a read-write mount after the writer left: %v", err)
	}
	// A shared workspace takes several writers, who see each other's files.
	for _, id := range []string{"t1", "t2"} {
		if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: id, Workspace: "team"}); err != nil {
			t.Fatal(err)
		}
	}
	sh(t, c, "t1", "echo one > /workspace/one")
	if got := sh(t, c, "t2", "cat /workspace/one && echo two > /workspace/two"); got != "one\n" {
		t.Errorf("t2 sees %q", got)
	}
	for _, id := range []string{"b", "r", "t1", "t2"} {
		c.DeleteSession(bg, id)
	}
	for _, n := range []string{"solo", "team"} {
		if err := c.DeleteWorkspace(bg, n); err != nil {
			t.Error(err)
		}
	}
	checkLayersGone(t, h)
}

func TestWorkspaceSizeLimit(t *testing.T) {
	h := daemontest.Start(t, nil)
	c := h.Client
	if _, err := c.CreateWorkspace(bg, &api.CreateWorkspaceRequest{Name: "small", SizeMB: 16}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateWorkspace(bg, &api.CreateWorkspaceRequest{Name: "tiny", SizeMB: 1}); client.Code(err) != "invalid_argument" {
		t.Errorf("a 1 MiB workspace = %v, want invalid_argument", err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "s", Workspace: "small"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(bg, "s", &api.ExecRequest{Command: "dd if=/dev/zero of=/workspace/big bs=1M count=32"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || (!strings.Contains(res.Stderr, "No space left") && !strings.Contains(res.Stderr, "quota exceeded")) {
		t.Errorf("writing 32 MiB into a 16 MiB workspace: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	// The session's own layer is not the workspace's: it still has room.
	sh(t, c, "s", "rm /workspace/big && dd if=/dev/zero of=/root/other bs=1M count=24 2>/dev/null")
	c.DeleteSession(bg, "s")
	if err := c.DeleteWorkspace(bg, "small"); err != nil {
		t.Error(err)
	}
	checkLayersGone(t, h)
}

// TestSnapshotConsistent: a process appends numbered lines as fast as it
// can while the snapshot is taken; the snapshot holds a prefix of them, no
// torn line.
func TestSnapshotConsistent(t *testing.T) {
	h := daemontest.Start(t, nil)
	c := h.Client
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "w"}); err != nil {
		t.Fatal(err)
	}
	// Each line is one write(2) of a 100-byte line, so a torn line would
	// show as a short one.
	pad := strings.Repeat("x", 90)
	if _, err := c.StartProcess(bg, "w", &api.StartProcessRequest{Command: `i=0; while :; do printf '%08d ` + pad + `\n' $i >> /root/log; i=$((i+1)); done`}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	var sizes []string
	for n := range 3 {
		name := fmt.Sprintf("snap%d", n)
		if _, err := c.Snapshot(bg, "w", name); err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("r%d", n)
		if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: id, Snapshot: name}); err != nil {
			t.Fatal(err)
		}
		rc, err := c.ReadFile(bg, id, "/root/log")
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(rc)
		rc.Close()
		if len(data) == 0 || len(data)%100 != 0 {
			t.Errorf("%s: %d bytes, not whole lines of 100", name, len(data))
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		want := 0
		for sc.Scan() {
			if line := sc.Text(); line != fmt.Sprintf("%08d %s", want, pad) {
				t.Fatalf("%s: line %d is %q", name, want, line)
			}
			want++
		}
		sizes = append(sizes, strconv.Itoa(want))
		c.DeleteSession(bg, id)
		if err := c.DeleteSnapshot(bg, name); err != nil {
			t.Error(err)
		}
	}
	t.Logf("lines in the snapshots: %v", sizes)
	// The writer runs on after each thaw.
	before := sh(t, c, "w", "wc -c < /root/log")
	time.Sleep(200 * time.Millisecond)
	if after := sh(t, c, "w", "wc -c < /root/log"); after == before {
		t.Errorf("the writer stopped after the snapshots: %s bytes", after)
	}
	c.DeleteSession(bg, "w")
	checkLayersGone(t, h)
}

func TestFork(t *testing.T) {
	h := daemontest.Start(t, nil)
	c := h.Client
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "src", Env: map[string]string{"MARK": "m1"}}); err != nil {
		t.Fatal(err)
	}
	// Changes to the root layer and to the base image's /usr overlay, a
	// deletion, and a file of another owner.
	sh(t, c, "src", "mkdir -p /srv/app && echo state > /srv/app/f && echo tool > /usr/local/bin/t && rm /etc/hosts && chown 1000:1000 /srv/app/f && cd /srv/app")
	start := time.Now()
	r, err := c.Fork(bg, "src", &api.ForkRequest{Count: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fork of 5 took %v", time.Since(start))
	if len(r.Sessions) != 5 || !r.Snapshot.AutoDelete || len(r.Snapshot.UsedBy) != 5 {
		t.Fatalf("Fork = %+v", r)
	}
	for i, s := range r.Sessions {
		got := sh(t, c, s.ID, "pwd; cat /srv/app/f /usr/local/bin/t; stat -c %u /srv/app/f; echo $MARK; test -e /etc/hosts || echo deleted")
		if got != "/srv/app\nstate\ntool\n1000\nm1\ndeleted\n" {
			t.Errorf("fork %d sees %q", i, got)
		}
		sh(t, c, s.ID, fmt.Sprintf("echo %d > /srv/app/mine && echo changed > /srv/app/f", i))
	}
	for i, s := range r.Sessions {
		got := sh(t, c, s.ID, "cat /srv/app/mine /srv/app/f")
		if got != fmt.Sprintf("%d\nchanged\n", i) {
			t.Errorf("fork %d after the others wrote: %q", i, got)
		}
	}
	if got := sh(t, c, "src", "cat /srv/app/f; ls /srv/app"); got != "state\nf\n" {
		t.Errorf("the source after its forks wrote: %q", got)
	}
	// Ids of the caller's choosing; a taken id fails the whole fork.
	r2, err := c.Fork(bg, "src", &api.ForkRequest{IDs: []string{"fa", "fb"}, Snapshot: "kept"})
	if err != nil || len(r2.Sessions) != 2 || r2.Sessions[0].ID != "fa" || r2.Snapshot.AutoDelete {
		t.Fatalf("Fork with ids = %+v, %v", r2, err)
	}
	if _, err := c.Fork(bg, "src", &api.ForkRequest{IDs: []string{"fc", "fa"}}); client.Code(err) != "conflict" {
		t.Errorf("a fork onto a taken id = %v, want conflict", err)
	}
	if _, err := c.GetSession(bg, "fc"); !client.IsNotFound(err) {
		t.Errorf("the failed fork left fc: %v", err)
	}
	if _, err := c.Fork(bg, "src", &api.ForkRequest{Count: 11}); client.Code(err) != "invalid_argument" {
		t.Errorf("a fork of 11 = %v", err)
	}
	// The forks' own snapshot goes with the last of them; a named one stays.
	for _, s := range r.Sessions {
		if err := c.DeleteSession(bg, s.ID); err != nil {
			t.Fatal(err)
		}
	}
	c.DeleteSession(bg, "fa")
	c.DeleteSession(bg, "fb")
	sns, _ := c.ListSnapshots(bg)
	if len(sns) != 1 || sns[0].Name != "kept" {
		t.Errorf("snapshots after the forks are gone: %+v", sns)
	}
	c.DeleteSnapshot(bg, "kept")
	c.DeleteSession(bg, "src")
	checkLayersGone(t, h)
}

func TestSnapshotInUse(t *testing.T) {
	h := daemontest.Start(t, nil)
	c := h.Client
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	sh(t, c, "a", "echo 1 > /root/one")
	if _, err := c.Snapshot(bg, "a", "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Snapshot(bg, "a", "s1"); client.Code(err) != "conflict" {
		t.Errorf("a second snapshot s1 = %v, want conflict", err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "b", Snapshot: "s1"}); err != nil {
		t.Fatal(err)
	}
	err := c.DeleteSnapshot(bg, "s1")
	if client.Code(err) != "conflict" || !strings.Contains(err.Error(), "b") {
		t.Errorf("deleting a snapshot in use = %v, want a conflict naming b", err)
	}
	// A snapshot of b lies on top of s1, which must stay while it does.
	sh(t, c, "b", "echo 2 > /root/two && rm /root/one")
	if _, err := c.Snapshot(bg, "b", "s2"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "c", Snapshot: "s2"}); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, c, "c", "cat /root/two; ls /root"); got != "2\ntwo\n" {
		t.Errorf("a session from a snapshot of a snapshot sees %q", got)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "d", Snapshot: "s2", Image: "other"}); client.Code(err) != "invalid_argument" {
		t.Errorf("a snapshot with another image = %v", err)
	}
	c.DeleteSession(bg, "b")
	c.DeleteSession(bg, "c")
	if err := c.DeleteSnapshot(bg, "s1"); client.Code(err) != "conflict" || !strings.Contains(err.Error(), "s2") {
		t.Errorf("deleting the base of s2 = %v, want a conflict naming s2", err)
	}
	if err := c.DeleteSnapshot(bg, "s2"); err != nil {
		t.Error(err)
	}
	if err := c.DeleteSnapshot(bg, "s1"); err != nil {
		t.Error(err)
	}
	c.DeleteSession(bg, "a")
	checkLayersGone(t, h)
}

func TestSnapshotExportImport(t *testing.T) {
	h := daemontest.Start(t, nil)
	c := h.Client
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "b"}); err != nil {
		t.Fatal(err)
	}
	sh(t, c, "b", "echo from-b > /root/b")
	if _, err := c.Snapshot(bg, "b", "sb"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "a2", Snapshot: "sb"}); err != nil {
		t.Fatal(err)
	}
	// Two layers (sb below, a2's changes above) export as one.
	sh(t, c, "a2", "mkdir -p /opt/x && echo data > /opt/x/f && ln -s f /opt/x/l && chown -R 1000 /opt/x && rm /etc/hosts && dd if=/dev/urandom of=/opt/x/bin bs=1k count=300 2>/dev/null && md5sum /opt/x/bin > /opt/x/sum")
	if _, err := c.Snapshot(bg, "a2", "exp"); err != nil {
		t.Fatal(err)
	}
	rc, err := c.ExportSnapshot(bg, "exp")
	if err != nil {
		t.Fatal(err)
	}
	archive, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || len(archive) < 4 || !bytes.Equal(archive[:4], []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		t.Fatalf("export: %d bytes, %v; want a zstd frame", len(archive), err)
	}
	s, err := c.ImportSnapshot(bg, "imp", bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	if s.Image != "base" || s.Session != "" {
		t.Errorf("imported %+v", s)
	}
	if _, err := c.ImportSnapshot(bg, "imp", bytes.NewReader(archive)); client.Code(err) != "conflict" {
		t.Errorf("importing over a snapshot = %v", err)
	}
	if _, err := c.ImportSnapshot(bg, "junk", strings.NewReader("not an archive")); client.Code(err) != "invalid_argument" {
		t.Errorf("importing junk = %v", err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "i", Snapshot: "imp"}); err != nil {
		t.Fatal(err)
	}
	got := sh(t, c, "i", "cat /root/b /opt/x/l; stat -c %u /opt/x/f; md5sum -c /opt/x/sum; test -e /etc/hosts || echo gone")
	if got != "from-b\ndata\n1000\n/opt/x/bin: OK\ngone\n" {
		t.Errorf("a session from the imported snapshot sees %q", got)
	}
	for _, id := range []string{"a", "b", "a2", "i"} {
		c.DeleteSession(bg, id)
	}
	for _, n := range []string{"imp", "exp", "sb"} {
		if err := c.DeleteSnapshot(bg, n); err != nil {
			t.Error(err)
		}
	}
	checkLayersGone(t, h)
}

// TestLayersTenantIsolation: another tenant's workspaces and snapshots are
// as absent as missing ones, on every route and in session creation.
func TestLayersTenantIsolation(t *testing.T) {
	h := daemontest.Start(t, nil)
	a := bearer(newKey(t, h, api.CreateKeyRequest{Tenant: "a"}).Secret)
	b := bearer(newKey(t, h, api.CreateKeyRequest{Tenant: "b"}).Secret)
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/v1/workspaces", `{"name":"w"}`},
		{"POST", "/v1/sessions", `{"id":"s","workspace":"w"}`},
		{"POST", "/v1/sessions/s/snapshot", `{"name":"n"}`},
	} {
		if r := as(t, h, a, req.method, req.path, req.body); r.status != http.StatusCreated {
			t.Fatalf("a: %s %s: %d %s", req.method, req.path, r.status, r.body)
		}
	}
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/v1/workspaces/w", ""},
		{"DELETE", "/v1/workspaces/w", ""},
		{"GET", "/v1/snapshots/n", ""},
		{"DELETE", "/v1/snapshots/n", ""},
		{"GET", "/v1/snapshots/n/export", ""},
		{"POST", "/v1/sessions", `{"id":"x","workspace":"w"}`},
		{"POST", "/v1/sessions", `{"id":"y","snapshot":"n"}`},
		{"POST", "/v1/sessions/s/snapshot", `{"name":"n2"}`},
		{"POST", "/v1/sessions/s/fork", `{"count":1}`},
	} {
		r := as(t, h, b, req.method, req.path, req.body)
		if r.status != http.StatusNotFound {
			t.Errorf("b: %s %s = %d %s, want 404", req.method, req.path, r.status, r.body)
		}
	}
	for _, p := range []string{"/v1/workspaces", "/v1/snapshots"} {
		r := as(t, h, b, "GET", p, "")
		if r.status != http.StatusOK || bytes.Contains(r.body, []byte(`"name"`)) {
			t.Errorf("b lists %s: %d %s", p, r.status, r.body)
		}
	}
	// Names are per tenant: b may have its own w.
	if r := as(t, h, b, "POST", "/v1/workspaces", `{"name":"w"}`); r.status != http.StatusCreated {
		t.Errorf("b creates its own w: %d %s", r.status, r.body)
	}
	as(t, h, a, "DELETE", "/v1/sessions/s", "")
	as(t, h, a, "DELETE", "/v1/snapshots/n", "")
	as(t, h, a, "DELETE", "/v1/workspaces/w", "")
	as(t, h, b, "DELETE", "/v1/workspaces/w", "")
	checkLayersGone(t, h)
}

// TestSnapshotWhileBusy: snapshots and forks of one session in parallel
// with its commands; every snapshot is taken, the session keeps working.
func TestSnapshotWhileBusy(t *testing.T) {
	h := daemontest.Start(t, nil)
	c := h.Client
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if _, err := c.Snapshot(bg, "s", fmt.Sprintf("p%d", i)); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if _, err := c.Exec(bg, "s", &api.ExecRequest{Command: fmt.Sprintf("echo %d > /root/f%d", i, i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := sh(t, c, "s", "cat /root/f0 /root/f3"); got != "0\n3\n" {
		t.Errorf("after the snapshots: %q", got)
	}
	for i := range 4 {
		if err := c.DeleteSnapshot(bg, fmt.Sprintf("p%d", i)); err != nil {
			t.Error(err)
		}
	}
	c.DeleteSession(bg, "s")
	checkLayersGone(t, h)
}

// TestLayersSurviveRestart: a daemon that keeps its sessions running across
// a restart knows again which session mounts which workspace and which
// snapshot it started from.
func TestLayersSurviveRestart(t *testing.T) {
	h1 := daemontest.Start(t, func(c *config.Config) { c.Shutdown = config.ShutdownKeep })
	c := h1.Client
	if _, err := c.CreateWorkspace(bg, &api.CreateWorkspaceRequest{Name: "w", SizeMB: 32}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "src"}); err != nil {
		t.Fatal(err)
	}
	sh(t, c, "src", "echo base > /root/f")
	if _, err := c.Snapshot(bg, "src", "snap"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "s", Workspace: "w", Snapshot: "snap"}); err != nil {
		t.Fatal(err)
	}
	sh(t, c, "s", "echo before > /workspace/f")
	c.DeleteSession(bg, "src")
	h1.Stop()

	h2 := restartAt(t, h1, config.ShutdownDestroy)
	c = h2.Client
	if got := sh(t, c, "s", "cat /root/f /workspace/f && echo after >> /workspace/f"); got != "base\nbefore\n" {
		t.Errorf("the adopted session sees %q", got)
	}
	if err := c.DeleteWorkspace(bg, "w"); client.Code(err) != "conflict" {
		t.Errorf("deleting the adopted session's workspace = %v, want conflict", err)
	}
	if err := c.DeleteSnapshot(bg, "snap"); client.Code(err) != "conflict" {
		t.Errorf("deleting the adopted session's snapshot = %v, want conflict", err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "t", Workspace: "w"}); client.Code(err) != "conflict" {
		t.Errorf("a second writer after the restart = %v, want conflict", err)
	}
	if err := c.DeleteSession(bg, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "t", Workspace: "w"}); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, c, "t", "cat /workspace/f"); got != "before\nafter\n" {
		t.Errorf("the workspace after the restart holds %q", got)
	}
	c.DeleteSession(bg, "t")
	if err := c.DeleteWorkspace(bg, "w"); err != nil {
		t.Error(err)
	}
	if err := c.DeleteSnapshot(bg, "snap"); err != nil {
		t.Error(err)
	}
	checkLayersGone(t, h2)
}

// TestWorkspaceWithoutQuota: a daemon without disk quotas keeps workspaces
// as plain directories and refuses a size it cannot enforce.
func TestWorkspaceWithoutQuota(t *testing.T) {
	h := daemontest.Start(t, func(c *config.Config) { c.NoDiskQuota = true })
	c := h.Client
	if _, err := c.CreateWorkspace(bg, &api.CreateWorkspaceRequest{Name: "w", SizeMB: 64}); client.Code(err) != "invalid_argument" {
		t.Errorf("a size limit without quotas = %v, want invalid_argument", err)
	}
	if _, err := c.CreateWorkspace(bg, &api.CreateWorkspaceRequest{Name: "w"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "s", Workspace: "w"}); err != nil {
		t.Fatal(err)
	}
	sh(t, c, "s", "echo x > /workspace/f && chown 1000 /workspace/f")
	c.DeleteSession(bg, "s")
	if _, err := c.CreateSession(bg, &api.CreateSessionRequest{ID: "s2", Workspace: "w"}); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, c, "s2", "stat -c '%u %s' /workspace/f"); got != "1000 2\n" {
		t.Errorf("the next session sees %q", got)
	}
	c.DeleteSession(bg, "s2")
	if err := c.DeleteWorkspace(bg, "w"); err != nil {
		t.Error(err)
	}
	checkLayersGone(t, h)
}
