package cgroup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestFrozen(t *testing.T) {
	tests := []struct {
		version int
		report  string
		want    bool
	}{
		{1, "FROZEN\n", true},
		{1, "FREEZING\n", false},
		{1, "THAWED\n", false},
		{2, "populated 1\nfrozen 1\n", true},
		{2, "populated 1\nfrozen 0\n", false},
		{2, "", false},
	}
	for _, tc := range tests {
		if got := frozen(tc.version, tc.report); got != tc.want {
			t.Errorf("frozen(%d, %q) = %v, want %v", tc.version, tc.report, got, tc.want)
		}
	}
}

// TestFreezeV2 freezes a fake v2 session whose cgroup.events reports the
// freeze a moment later, as the kernel does once every task stopped.
func TestFreezeV2(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "warren", "s")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cgroup.freeze", "cgroup.events"} {
		os.WriteFile(filepath.Join(dir, f), []byte("0\n"), 0o644)
	}
	s := NewV2(root, "warren").OpenSession("s")
	go func() {
		time.Sleep(20 * time.Millisecond)
		os.WriteFile(filepath.Join(dir, "cgroup.events"), []byte("populated 1\nfrozen 1\n"), 0o644)
	}()
	if err := s.Freeze(context.Background()); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "cgroup.freeze")); string(b) != "1" {
		t.Errorf("cgroup.freeze = %q after Freeze", b)
	}
	if err := s.Thaw(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "cgroup.freeze")); string(b) != "0" {
		t.Errorf("cgroup.freeze = %q after Thaw", b)
	}
	// A freeze that never completes gives up with the context, thawed.
	os.WriteFile(filepath.Join(dir, "cgroup.events"), []byte("frozen 0\n"), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Freeze(ctx); err == nil {
		t.Errorf("Freeze that never completes = nil")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "cgroup.freeze")); string(b) != "0" {
		t.Errorf("cgroup.freeze = %q after a failed Freeze, want thawed", b)
	}
}

// TestFreezeNests: two freezes of one session (two snapshots at once) keep
// it frozen until both are thawed; the first Thaw must not thaw it under the
// second's copy.
func TestFreezeNests(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "warren", "s")
			os.MkdirAll(dir, 0o755)
			h := NewV2(root, "warren")
			state, report, frozenReport, thawed := "cgroup.freeze", "cgroup.events", "frozen 1\n", "0"
			if version == 1 {
				h = NewV1(map[string]string{"memory": root, "pids": root, "cpu": root, "freezer": root}, "warren")
				state, report, frozenReport, thawed = "freezer.state", "freezer.state", "FROZEN", "THAWED"
			}
			os.WriteFile(filepath.Join(dir, state), []byte(thawed), 0o644)
			os.WriteFile(filepath.Join(dir, report), []byte(frozenReport), 0o644)
			s := h.OpenSession("s")
			read := func() string { b, _ := os.ReadFile(filepath.Join(dir, state)); return string(b) }
			for range 2 {
				if err := s.Freeze(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Thaw(); err != nil {
				t.Fatal(err)
			}
			if got := read(); got == thawed {
				t.Errorf("%s = %q after one Thaw of two Freezes, want still frozen", state, got)
			}
			if err := s.Thaw(); err != nil {
				t.Fatal(err)
			}
			if got := read(); got != thawed {
				t.Errorf("%s = %q after both Thaws, want %q", state, got, thawed)
			}
			// A Thaw without a Freeze (a session left frozen by a crash)
			// thaws.
			os.WriteFile(filepath.Join(dir, state), []byte("1"), 0o644)
			if err := s.Thaw(); err != nil || read() != thawed {
				t.Errorf("Thaw without Freeze: %v, %s = %q", err, state, read())
			}
		})
	}
}

func TestFreezeWithoutFreezer(t *testing.T) {
	h := NewV1(map[string]string{"memory": t.TempDir(), "pids": t.TempDir(), "cpu": t.TempDir()}, "warren")
	err := h.OpenSession("s").Freeze(context.Background())
	if !errdefs.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Freeze without the v1 freezer = %v, want unavailable", err)
	}
}
