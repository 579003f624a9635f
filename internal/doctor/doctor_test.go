package doctor

import (
	"bytes"
	"context"
	"fmt"
	"golang.org/x/sys/unix"
	"os"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/agentbin"
	"github.com/warrenhq/warren/internal/cgroup"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.SandboxMain()
	os.Exit(m.Run())
}

// TestThisHost runs every check for real: this CI machine must pass, and the
// sandbox check must really start a sandbox and leave nothing behind.
func TestThisHost(t *testing.T) {
	testutil.RequiresRoot(t)
	dir := testutil.TraversableDir(t)
	parent := fmt.Sprintf("%s%d-doc", testutil.TestCgroupPrefix, os.Getpid())
	testutil.CheckLeaks(t, parent, dir)
	checks := Run(context.Background(), Options{DataDir: dir, CgroupParent: parent})
	var out bytes.Buffer
	Print(&out, checks)
	if Failed(checks) {
		t.Fatalf("doctor fails on this host:\n%s", out.String())
	}
	want := []string{"kernel", "cgroups", "sandbox:", "data dir", "cgroup favordynmods"}
	if _, err := agentbin.Embedded(); err == nil {
		want = append(want, "sandbox program: embedded")
	}
	// The network checks pass where the kernel has nf_tables (this host);
	// a kernel built without it or its modules (the VM stage's guest boots
	// without modules) gets a warning that says how to fix it.
	network := []string{"network: veth", "network: nf_tables"}
	if fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER); err == nil {
		unix.Close(fd)
		want = append(want, network...)
	} else {
		for _, name := range network {
			if !strings.Contains(out.String(), "[warn] "+name) {
				t.Errorf("no %q warning on a kernel without nf_tables (%v) in:\n%s", name, err, out.String())
			}
		}
	}
	for _, name := range want {
		if !strings.Contains(out.String(), "[ok  ] "+name) {
			t.Errorf("no passing %q check in:\n%s", name, out.String())
		}
	}
	// The parent cgroup the checks made is gone again (CheckLeaks looks
	// for the sessions' cgroups only).
	h, err := cgroup.Detect(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range h.Dirs() {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("doctor left its parent cgroup %s", d)
			os.Remove(d)
		}
	}
}

func TestDataDirChecks(t *testing.T) {
	if c := checkDataDir("/srv/a,b"); c.OK {
		t.Errorf("a data dir with a comma passed: %+v", c)
	}
	if c := checkDataDir(t.TempDir() + "/not/yet/made"); !c.OK && c.Fix == "" {
		t.Errorf("a missing data dir on a good filesystem: %+v", c)
	}
}
