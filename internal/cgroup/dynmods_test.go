package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFavorDynModsNoCgroup2(t *testing.T) {
	mi := filepath.Join(t.TempDir(), "mountinfo")
	v1Only := "30 25 0:26 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,pids\n"
	if err := os.WriteFile(mi, []byte(v1Only), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := favorDynMods(mi, true); !errors.Is(err, ErrNoCgroup2) {
		t.Fatalf("v1-only host: %v, want ErrNoCgroup2", err)
	}
}

// mountLine returns the mountinfo line of the cgroup2 mount at point.
func mountLine(t *testing.T, point string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && f[4] == point && strings.Contains(l, " - cgroup2 ") {
			return l
		}
	}
	t.Fatalf("no cgroup2 mount at %s", point)
	return ""
}

// TestFavorDynMods flips the real host's cgroup2 mount and back: the option
// appears and goes, and the mount's other options (its own flags and the
// superblock's) stay as they were. The host is left as found.
func TestFavorDynMods(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	mounts, err := cgroupMounts("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(mounts, func(m mount) bool { return m.fstype == "cgroup2" })
	if i < 0 {
		t.Skip("no cgroup2 mount here")
	}
	point := mounts[i].point
	was := slices.Contains(mounts[i].superOpts, "favordynmods")
	t.Cleanup(func() {
		if _, _, err := FavorDynMods(was); err != nil {
			t.Errorf("restore favordynmods=%v on %s: %v", was, point, err)
		}
	})
	// Fields of a mountinfo line apart from the mount's id and the super
	// options, which are the point of the change.
	without := func(l string) string {
		f := strings.Fields(l)
		f = f[1:]
		opts := strings.Split(f[len(f)-1], ",")
		opts = slices.DeleteFunc(opts, func(o string) bool { return o == "favordynmods" })
		f[len(f)-1] = strings.Join(opts, ",")
		return strings.Join(f, " ")
	}
	before := mountLine(t, point)
	for _, on := range []bool{!was, was, !was} {
		p, changed, err := FavorDynMods(on)
		if errors.Is(err, ErrNoCgroup2) || (err != nil && strings.Contains(err.Error(), "needs Linux 6.0")) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatalf("favordynmods=%v: %v", on, err)
		}
		if p != point || !changed {
			t.Errorf("favordynmods=%v: point %q changed %v, want %q true", on, p, changed, point)
		}
		after := mountLine(t, point)
		if got := strings.Contains(after, "favordynmods"); got != on {
			t.Errorf("favordynmods=%v: mountinfo says %q", on, after)
		}
		if without(after) != without(before) {
			t.Errorf("other options changed:\n before %s\n after  %s", before, after)
		}
		// Asking again for what is set changes nothing.
		if _, changed, err := FavorDynMods(on); err != nil || changed {
			t.Errorf("second favordynmods=%v: changed %v, %v", on, changed, err)
		}
	}
}
