package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/spec"
)

// TestIDRegistryIsHostWide: two runtimes (two daemons) over one registry
// never hold the same block; a block whose daemon died and whose sandbox
// left no state goes back; one whose sandbox still has its state does not,
// and another daemon cannot claim it.
func TestIDRegistryIsHostWide(t *testing.T) {
	reg := filepath.Join(t.TempDir(), "idblocks")
	sessA, sessB := t.TempDir(), t.TempDir()
	a, err := newIDAllocator(DefaultIDBase, reg, sessA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newIDAllocator(DefaultIDBase, reg, sessB)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]string{}
	for i := 0; i < 4; i++ {
		for _, al := range []*idAllocator{a, b} {
			r, err := al.get("s")
			if err != nil {
				t.Fatal(err)
			}
			if seen[r.HostID] != "" {
				t.Fatalf("block %d handed out twice", r.HostID)
			}
			seen[r.HostID] = al.owner
		}
	}
	// A dead daemon's entries: one whose sandbox left its state, one whose
	// sandbox is gone.
	dead := idEntry{Sessions: sessB, Name: "kept", Pid: 1 << 30, Start: 1}
	keep := spec.IDRange{HostID: DefaultIDBase + 100*IDsPerSandbox, Size: IDsPerSandbox}
	gone := spec.IDRange{HostID: DefaultIDBase + 101*IDsPerSandbox, Size: IDsPerSandbox}
	for _, r := range []spec.IDRange{keep, gone} {
		e := dead
		if r == gone {
			e.Name = "gone"
		}
		data, _ := json.Marshal(e)
		if err := os.WriteFile(a.path(r.HostID), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(sessB, "kept"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeIDs(filepath.Join(sessB, "kept"), keep); err != nil {
		t.Fatal(err)
	}
	if err := a.claim("x", keep); err == nil || !strings.Contains(err.Error(), sessB) {
		t.Errorf("claim of a block another daemon's sandbox still holds = %v, want refused naming %s", err, sessB)
	}
	if err := a.locked(func() error { a.reclaim(); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.path(gone.HostID)); err == nil {
		t.Error("the block of a dead daemon's removed sandbox was not reclaimed")
	}
	if _, err := os.Stat(a.path(keep.HostID)); err != nil {
		t.Errorf("the block of a dead daemon's still-present sandbox was reclaimed: %v", err)
	}
	// Its own daemon (a restart over sessB) takes it back.
	if err := b.claim("kept", keep); err != nil {
		t.Errorf("the sandbox's own daemon claims it back: %v", err)
	}
	for h := range seen {
		r := spec.IDRange{HostID: h, Size: IDsPerSandbox}
		a.put("s", r) // only a's own go
		b.put("s", r)
	}
	b.put("other", keep) // not that sandbox's: stays
	if _, err := os.Stat(a.path(keep.HostID)); err != nil {
		t.Errorf("put by another sandbox's name removed the block: %v", err)
	}
	b.put("kept", keep)
	if ents, _ := os.ReadDir(reg); len(ents) != 0 {
		t.Errorf("registry after every block went back: %d entries", len(ents))
	}
}

// TestCgroupParentLock: a second daemon (sessions directory) on a cgroup
// parent is refused with the first's directory named; the same daemon
// restarted in-process gets it again, and it is free once let go.
func TestCgroupParentLock(t *testing.T) {
	run := t.TempDir()
	rel1, err := lockParent(run, "p/q", "/data/one/sessions")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockParent(run, "p/q", "/data/two/sessions"); err == nil || !strings.Contains(err.Error(), "/data/one/sessions") {
		t.Errorf("second daemon on the parent = %v, want refused naming /data/one/sessions", err)
	}
	rel2, err := lockParent(run, "p/q", "/data/one/sessions")
	if err != nil {
		t.Fatalf("the same daemon again: %v", err)
	}
	rel1()
	rel2()
	rel3, err := lockParent(run, "p/q", "/data/two/sessions")
	if err != nil {
		t.Fatalf("after the first let go: %v", err)
	}
	rel3()
	// Another process's lock (another open file: flock tells them apart).
	other, err := lockFile(filepath.Join(run, "cgroup-parents", "r"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.WriteString("/data/three/sessions")
	if _, err := lockParent(run, "r", "/data/four/sessions"); err == nil || !strings.Contains(err.Error(), "/data/three/sessions") {
		t.Errorf("a parent another process holds = %v, want refused naming /data/three/sessions", err)
	}
}

func TestDescribeWaitNamesTheSignal(t *testing.T) {
	ws := unix.WaitStatus(unix.SIGKILL)
	if got := describeWait(ws); got != "killed by SIGKILL" {
		t.Errorf("describeWait(SIGKILL) = %q", got)
	}
}
