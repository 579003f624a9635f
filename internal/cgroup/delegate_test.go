package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDelegation finds the subtree a service manager delegated from the
// daemon's own cgroup, in a fake tree whose delegated cgroups carry the
// extended attribute systemd sets (Delegate=yes).
func TestDelegation(t *testing.T) {
	tests := []struct {
		name      string
		own       string
		delegate  string // directory (relative) given trusted.delegate=1
		attr      string
		nsRoot    bool // root has cgroup.type: a cgroup namespace's root, not the hierarchy's
		wantBase  string
		wantLeaf  string
		wantStuck string
	}{
		{name: "real root", own: "/"},
		{name: "container namespace root", own: "/", nsRoot: true, wantBase: "/", wantLeaf: DaemonLeaf},
		// systemd < 254, or no DelegateSubgroup=: nesting would make the
		// next start of the unit fail, so the parent stays at the root.
		{name: "directly in the delegated cgroup", own: "/system.slice/warren.service", delegate: "system.slice/warren.service",
			wantStuck: "/system.slice/warren.service"},
		{name: "user manager, in a leaf", own: "/user.slice/user-1000.slice/user@1000.service/app.slice/warren.service/daemon",
			delegate: "user.slice/user-1000.slice/user@1000.service/app.slice/warren.service", attr: "user.delegate",
			wantBase: "/user.slice/user-1000.slice/user@1000.service/app.slice/warren.service"},
		{name: "already in a leaf (DelegateSubgroup=daemon)", own: "/system.slice/warren.service/daemon",
			delegate: "system.slice/warren.service", wantBase: "/system.slice/warren.service"},
		{name: "not delegated", own: "/user.slice/user-0.slice/session-3.scope"},
		{name: "outside the namespace's view", own: "/../system.slice/x.service"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.nsRoot {
				writeFiles(t, root, map[string]string{"cgroup.type": "domain"})
			}
			if strings.HasPrefix(tc.own, "/") && !strings.HasPrefix(tc.own, "/..") {
				if err := os.MkdirAll(filepath.Join(root, tc.own), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tc.delegate != "" {
				attr := tc.attr
				if attr == "" {
					attr = "trusted.delegate"
				}
				if err := unix.Setxattr(filepath.Join(root, tc.delegate), attr, []byte("1"), 0); err != nil {
					t.Skipf("set %s on %s: %v (the test directory's filesystem has no such xattrs)", attr, root, err)
				}
			}
			base, leaf, stuck := delegation(root, tc.own)
			if base != tc.wantBase || leaf != tc.wantLeaf || stuck != tc.wantStuck {
				t.Errorf("delegation(%q) = %q, %q, %q; want %q, %q, %q", tc.own, base, leaf, stuck, tc.wantBase, tc.wantLeaf, tc.wantStuck)
			}
			h := &Hierarchy{version: 2, root: root, base: base, leaf: leaf, parent: "warren"}
			if got, want := h.Dirs()[0], filepath.Join(root, tc.wantBase, "warren"); got != want {
				t.Errorf("Dirs() = %q, want %q", got, want)
			}
		})
	}
}

func TestOwnCgroup(t *testing.T) {
	dir := t.TempDir()
	for in, want := range map[string]string{
		"0::/system.slice/warren.service\n":                       "/system.slice/warren.service",
		"12:pids:/user.slice\n1:name=systemd:/x\n0::/x.service\n": "/x.service",
		"0::/\n": "/",
	} {
		f := filepath.Join(dir, "cgroup")
		os.WriteFile(f, []byte(in), 0o644)
		if got, err := ownCgroup(f); err != nil || got != want {
			t.Errorf("ownCgroup(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	f := filepath.Join(dir, "v1only")
	os.WriteFile(f, []byte("4:memory:/x\n"), 0o644)
	if _, err := ownCgroup(f); err == nil {
		t.Errorf("ownCgroup without a 0:: line: no error")
	}
}

// TestEvacuateReal moves the processes of a real cgroup2 directory into its
// leaf, as Setup does with a daemon started in a delegated cgroup: a child
// started there, and a grandchild it forks, both end in the leaf.
func TestEvacuateReal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	point, err := cgroup2Mount("/proc/self/mountinfo")
	if err != nil {
		t.Skipf("no cgroup2 mount: %v", err)
	}
	// Named as testutil.TestCgroupPrefix wants: swept if the test dies.
	d := filepath.Join(point.point, fmt.Sprintf("warren-test-%d-evacuate", os.Getpid()))
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	leaf := filepath.Join(d, DaemonLeaf)
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 & exec sleep 30")
	t.Cleanup(func() {
		for _, dir := range []string{leaf, d} {
			if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
				for _, p := range strings.Fields(string(b)) {
					var pid int
					fmt.Sscan(p, &pid)
					unix.Kill(pid, unix.SIGKILL)
				}
			}
		}
		cmd.Wait()
		rmdirRetry(leaf)
		rmdirRetry(d)
	})
	fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if len(strings.Fields(string(b))) == 2 {
			break
		}
		if i > 2000 {
			t.Fatalf("the shell's child never started: cgroup.procs = %q", b)
		}
		unix.Nanosleep(&unix.Timespec{Nsec: 1e6}, nil)
	}
	if err := evacuate(d, leaf); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs")); len(strings.TrimSpace(string(b))) != 0 {
		t.Errorf("processes left in the delegated cgroup: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(leaf, "cgroup.procs")); len(strings.Fields(string(b))) != 2 {
		t.Errorf("leaf's cgroup.procs = %q, want the two sleeps", b)
	}
}
