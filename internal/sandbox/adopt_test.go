package sandbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/cgroup"
	"github.com/warrenhq/warren/internal/errdefs"
)

// TestAdoptFrozen: a daemon that dies while it copies a sandbox's layers
// leaves the sandbox frozen; the next daemon must still adopt it (a frozen
// agent cannot answer the hello), and find it running.
func TestAdoptFrozen(t *testing.T) {
	e := newEnv(t)
	c := &Config{
		Name:     fmt.Sprintf("t%d", nameSerial.Add(1)),
		Hostname: "box",
		Lower:    []string{e.base.RootFS},
		BaseDir:  "/workspace",
		Env:      e.base.Env,
		Limits:   cgroup.Limits{MemoryBytes: 256 << 20, Pids: 128, CPUs: 1},
	}
	for _, d := range e.base.HostDirs {
		c.Overlays = append(c.Overlays, Overlay{Source: d, Target: d})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := e.rt.Start(ctx, c)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	var adopted *Sandbox
	t.Cleanup(func() {
		if adopted != nil {
			if err := adopted.Destroy(context.Background()); err != nil {
				t.Errorf("Destroy: %v", err)
			}
			adopted.rt.Wait() // its runtime is closed first, as cleanups run
			return
		}
		sb.Thaw()
		if err := e.rt.Remove(c.Name); err != nil {
			t.Errorf("Remove: %v", err)
		}
	})
	if err := sb.Freeze(ctx); err != nil {
		if errdefs.Is(err, errdefs.ErrUnavailable) {
			t.Skipf("no freezer: %v", err)
		}
		t.Fatalf("Freeze: %v", err)
	}
	sb.Detach()
	<-sb.Done()
	// The next daemon: a runtime of its own over the same state.
	next, err := NewRuntime(e.rt.Dir(), e.rt.Cgroups(), e.rt.Options())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Close() })
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	defer acancel()
	adopted, err = next.Adopt(actx, c.Name, sb.Pid())
	if err != nil {
		t.Fatalf("Adopt(a frozen sandbox) = %v, want it adopted and thawed", err)
	}
	mustOut(t, adopted, "echo alive", "alive\n")
}
